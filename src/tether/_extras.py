"""The error of a module whose optional extra is not installed, worded once."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(needs: str, extra: str) -> ImportError:
    """The ImportError a module raises (`from` the one that failed) when an optional
    dependency is missing: `needs` says who needs what ("tether.otel needs OpenTelemetry"),
    then the line that installs `extra`."""
    return ImportError(f"{needs}: pip install 'tether[{extra}]'")
