"""The suite's wait on a condition (conftest.wait_until), which stands in for sleeps: it returns
what the condition gave once it holds, and a wait in vain fails in bounded time, saying what it
waited for."""

from __future__ import annotations

import time

import pytest

from conftest import wait_until


async def test_a_wait_returns_the_conditions_value_once_it_holds() -> None:
    ticks: list[int] = []

    async def third_tick() -> str | bool:
        ticks.append(1)
        return len(ticks) >= 3 and "ready"

    assert await wait_until(third_tick, "the third tick") == "ready"
    assert len(ticks) == 3
    assert await wait_until(lambda: [1], "a plain function's value") == [1]


async def test_a_wait_in_vain_fails_in_time_naming_what_it_waited_for() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"^waited 0\.05 s for the moon, in vain$"):
        await wait_until(lambda: False, "the moon", timeout=0.05)
    assert time.monotonic() - started < 5
