"""Port wrappers that crash on cue: the property tests and the simulation use them to stop an
actor between any two port calls, the way a SIGKILL would."""

from __future__ import annotations

from typing import Any


class Crash(BaseException):
    """The actor died here. A BaseException so that no ``except Exception`` in a service eats it."""


class CrashBudget:
    """Lets ``calls`` more port calls through, then crashes the next one; None = never crash."""

    def __init__(self) -> None:
        self.remaining: int | None = None
        self.log: list[str] = []

    def arm(self, calls: int) -> None:
        self.remaining = calls

    def disarm(self) -> None:
        self.remaining = None

    def tick(self, what: str) -> None:
        if self.remaining is None:
            return
        if self.remaining <= 0:
            self.remaining = None
            self.log.append(f"crash before {what}")
            raise Crash(what)
        self.remaining -= 1


class Faulty:
    """Proxies every public method of ``target`` through ``budget``."""

    def __init__(self, target: Any, budget: CrashBudget, name: str):
        self._target, self._budget, self._name = target, budget, name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if attr.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._budget.tick(f"{self._name}.{call_name(attr, args, kwargs)}")
            return value(*args, **kwargs)

        return call


def call_name(attr: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The name a crash point is armed on. A store's group (``write_group``, which carries every
    start and end-of-attempt write since issue 31) is named by what it holds, as its single-row
    form was: "start_attempt" for starts alone, the write's kind ("commit", "retry", "fail",
    "hand_back") when all its writes are of one kind and it has no starts; a mixed group keeps
    "write_group". Without this, the points armed on "repo.commit" and the like never fire. The
    worker's grouped acks (``ack_many``) are "ack", as they were before they were grouped."""
    if attr == "ack_many":
        return "ack"
    if attr != "write_group":
        return attr
    writes, starts = group_of(args, kwargs)
    kinds = {w.kind.value for w in writes}
    if starts and not writes:
        return "start_attempt"
    if len(kinds) == 1 and not starts:
        return kinds.pop()
    return attr


def group_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The writes and the starts of a ``write_group(writes, starts=())`` call, from its arguments."""
    writes = kwargs.get("writes", args[0] if args else ())
    starts = kwargs.get("starts", args[1] if len(args) > 1 else ())
    return writes, starts
