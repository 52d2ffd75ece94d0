"""Grouping the calls that a process's port threads make at once into one call per group: the
store's starts and end-of-attempt writes (``store_batcher``), the queue's acks (``grouped_acks``).

The callers are the port-call threads. Each hands its item over and waits for the group that
carries it. There is no thread of its own: a waiting caller leads a group (runs it on its own
thread) when one may go, and every waiter's answer is set when its group ends. A group may go when:

- no group is in flight: at once, with whatever is waiting (a lone item is not delayed);
- one group is in flight and ``max_in_flight`` allows another: once the oldest waiting item has
  lingered ``linger_s``, or a full group (``max_group`` by ``size``) is waiting.

So under load the groups form while earlier ones are in flight, and an item waits at most one
linger plus the groups ahead of it. Each waiter sleeps on a condition of its own, until its own
linger is over at most: a group's end wakes its members and the oldest sleeping waiter (who may
lead the next group), not every waiting thread (with 32 port threads, waking them all at each
group's end cost a third of the grouping's CPU).
A group that fails for an outage (``Unavailable``: the server is down) fails every item it carried
with the same error: each caller retries as it would a single call. A group that fails for any other
reason (one item the server refuses: a report it cannot store) is sent again as two halves, and so
on down to single items (``send_bisected``): only the item that still fails alone hears of its
error, and the others get their answers (issue 44).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Generic, TypeVar

from docllm.domain.errors import Unavailable

Item = TypeVar("Item")
Answer = TypeVar("Answer")

MAX_GROUP = 64

log = logging.getLogger("docllm.groups")
MAX_IN_FLIGHT = 2


def may_go(in_flight: int, max_in_flight: int, size: int, max_group: int, lingered_at: float, now: float) -> bool:
    """Whether a group may go now (the module's rule): none is in flight, or one is and another is
    allowed once the oldest waiting item has lingered (``now`` has reached ``lingered_at``, its
    arrival plus the linger: the time a caller sleeps until, so that a wake at it always goes) or a
    full group is waiting. ``size``: what is waiting."""
    if in_flight >= max_in_flight:
        return False
    return not in_flight or size >= max_group or now >= lingered_at


def check_answers(group: Sized, answers: Sized) -> None:
    """A ``send`` answers one per item: otherwise an item's caller would wait for ever."""
    if len(answers) != len(group):
        raise RuntimeError(f"a group of {len(group)} got {len(answers)} answers")


@dataclass(frozen=True)
class Failed:
    """An item's answer in ``send_bisected``: the error its group (or it alone) failed with."""

    error: Exception


def send_bisected(send: Callable[[list[Item]], Sequence[Answer]], items: list[Item]) -> list[Answer | Failed]:
    """``send(items)``'s answers, one per item. An outage fails the items it hit; any other error
    sends the group again as two halves, down to single items: an item that fails alone gets
    its error (a ``Failed``), and the others their answers. An outage met while halving fails only
    the half it hit (the other half landed: its callers must not retry as if it had not)."""
    try:
        answers = list(send(items))
        check_answers(items, answers)
        return answers  # type: ignore[return-value]  # Answer is not a Failed
    except Unavailable as exc:
        return [Failed(exc)] * len(items)
    except Exception as exc:  # noqa: BLE001 - whose fault it is shows when it is alone
        if len(items) == 1:
            return [Failed(exc)]
        log.warning(
            "a group of %d was refused (%s: %.300s); sending it again in halves", len(items), type(exc).__name__, exc
        )
    half = len(items) // 2
    return send_bisected(send, items[:half]) + send_bisected(send, items[half:])


def bisecting(send: Callable[[list[Item]], Sequence[Answer]]) -> Callable[[list[Item]], list[Answer | Failed]]:
    """``send`` as ``send_bisected`` sends (named as ``send`` is, for the port calls' counts)."""

    @functools.wraps(send)
    def bisected(items: list[Item]) -> list[Answer | Failed]:
        return send_bisected(send, items)

    return bisected


@dataclass
class _Waiting(Generic[Item, Answer]):
    item: Item
    size: int
    at: float
    wake: threading.Condition  # on the grouper's lock: woken when done, or as the oldest asleep when a group may go
    taken: bool = False  # in a group: it only waits for that group's end
    asleep: bool = False  # its thread waits on ``wake`` (not leading a group)
    done: bool = False
    answer: Answer | None = None
    error: BaseException | None = None


class Grouper(Generic[Item, Answer]):
    """``submit(item)`` is ``send([item])[0]``, with the items of callers that wait at once sent
    together. ``send`` answers one per item, in order."""

    def __init__(
        self,
        send: Callable[[list[Item]], Sequence[Answer]],
        size: Callable[[Item], int] = lambda item: 1,
        linger_s: float = 0.005,
        max_group: int = MAX_GROUP,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.send, self.size = send, size
        self.linger_s, self.max_group, self.max_in_flight = linger_s, max_group, max_in_flight
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: deque[_Waiting[Item, Answer]] = deque()
        self.in_flight = 0
        self.groups = 0  # groups sent so far, and the items they carried (for tests and benchmarks)
        self.requests = 0

    def waiting(self) -> int:
        """Items waiting for a group (for tests and benchmarks)."""
        with self._lock:
            return len(self._waiting)

    def submit(self, item: Item) -> Answer:
        mine = _Waiting[Item, Answer](item, self.size(item), self._clock(), threading.Condition(self._lock))
        with self._lock:
            self._waiting.append(mine)
            while not mine.done:
                group = self._take()
                if group is None:
                    mine.asleep = True
                    mine.wake.wait(self._nap(mine))
                    mine.asleep = False
                    continue
                self._lock.release()
                try:
                    self._send(group)
                finally:
                    self._lock.acquire()
                    self.in_flight -= 1
                    self._wake_oldest()
        if mine.error is not None:
            raise mine.error
        return mine.answer  # type: ignore[return-value]  # set with done, unless error is

    def _wake_oldest(self) -> None:
        """A group may go: the oldest waiting item whose thread sleeps looks again (one that leads
        a group now looks when that group ends)."""
        for waiting in self._waiting:
            if waiting.asleep:
                waiting.wake.notify()
                return

    def _take(self) -> list[_Waiting[Item, Answer]] | None:
        """The group to send now (taken off the waiting line), or None."""
        if not self._waiting:
            return None
        size, lingered_at = sum(w.size for w in self._waiting), self._waiting[0].at + self.linger_s
        if not may_go(self.in_flight, self.max_in_flight, size, self.max_group, lingered_at, self._clock()):
            return None
        group: list[_Waiting[Item, Answer]] = []
        size = 0
        while self._waiting and (not group or size + self._waiting[0].size <= self.max_group):
            waiting = self._waiting.popleft()
            waiting.taken = True
            group.append(waiting)
            size += waiting.size
        self.in_flight += 1
        return group

    def _nap(self, mine: _Waiting[Item, Answer]) -> float | None:
        """How long ``mine``'s thread sleeps before it looks again: until its own linger is over
        (the oldest's is over by then too, so a group may go), or until woken (its group's end, or
        a group's end when it is the oldest asleep). Each waiter keeps its own time: they do not
        all wake at once, and one still waiting leads when the oldest's thread is busy leading."""
        if mine.taken or self.in_flight >= self.max_in_flight:
            return None
        at = max(mine.at, self._waiting[0].at)  # the oldest's linger decides (and may be the later)
        return max(0.0, at + self.linger_s - self._clock())

    def _send(self, group: list[_Waiting[Item, Answer]]) -> None:
        try:
            answers = send_bisected(self.send, [w.item for w in group])
        except BaseException as exc:  # noqa: BLE001 - every item of the group hears of it
            with self._lock:
                for waiting in group:
                    waiting.error, waiting.done = exc, True
                    waiting.wake.notify()
            return
        with self._lock:
            self.groups += 1
            self.requests += len(group)
            for waiting, answer in zip(group, answers, strict=True):  # one per item (send_bisected)
                if isinstance(answer, Failed):
                    waiting.error = answer.error
                else:
                    waiting.answer = answer
                waiting.done = True
                waiting.wake.notify()
