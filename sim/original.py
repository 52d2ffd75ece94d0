"""The original note's design (reference/original-design-note.txt), as written, defects included,
against the same fakeredis, the same SQLite table and the same faults as the product.

- ``worker_loop``: BRPOPLPUSH ready -> processing; decode (on failure LREM, continue); HSET
  processing_ts with the worker's own ``int(time.time())``; ``process_task`` (below); finally
  LREM + HDEL; any exception: sleep 3 s.
- ``process_task`` (the note shows only its parts): ``mark_task_processing`` (pending ->
  processing, ``processing_started_at = NOW()`` in the database session's time zone); if that
  returns False the task is skipped; the LLM; the result written with ``WHERE task_id = ?``.
  An LLM error propagates (the note catches nothing in between).
- ``reaper_loop``: LRANGE processing 0 -1; per item HGET processing_ts; skipped when missing or
  not older than PROCESSING_TIMEOUT_SECONDS by the reaper's own clock; ``reclaim_task(task_id,
  datetime.utcnow() - timeout)`` (processing and ``processing_started_at < timeout_dt`` ->
  pending, retry_count + 1); if it returns False, skipped; else LREM, HDEL, LPUSH ready.
  It sleeps REAPER_INTERVAL_SECONDS between cycles.
- No dead-letter list, no retry cap, no reconciler, no SIGTERM handler (SIGTERM kills).

Every Redis command and SQL statement is a port call that a crash can land before or after.
"""

from __future__ import annotations

import functools
import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from docllm.adapters.redis.keys import RedisKeys
from sim.clocks import datetime_text
from sim.fault_injection import Crash, Faulty
from sim.observers import task_of
from sim.world import Actor

if TYPE_CHECKING:  # pragma: no cover
    from sim.original_system import OriginalSystem

KEYS = RedisKeys("docllm")  # the note's literal key names
READY, PROCESSING, TS = KEYS.ready, KEYS.processing, KEYS.processing_ts


class TaskService:
    """The note's ``task_service`` on the ``task_doc_llm`` table, in plain SQL."""

    def __init__(self, engine: Any):
        self.engine = engine

    def _run(self, sql: str, **params: Any) -> Any:
        with self.engine.begin() as conn:
            return conn.execute(text(sql), params)

    def insert_task(self, task_name: str, document: str) -> int:
        """What an existing producer does: a pending row (server defaults fill the rest)."""
        return self._run(
            "INSERT INTO task_doc_llm (task_name, document, status) VALUES (:n, :d, 'pending')", n=task_name, d=document
        ).lastrowid

    def mark_task_processing(self, task_id: int) -> bool:
        return (
            self._run(
                "UPDATE task_doc_llm SET status = 'processing', processing_started_at = sim_db_now() "
                "WHERE task_id = :id AND status = 'pending'",
                id=task_id,
            ).rowcount
            == 1
        )

    def reclaim_task(self, task_id: int, timeout_dt: Any) -> bool:
        return (
            self._run(
                "UPDATE task_doc_llm SET status = 'pending', retry_count = retry_count + 1, "
                "processing_started_at = NULL, result = NULL WHERE task_id = :id "
                "AND status = 'processing' AND processing_started_at < :dt",
                id=task_id,
                dt=datetime_text(timeout_dt),
            ).rowcount
            == 1
        )

    def write_result(self, task_id: int, result: dict[str, Any]) -> bool:
        return (
            self._run(
                "UPDATE task_doc_llm SET status = 'success', result = :r WHERE task_id = :id",
                id=task_id,
                r=json.dumps(result),
            ).rowcount
            == 1
        )


class OriginalActor(Actor):
    def __init__(self, system: OriginalSystem, name: str):
        super().__init__(system.world, name)
        self.sys = system
        self.armed: set[str] = set()

    def ports(self) -> tuple[Any, Any]:
        return Faulty(self.sys.gated_redis, self.budget, "redis"), Faulty(self.sys.gated_db, self.budget, "db")

    def point(self, name: str) -> None:
        if name in self.armed:
            self.armed.discard(name)
            raise Crash(f"at {name}")


class OriginalWorker(OriginalActor):
    """``worker_loop`` in ``concurrency`` threads of one process (one wall clock, one fate)."""

    kind = "worker"

    def __init__(self, system: OriginalSystem, name: str, slots: int):
        super().__init__(system, name)
        self.slots = slots
        self.held: dict[int, tuple[bytes, int | None]] = {}
        self.runs: dict[int, int] = {}  # slot -> task id while the LLM runs (for the fault picker)
        self.stopping = False

    def start(self) -> None:
        self.r, self.db = self.ports()
        self.clock = self.sys.wall_clock(self.name)
        self.held, self.runs = {}, {}
        for slot in range(self.slots):
            self.after(self.sys.rng.uniform(0, 500), functools.partial(self._take, slot))

    def on_stop(self) -> None:
        self.armed.clear()
        for slot, (_raw, task_id) in self.held.items():
            self.sys.let_go(task_id, self.owner_id(slot))
            self.sys.ledger.mark(task_id, "crash", self.label)
        self.held, self.runs = {}, {}
        self.sys.unidle(self)

    def _sleep(self, slot: int, ms: int) -> None:  # except Exception: logging...; time.sleep(3)
        self.held.pop(slot, None)
        self.runs.pop(slot, None)
        self.after(ms, functools.partial(self._take, slot))

    def _take(self, slot: int) -> None:
        try:
            raw = self.r.rpoplpush(READY, PROCESSING)  # brpoplpush(..., timeout=10)
        except Exception:  # noqa: BLE001
            return self._sleep(slot, 3_000)
        if not raw:  # blocked 10 s without an item, then time.sleep(5)
            again = functools.partial(self._take, slot)
            self.sys.idle_slot(self, slot, again, 10_000, on_timeout=lambda: self.after(5_000, again))
            return
        self.held[slot] = (raw, task_of(raw))
        self.point("after_brpoplpush")
        self.after(self.sys.op_latency(), functools.partial(self._start, slot, raw))

    def _start(self, slot: int, raw: bytes) -> None:
        try:
            try:
                data = json.loads(raw.decode("utf-8"))
                task_id = int(data["task_id"])
            except Exception:  # noqa: BLE001 - "invalid processing queue item": dropped (D7)
                self.r.lrem(PROCESSING, 1, raw)
                self.held.pop(slot, None)
                return self._take_next(slot)
            self.held[slot] = (raw, task_id)
            start_ts = int(self.clock.time())
            self.r.hset(TS, task_id, start_ts)
            self.point("before_mark")
            # try: process_task(task_id) finally: LREM + HDEL. A crash runs no finally block.
            try:
                running = self._process_task(slot, raw, task_id)
            except Crash:
                raise
            except Exception:
                self._finally(slot, raw, task_id)
                raise
            if not running:
                self._finally(slot, raw, task_id)
                self._take_next(slot)
        except Exception:  # noqa: BLE001 - "unexpected error in worker loop, sleep 3s"
            self._sleep(slot, 3_000)

    def _process_task(self, slot: int, raw: bytes, task_id: int) -> bool:
        """Returns True while the LLM call runs (``_done`` goes on from there)."""
        if not self.db.mark_task_processing(task_id):
            return False
        book = self.sys.ledger.book(task_id)
        attempt = book.attempt if book else 0
        if book is not None:
            book.owner = self.owner_id(slot)
        self.runs[slot] = task_id
        latency, report, error = self.sys.llm.answer(book.name if book else "")
        if latency is not None:  # None: the call hangs forever, and so does this thread
            self.after(latency, functools.partial(self._done, slot, raw, task_id, attempt, report, error))
        return True

    def _done(self, slot: int, raw: bytes, task_id: int, attempt: int, report: Any, error: Any) -> None:
        self.runs.pop(slot, None)
        try:
            try:
                self.point("before_write")
                if error is not None:
                    self.world.log("note", f"process_task raises {type(error).__name__}: {error}", task_id)
                    raise error  # process_task raises: D3
                self.db.write_result(task_id, report, attempt=attempt)
            except Crash:
                raise
            except Exception:
                self._finally(slot, raw, task_id)
                raise
            self._finally(slot, raw, task_id)
            self._take_next(slot)
        except Exception:  # noqa: BLE001
            self._sleep(slot, 3_000)

    def owner_id(self, slot: int) -> str:
        return f"{self.label}/t{slot}"

    def _finally(self, slot: int, raw: bytes, task_id: int) -> None:
        self.sys.let_go(task_id, self.owner_id(slot))
        self.held.pop(slot, None)
        self.r.lrem(PROCESSING, 1, raw)
        self.r.hdel(TS, task_id)

    def _take_next(self, slot: int) -> None:
        self.after(1, functools.partial(self._take, slot))

    def sigterm(self) -> None:
        """No handler: the default action of SIGTERM ends the process at once."""
        grace = int(self.sys.settings.shutdown_grace_seconds * 1000)
        for slot, (_raw, task_id) in self.held.items():
            book = self.sys.ledger.book(task_id) if task_id is not None else None
            if book is not None and book.owner_alive and book.owner == self.owner_id(slot):
                self.sys.checker.expect_release(
                    task_id, book.attempt, self.world.now + grace + 2_000, f"{self.label} was stopped with SIGTERM", ""
                )
        self.crash("SIGTERM (no handler: the process ends)", count=False)


class OriginalReaper(OriginalActor):
    kind = "reaper"

    def start(self) -> None:
        self.r, self.db = self.ports()
        self.clock = self.sys.wall_clock(self.name)
        self.timeout_s = self.sys.settings.processing_timeout_seconds
        first = self.sys.rng.uniform(0, self.sys.interval_ms) if self.incarnation == 1 else 1
        self.after(first, self._cycle)

    def _cycle(self) -> None:
        before, items, settled = self.budget.calls, [], 0
        try:
            now_ts = int(self.clock.time())
            timeout_border_ts = now_ts - self.timeout_s
            timeout_threshold_dt = self.clock.utcnow() - timedelta(seconds=self.timeout_s)
            items = self.r.lrange(PROCESSING, 0, -1)
            for raw in items:
                try:
                    payload = json.loads(raw.decode("utf-8"))
                    task_id = payload.get("task_id")
                    task_name = payload.get("task_name")
                except Exception:  # noqa: BLE001
                    self.r.lrem(PROCESSING, 1, raw)
                    continue
                start_ts_raw = self.r.hget(TS, task_id)
                if start_ts_raw is None:
                    continue  # D1: never a timestamp, never reclaimed
                if int(start_ts_raw) > timeout_border_ts:
                    continue
                self.world.log(
                    "note",
                    f"task {task_id} seems stuck, start_ts={int(start_ts_raw)}, now_ts={now_ts}",
                    task_id if isinstance(task_id, int) else None,
                )
                if not self.db.reclaim_task(task_id, timeout_threshold_dt):
                    continue  # D2: the row says otherwise, skipped forever
                self.point("after_reclaim")
                self.r.lrem(PROCESSING, 1, raw)
                self.r.hdel(TS, task_id)
                self.r.lpush(READY, json.dumps({"task_id": task_id, "task_name": task_name}, ensure_ascii=False))
                settled += 1
        except Crash:
            raise
        except Exception:  # noqa: BLE001 - "unexpected error in reaper loop"
            pass
        self.sys.checker.reaper_cycle(self.label, self.budget.calls - before, len(items), settled)
        self.after(self.sys.interval_ms, self._cycle)


class OriginalProducer(OriginalActor):
    """An existing producer: insert the row, then LPUSH the payload."""

    kind = "producer"

    def start(self) -> None:
        self.r, self.db = self.ports()
        for at, name, doc in self.sys.pending_arrivals(self):
            self.world.at(at, functools.partial(self._submit, name, doc), self)

    def _submit(self, name: str, doc: str) -> None:
        if not self.sys.arrival_open(name):
            return
        task_id = None
        try:
            task_id = self.db.insert_task(name, doc)
            self.sys.arrival_done(name)
            self.r.lpush(READY, json.dumps({"task_id": task_id, "task_name": name}, ensure_ascii=False))
        except Crash:
            if task_id is not None:
                self.sys.ledger.cause(task_id, "the producer died between its insert and its push")
            raise
        except Exception:  # noqa: BLE001 - the platform's request failed
            if task_id is None:
                self.after(2_000, functools.partial(self._submit, name, doc))
            else:
                self.sys.ledger.cause(task_id, "the producer's push failed after its insert")
