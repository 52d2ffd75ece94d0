"""``sim.aio.VirtualTime``, the virtual-time loop the runtime's unit tests run on: time jumps to
the next timer, a coroutine's result (or error) comes back, and a run that cannot end says why."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from sim.aio import VirtualTime


def test_a_long_wait_takes_no_wall_clock_time_and_the_clock_follows_the_loop():
    vt = VirtualTime()

    async def main() -> tuple[float, int]:
        await asyncio.sleep(30.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 0.25)
        return asyncio.get_running_loop().time(), vt.now_ms()

    assert vt.run(main()) == (30.25, 30_250)
    vt.close()
    assert vt.time() == 30.25


def test_an_error_of_the_coroutine_comes_back():
    vt = VirtualTime()

    async def main() -> None:
        await asyncio.sleep(1)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        vt.run(main())
    vt.close()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("spin", "a livelock"),
        ("stuck", "nothing scheduled brings"),
        ("late", "still running after 5 s"),
    ],
)
def test_a_run_that_cannot_end_fails_and_says_why(body, why):
    vt = VirtualTime(limit_s=5.0, turns_per_instant=1_000)
    unwound = []

    async def main() -> None:
        try:
            if body == "spin":
                while True:
                    await asyncio.sleep(0)
            elif body == "stuck":
                await asyncio.get_running_loop().create_future()
            else:
                await asyncio.sleep(60)
        finally:
            unwound.append(True)

    with pytest.raises(AssertionError, match=why):
        vt.run(main())
    assert unwound == [True]  # cancelled, and its finally ran on the loop
    vt.close()
