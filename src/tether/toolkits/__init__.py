"""Sandboxed tools for agents: files under a root, a shell, and a web fetch that keeps to the
public internet.

Each builder returns a `Toolkit`: iterate it for its tools, or give it to a lab agent as its
``tools=`` (it is a `ToolProvider`). What depends on the run (the root, the environment, the
credentials) can be a function of the call's `RunContext`. See the "Sandboxed tools" page for
the threat model: what each one stops, and what it does not.
"""

from __future__ import annotations

from ._fetch import Resolver, fetch_tool, html_to_markdown, system_resolver
from ._files import file_tools
from ._shell import Isolation, ShellLimits, bubblewrap_problem, shell_tool
from ._toolkit import FromRun, PathSpec, Toolkit

__all__ = [
    "FromRun",
    "Isolation",
    "PathSpec",
    "Resolver",
    "ShellLimits",
    "Toolkit",
    "bubblewrap_problem",
    "fetch_tool",
    "file_tools",
    "html_to_markdown",
    "shell_tool",
    "system_resolver",
]
