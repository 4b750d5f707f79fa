"""A bare stdio MCP server (no SDK, starts fast) whose misbehaviour the tests choose by flag.

python mcp_raw_stdio_server.py [--junk] [--version V] [--crash-on-call] [--ignore-eof]
                           [--exit-now CODE] [--silent] [--only-text] [--usage]
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    if "--usage" in argv:  # a program that is not an MCP server: its help, and goodbye
        sys.stdout.write("usage: tool [--verbose] FILE\n  Converts FILE.\n")
        return 2
    if "--only-text" in argv:  # reads, and answers every line in prose
        for _ in sys.stdin:
            sys.stdout.write("Hello! Type a command, or help.\n")
            sys.stdout.flush()
        return 0
    if "--exit-now" in argv:
        sys.stderr.write("fatal: no config file\n")
        sys.stderr.flush()
        return int(argv[argv.index("--exit-now") + 1])
    version = argv[argv.index("--version") + 1] if "--version" in argv else None
    if "--ignore-eof" in argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--junk" in argv:
        sys.stdout.write("starting up (this line is not JSON-RPC)\n\n[1, 2]\n")
        sys.stdout.flush()
    for line in sys.stdin:
        if "--silent" in argv:
            continue  # started, reading, and never answering
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue
        if method == "initialize":
            offered = message["params"]["protocolVersion"]
            result: dict[str, object] = {
                "protocolVersion": version or offered,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
        elif method == "tools/list":
            tools = [
                {"name": n, "inputSchema": {"type": "object"}}
                for n in ("pid", "crash", "where", "stray")
            ]
            result = {"tools": tools}
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "crash" and "--crash-on-call" in argv:
                os._exit(9)
            if "--junk" in argv:
                sys.stdout.write("log: calling a tool\n")
            if name == "stray":  # an answer to a request nobody sent comes first
                stray = {"content": [{"type": "text", "text": "not yours"}]}
                send({"jsonrpc": "2.0", "id": rid + 1000, "result": stray})
            text = str(os.getpid())
            if name == "where":
                text = json.dumps({"cwd": os.getcwd(), "var": os.environ.get("TETHER_RAW_VAR")})
            result = {"content": [{"type": "text", "text": text}]}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    if "--ignore-eof" in argv:
        while True:
            time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
