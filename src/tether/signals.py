"""Abort signals: cancel a turn from outside the task that runs it."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["AbortController", "AbortSignal"]


class AbortSignal:
    """Read side of an AbortController. Cheap to check (`aborted`), and callbacks fire on abort."""

    __slots__ = ("_callbacks", "aborted", "reason")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: object = None
        self._callbacks: list[Callable[[], None]] = []

    def add_callback(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` on abort (now if already aborted); returns a function that unregisters it."""
        if self.aborted:
            fn()
            return lambda: None
        self._callbacks.append(fn)

        def remove() -> None:
            try:
                self._callbacks.remove(fn)
            except ValueError:
                pass

        return remove

    def _fire(self, reason: object) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()


class AbortController:
    """`controller.abort()` cancels whatever was started with `signal=controller.signal`."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        self.signal._fire(reason)
