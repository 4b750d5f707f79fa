"""Provider keys stored in the user's config directory (`tether keys set PROVIDER`), read after
the environment variables.

The keys live in one JSON object, ``{"openai": "sk-...", ...}``, in ``keys.json`` under
`config_dir()`, written with mode 0600 in a directory of mode 0700.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["CONFIG_DIR_ENV", "KEY_NAMES", "config_dir", "keys_path", "store_key", "stored_key"]

CONFIG_DIR_ENV = "TETHER_CONFIG_DIR"
"""Overrides where tether keeps the user's keys and its log of prompts."""

KEY_NAMES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "gemini": "gemini",
}
"""Provider -> the name its key is stored under (the two OpenAI APIs share one key)."""


def config_dir() -> Path:
    """Where tether keeps the user's files: ``$TETHER_CONFIG_DIR``, else ``tether`` in the
    platform's config directory (``$XDG_CONFIG_HOME`` or ``~/.config`` on Linux,
    ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on Windows)."""
    given = os.environ.get(CONFIG_DIR_ENV)
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "tether"


def keys_path() -> Path:
    """The file the keys are stored in."""
    return config_dir() / "keys.json"


def _read() -> dict[str, str]:
    try:
        data = json.loads(keys_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no file yet, or one that is not ours to repair: as if no key were stored
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def stored_key(provider: str) -> str | None:
    """The key stored for `provider` (see `KEY_NAMES`), or None."""
    return _read().get(KEY_NAMES.get(provider, provider)) or None


def store_key(provider: str, key: str) -> Path:
    """Store `key` for `provider`, replacing the one stored before; returns the file.

    The file is written beside itself and renamed into place, so a crash never leaves half a
    file, and is never readable by other users (0600, its directory 0700).
    """
    path = keys_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    keys = _read()
    keys[KEY_NAMES.get(provider, provider)] = key
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keys.", suffix=".json")
    try:
        os.chmod(tmp, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(keys, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
