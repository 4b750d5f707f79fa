"""The `tether` command's entry point (and ``python -m tether``).

It imports nothing of the `lab` extra until it knows the extra is installed: with the core
install alone, ``tether`` says which extra to install instead of failing with a traceback, and
``tether --version`` still answers.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

from ._version import __version__

__all__ = ["LAB_MODULES", "main", "missing_lab_modules"]

LAB_MODULES = (
    "typer",
    "rich",
    "jinja2",
    "starlette",
    "uvicorn",
    "genai_prices",
    "markdown_it",
    "ag_ui",
)
"""What the command line needs of the `lab` extra (the command, its templates, the UI, prices)."""

INSTALL_LAB = "pip install 'tether[lab]'"


def missing_lab_modules() -> list[str]:
    """The `lab` extra's modules this environment lacks (found without importing them)."""
    return [name for name in LAB_MODULES if find_spec(name) is None]


def main() -> None:
    """Run the command line, or say how to install it."""
    if sys.argv[1:] in (["--version"], ["-V"]):
        print(f"tether {__version__}")  # nothing else to load: answered at once, extra or not
        return
    missing = missing_lab_modules()
    if missing:
        print(
            f"The tether command needs the 'lab' extra, which is not installed "
            f"(missing: {', '.join(missing)}). Install it with:\n\n    {INSTALL_LAB}\n\n"
            "The library itself (import tether) works without it.",
            file=sys.stderr,
        )
        raise SystemExit(3)
    from ._startup import pause_collection, resume_collection

    pause_collection()  # turned on again once the global options are parsed (cli._app._root)
    try:
        from .cli import main as cli_main

        cli_main()
    finally:
        resume_collection()


if __name__ == "__main__":
    main()
