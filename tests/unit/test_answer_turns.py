"""Answer turns (``adapters.llm.answer_turns``): at most ``width`` callers go on per event-loop
iteration, first come first served; a cancelled waiter takes no turn; each loop has its own."""

from __future__ import annotations

import asyncio
from collections import Counter

from docllm.adapters.llm.answer_turns import AnswerTurns, take_turn
from tests.support.loop_iterations import Iterations


def test_at_most_width_callers_go_on_per_iteration_in_the_order_they_came():
    async def main() -> list[tuple[int, int]]:
        loop = asyncio.get_running_loop()
        turns, iterations, passed = AnswerTurns(loop, width=4), Iterations(loop), []

        async def caller(i: int) -> None:
            await turns.take()
            passed.append((i, iterations.n))

        await asyncio.gather(*(caller(i) for i in range(18)))  # all 18 arrive in one iteration
        return passed

    passed = asyncio.run(main())
    assert [i for i, _ in passed] == list(range(18))  # first come first served
    per_iteration = Counter(iteration for _, iteration in passed)  # in the order they went on
    assert list(per_iteration.values()) == [4, 4, 4, 4, 2], per_iteration  # 4 an iteration, 5 iterations


def test_a_cancelled_waiter_takes_no_turn():
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        turns, iterations, passed = AnswerTurns(loop, width=1), Iterations(loop), []

        async def caller(i: int) -> None:
            await turns.take()
            passed.append(iterations.n)

        tasks = [asyncio.create_task(caller(i)) for i in range(3)]
        await asyncio.sleep(0)  # the first went on; the second and third wait
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return passed

    first, third = asyncio.run(main())
    # The next hand-out (the iteration after the first's) skips the cancelled one and gives the
    # third its turn; it goes on in the iteration after that. Had the cancelled one been given a
    # turn, the third would have waited for one more hand-out (first + 3).
    assert third == first + 2


def test_each_event_loop_has_its_own_turns():
    async def burst() -> int:
        await asyncio.gather(*(take_turn() for _ in range(40)))
        return 40

    # A loop that ended while turns were handed out leaves nothing that holds up the next one.
    assert asyncio.run(burst()) == 40
    assert asyncio.run(asyncio.wait_for(burst(), 5)) == 40
