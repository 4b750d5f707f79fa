"""The project registry as the pages see it: reloaded when the project's files change.

A registry loaded from a config file (`Registry.config_path`) is watched: at most once a second,
a page load compares the modification times of the config file and of every imported module
file under the project directory with what they were at the last load. When one changed, the
project's modules are forgotten and the registry is loaded again, so an agent added to the
project shows up without restarting the server. A reload that fails keeps the registry that
worked and reports why on every page until the files are fixed.

The stores stay the ones the server was started with: a reloaded runtime module makes a new
`Runtime` object, but only its definitions (agents, workflows) are read from it.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from ..lab import Registry, load_registry

__all__ = ["RegistrySource"]

logger = logging.getLogger("tether.ui")

_CHECK_EVERY = 1.0
"""Seconds between two looks at the files (a page load in between reuses the last look)."""


class RegistrySource:
    """Hands out the current registry, reloading it when the project's files changed."""

    def __init__(self, registry: Registry | None, *, watch: bool = True) -> None:
        self._registry = registry
        self.error: str | None = None
        """Why the last reload failed (the registry before it is still in use), or None."""
        self._watch = watch and registry is not None and registry.config_path is not None
        self._checked = 0.0
        self._stamps: dict[str, float] = self._stamp() if self._watch else {}

    @property
    def registry(self) -> Registry | None:
        if self._watch:
            now = time.monotonic()
            if now - self._checked >= _CHECK_EVERY:
                self._checked = now
                self._maybe_reload()
        return self._registry

    def _files(self) -> list[str]:
        registry = self._registry
        assert registry is not None and registry.config_path is not None
        files = [str(registry.config_path)]
        files.extend(self._project_modules().values())
        return files

    def _project_modules(self) -> dict[str, str]:
        """Imported modules whose file lies under the project directory (not in a venv)."""
        registry = self._registry
        assert registry is not None
        root = str(registry.root.resolve()) + os.sep
        out: dict[str, str] = {}
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not isinstance(file, str) or not file.startswith(root):
                continue
            if "site-packages" in file or f"{os.sep}.venv{os.sep}" in file:
                continue
            out[name] = file
        return out

    def _stamp(self) -> dict[str, float]:
        stamps: dict[str, float] = {}
        for file in self._files():
            try:
                stamps[file] = os.stat(file).st_mtime
            except OSError:
                stamps[file] = -1.0
        return stamps

    def _maybe_reload(self) -> None:
        stamps = self._stamp()
        if stamps == self._stamps:
            return
        old = self._registry
        assert old is not None and old.config_path is not None
        for name in self._project_modules():
            sys.modules.pop(name, None)
        try:
            fresh = load_registry(old.config_path)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            logger.warning("the project registry could not be reloaded: %s", self.error)
            # Keep the registry that worked; look again when the files change again.
            self._stamps = stamps
            return
        # The pages read the stores the server started with, whatever runtime the module made.
        fresh.runtime = old.runtime
        self._registry = fresh
        self.error = None
        self._stamps = self._stamp()
        logger.info("the project registry changed on disk and was reloaded")
