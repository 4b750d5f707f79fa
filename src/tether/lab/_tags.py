"""`run_tags(tags)`: label every run started inside a block, nested ones included.

An experiment case is one episode or one workflow run, and a workflow run starts more runs
(episodes in its steps, nested workflows). Each of them records the block's tags, so every run a
case made can be found by its `experiment:` and `case:` tags. The tags live in a context
variable: they follow the tasks started inside the block (a workflow run's task, an episode's),
and nothing outside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import ConfigError

__all__ = ["context_tags", "run_tags"]

_RUN_TAGS: ContextVar[tuple[str, ...]] = ContextVar("tether_lab_run_tags", default=())


@contextmanager
def run_tags(tags: Iterable[str]) -> Iterator[None]:
    """Record `tags` on every episode and workflow run started inside the block (after the
    run's own tags; `version:` / `commit:` given here replace the automatic ones).

    ```python
    with run_tags(["experiment:baseline", "case:q1"]):
        await review.run({"topic": "CRISPR"}).result
    ```

    Raises:
        ConfigError: a tag that is not a string.
    """
    if isinstance(tags, str):
        raise ConfigError("run_tags takes a list of tags, not one string")
    values = list(tags)
    for tag in values:
        if not isinstance(tag, str):
            raise ConfigError(f"a run tag must be a string, got {tag!r:.80}")
    token = _RUN_TAGS.set(tuple(dict.fromkeys((*_RUN_TAGS.get(), *values))))
    try:
        yield
    finally:
        _RUN_TAGS.reset(token)


def context_tags() -> tuple[str, ...]:
    """The tags of the enclosing `run_tags` blocks, outermost first."""
    return _RUN_TAGS.get()
