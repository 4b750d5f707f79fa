"""`tether._heartbeat.Heartbeat`: the one beat that renews the lab's leases and a workflow
run's, every sixth of how long they last."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from tether._heartbeat import Heartbeat


async def until(condition: Callable[[], bool]) -> None:
    """Wait for `condition` (a beat is 0.01 s; 10 s bounds a machine under load)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the heartbeat did not get there"
        await asyncio.sleep(0.005)


async def test_leases_are_renewed_each_beat_until_dropped() -> None:
    beat = Heartbeat(0.06)
    renewed: list[str] = []

    async def renew(name: str) -> bool:
        renewed.append(name)
        return True

    beat.hold("a", lambda: renew("a"))
    beat.hold("b", lambda: renew("b"))
    await until(lambda: renewed.count("a") >= 2 and renewed.count("b") >= 2)
    beat.drop("a")
    renewed.clear()
    await until(lambda: renewed.count("b") >= 1)  # the beat under way may still renew "a"
    renewed.clear()
    await until(lambda: renewed.count("b") >= 2)
    assert "a" not in renewed
    await beat.aclose()
    renewed.clear()
    await asyncio.sleep(0.03)
    assert renewed == []


async def test_a_lease_found_taken_is_dropped_and_its_holder_told_once() -> None:
    beat = Heartbeat(0.06)
    told: list[str] = []

    async def taken() -> bool:
        return False

    async def lost() -> None:
        told.append("lost")

    beat.hold("k", taken, lost)
    await until(lambda: bool(told))
    await asyncio.sleep(0.03)  # three more beats' time: told once, not renewed again
    assert told == ["lost"] and not beat.holds("k")
    await beat.aclose()


async def test_a_failed_renewal_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    beat = Heartbeat(0.06)
    calls = 0

    async def flaky() -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("store out of reach")
        return True

    with caplog.at_level(logging.WARNING, logger="tether"):
        beat.hold("k", flaky)
        await until(lambda: calls >= 2)
    assert calls >= 2 and beat.holds("k")
    assert "could not renew the lease of k" in caplog.text
    await beat.aclose()
