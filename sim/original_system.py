"""The original design's run: the note's algorithm (``sim.original``) on fakeredis and SQLite,
its Redis commands and SQL statements watched and logged, the checks reading its structures."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy import text

from sim.clocks import datetime_text
from sim.ledger import PENDING, Ledger
from sim.observers import Gate, task_of
from sim.original import KEYS, PROCESSING, READY, OriginalProducer, OriginalReaper, OriginalWorker, TaskService
from sim.system import System


class ServiceObserver:
    """Keeps the ledger from what the note's statements did. ``attempt=`` names the writer's
    attempt for the bookkeeping only; it is not passed to the service."""

    def __init__(self, service: TaskService, ledger: Ledger, budget: int):
        self._s, self._l, self._budget = service, ledger, budget
        self._log = ledger.world.log

    def insert_task(self, task_name: str, document: str) -> int:
        task_id = self._s.insert_task(task_name, document)
        self._log("call", f"db.insert_task -> {task_id}", task_id)
        self._l.created(task_id, task_name)
        return task_id

    def mark_task_processing(self, task_id: int) -> bool:
        ok = self._s.mark_task_processing(task_id)
        self._log("call", f"db.mark_task_processing -> {ok}", task_id)
        book = self._l.book(task_id)
        if ok and book is not None:
            self._l.started(book, book.attempt + 1, None, self._budget)
            book.owner_alive, book.owner = True, None  # the worker names its slot next
        return ok

    def reclaim_task(self, task_id: int, timeout_dt: Any) -> bool:
        ok = self._s.reclaim_task(task_id, timeout_dt)
        self._log("call", f"db.reclaim_task (started before {datetime_text(timeout_dt)}) -> {ok}", task_id)
        book = self._l.book(task_id)
        if ok and book is not None:
            if book.owner_alive:
                self._l.violate(
                    "I8",
                    task_id,
                    f"reclaimed while its worker {book.owner} is alive and still processing attempt {book.attempt}",
                    key=book.attempt,
                )
            book.owner_alive = False
            self._l.set_status(book, PENDING)
            self._l.mark(task_id, "reclaim")
        return ok

    def write_result(self, task_id: int, result: dict[str, Any], attempt: int = 0) -> bool:
        ok = self._s.write_result(task_id, result)
        self._log("call", f"db.write_result (attempt {attempt}) -> {ok}", task_id)
        book = self._l.book(task_id)
        if ok and book is not None:
            self._l.committed(book, attempt)
        return ok


class RedisObserver:
    """Logs the note's Redis commands; a push to ready wakes idle workers."""

    def __init__(self, client: Any, system: System):
        self._c, self._s = client, system
        self._log = system.world.log

    def __getattr__(self, command: str) -> Any:
        method = getattr(self._c, command)

        def call(*args: Any) -> Any:
            result = method(*args)
            if command in ("lpush", "rpush"):
                self._s.ready_dirty = True
            raw = result if command == "rpoplpush" else args[-1] if command in ("lpush", "lrem") else None
            task = (
                task_of(raw)
                if isinstance(raw, (bytes, str))
                else (args[1] if command in ("hset", "hget", "hdel") and isinstance(args[1], int) else None)
            )
            shown = f"{len(result)} items" if command == "lrange" else repr(result)[:50]
            self._log("call", f"redis.{command} -> {shown}", task)
            return result

        return call


class OriginalSystem(System):
    design = "original"

    def build(self) -> None:
        self.keys = KEYS
        self.service = TaskService(self.engine)
        self.gated_redis = Gate(
            RedisObserver(self.client, self), self.down, "redis", self.ledger, redis.exceptions.ConnectionError
        )
        self.gated_db = Gate(
            ServiceObserver(self.service, self.ledger, self.settings.max_attempts),
            self.down,
            "db",
            self.ledger,
            ConnectionError,
        )
        self.orphan_since: dict[bytes, int] = {}
        sc = self.scenario
        self.actors = [OriginalWorker(self, f"w{i + 1}", sc.slots) for i in range(self.n_workers)]
        self.actors += [OriginalReaper(self, f"reaper{i + 1}") for i in range(sc.reapers)]
        self.actors += [OriginalProducer(self, f"producer{i + 1}") for i in range(sc.producers)]

    def op_latency(self) -> int:
        return int(self.rng.uniform(1, 20))

    def let_go(self, task_id: int | None, owner: str) -> None:
        """A worker thread stops holding the task (finished, failed, or died): its last sign of life."""
        book = self.ledger.book(task_id) if task_id is not None else None
        if book is not None and book.owner_alive and book.owner == owner:
            book.owner_alive = False
            book.last_life = self.world.now

    def push_raw(self, raw: str) -> None:
        try:
            self.gated_redis.lpush(READY, raw.encode("utf-8", "surrogateescape"))
        except Exception as exc:  # noqa: BLE001
            self.world.log("note", f"push failed: {exc}")
            self.ledger.bad.pop(raw, None)

    def arm_point(self, actor: Any, point: str) -> None:
        mapping = {
            "worker:after_claim": "after_brpoplpush",
            "worker:after_stage": "after_brpoplpush",
            "worker:before_start": "before_mark",
            "worker:after_llm": "before_write",
            "reaper:after_reclaim": "after_reclaim",
        }
        if point == "worker:after_commit":
            actor.budget.arm_at("db.write_result", after=True)
        elif point not in mapping:
            return  # a point of the product's own steps (grouped starts): the note has none
        else:
            actor.armed.add(mapping[point])

    # -- what the checks read ----------------------------------------------------------------
    def redis_stuck(self) -> list[tuple[Any, int | None, int, str]]:
        now, items = self.world.now, self.client.lrange(PROCESSING, 0, -1)
        held: dict[bytes, int] = {}
        for worker in self.actors_of("worker"):
            if worker.alive:
                for raw, _ in worker.held.values():
                    held[raw] = held.get(raw, 0) + 1
        orphans: dict[bytes, int] = {}
        for raw in items:
            if held.get(raw, 0) > 0:
                held[raw] -= 1
            else:
                orphans[raw] = orphans.get(raw, 0) + 1
        self.orphan_since = {raw: self.orphan_since.get(raw, now) for raw in orphans}
        return [
            (raw, task_of(raw), since, "payload still in the processing list, held by no live worker,")
            for raw, since in self.orphan_since.items()
        ]

    def referenced(self) -> tuple[set[int], set[str]]:
        raws = self.client.lrange(READY, 0, -1) + self.client.lrange(PROCESSING, 0, -1)
        payloads = {r.decode("utf-8", "surrogateescape") for r in raws}
        return {t for t in map(task_of, payloads) if t is not None}, payloads

    def dead_letter_task_ids(self) -> set[int]:
        return set()

    def rows(self) -> dict[int, tuple[str, int, int]]:
        with self.engine.begin() as conn:
            found = conn.execute(text("SELECT task_id, status, attempt, retry_count FROM task_doc_llm")).all()
        return {r[0]: (r[1], r[2], r[3]) for r in found}

    def leftovers(self) -> str:
        return f"ready={self.client.llen(READY)} processing={self.client.llen(PROCESSING)}"

    def quiescent(self) -> bool:
        if self.ledger.nonterminal:
            return False
        return self.client.llen(READY) == 0 and self.client.llen(PROCESSING) == 0
