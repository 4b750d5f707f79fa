"""The one error tree: every class is exported from `tether`, and the docstring draws them all."""

from __future__ import annotations

import inspect

import tether
from tether import errors


def test_every_error_is_exported_from_tether_and_drawn_in_the_tree() -> None:
    classes = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.TetherError)
    }
    # errors.__all__ is made from the classes; the package's own list is written out.
    assert classes == set(errors.__all__) and classes <= set(tether.__all__)
    for name in classes:
        assert getattr(tether, name) is getattr(errors, name)
        assert f" {name} " in errors.__doc__ or f"{name}\n" in errors.__doc__


def test_tool_error_is_a_tether_error_that_tools_still_export() -> None:
    from tether.tools import ToolError  # type: ignore[attr-defined]  # the old spelling, kept

    assert ToolError is tether.ToolError and issubclass(ToolError, tether.TetherError)
