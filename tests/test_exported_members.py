from __future__ import annotations

import types

import tether


def _isort_key(name: str) -> tuple[int, str]:
    # constants, then classes, then functions: the order ruff's RUF022 keeps
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def test_all_is_sorted_and_every_name_exists() -> None:
    assert list(tether.__all__) == sorted(tether.__all__, key=_isort_key)
    for name in tether.__all__:
        assert hasattr(tether, name), name


def test_every_public_name_is_exported() -> None:
    public = {
        name
        for name, value in vars(tether).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(tether.__all__)
