"""A stdio MCP server of the handshake era, made of the SDK's: run the script given as the
first argument as a child, answer `server/discover` with "method not found" (as servers that
predate 2026-07-28 do) and pass every other line through, both ways.

python mcp_legacy_stdio_proxy.py SERVER_SCRIPT
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    child = subprocess.Popen(
        [sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()

    def out(data: bytes) -> None:
        with lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            out(line)
        os._exit(child.wait())  # the server ended: so does its front

    threading.Thread(target=pump, daemon=True).start()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            out(json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": error}).encode())
            out(b"\n")
            continue
        try:
            child.stdin.write(line)
            child.stdin.flush()
        except BrokenPipeError:
            os._exit(child.wait())
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
