"""The batch lane in the simulation (issue 28, scenario ``batches``): a provider's Files and Batch
APIs on virtual time (``SimBatchApi``), each process's batch ports through its own faults, and
the record of which attempts a batch ran, for I15 (``Checker.check_batches``).

The simulated provider, seeded: a batch completes at a moment drawn up to the scenario's window
(scaled down from 24 h: the product's poller is given the same window as its ``bound_ms``, the
rest of its bound is the product's ``Settings.batch_bound_seconds``); some batches expire at the
window with part of their lines answered; some lose their output file (its content is a 404:
``BatchFileLost``); some return their output twice over (the same lines read twice), and some
are read by a second poller racing the first (a poller whose lease lapsed: it applies the batch
while the first is between its file read and its writes). Lines are answered as the SimLLM
answers a call: a poison document's line is a 400 (the document's fault, charged), a share of
the others a 500 (handed back uncharged), the rest a valid report.

I15 here: an attempt a batch ran is committed at most once (the ledger's I4, whoever commits it),
is charged only for a failed line of its own (never for an expiry, a lost file, a cancel or a
kill: ``check_batch_charges``), and leaves ``processing`` within the batch window plus the
product's margin (``Checker.check_batched``), plus any Redis, database or provider outage and,
after a Redis data loss, the reconciler's recovery.

The hand-backs at a batch's end (expired, lost file) count towards DOCLLM_MAX_HANDBACKS since
issue 43 (I12's counted bound applies to them; the ``batch-failures`` ending of sim/endings.py
checks them per task, BOUND), as are a failed upload's. Those of a batcher that stopped before its
upload stay uncounted and are counted apart (``BatchWatch.batch_handbacks``).
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from docllm.adapters.redis.batch_leases import RedisBatchLeases
from docllm.domain.batches.lines import parse_custom_id
from docllm.domain.batches.model import ProviderBatch
from docllm.domain.errors import BatchFileLost, PermanentError, ProviderUnavailable
from sim.fault_injection import Faulty
from sim.llm import poison_kind
from sim.observers import Gate

ENDED = frozenset({"completed", "expired", "cancelled", "failed"})


@dataclass(frozen=True)
class BatchProfile:
    """How the simulated provider treats batches (probabilities per batch, or per line)."""

    window_s: float = 600.0  # the scaled-down completion window ("24h" in production)
    p_expire: float = 0.2  # the batch expires at its window, part of its lines answered
    p_lost: float = 0.15  # its output file is lost (content: 404)
    p_twice: float = 0.2  # its output file returns every line twice
    p_race: float = 0.25  # a second poller applies it while the first is reading its files
    p_line_500: float = 0.05  # a line answered 500 (a server error: handed back uncharged)


@dataclass
class _Batch:
    id: str
    ref: str
    input_file_id: str
    created: int
    ends: int
    expires: bool
    lost: bool
    twice: bool
    race: bool
    lines: list[tuple[str, int, int]]  # (custom_id, answered at (ms), status)
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None


@dataclass
class _File:
    lines: list[str]
    batch: str | None = None
    lost: bool = False


@dataclass
class BatchCounts:
    created: int = 0
    completed: int = 0
    expired: int = 0
    cancelled: int = 0
    lost_reads: int = 0  # content reads answered 404
    twice_reads: int = 0  # content reads that returned every line twice
    races: int = 0  # a second poller applied the batch during the first one's read
    reads: Counter[str] = field(default_factory=Counter)  # file id -> content reads
    line_500: int = 0
    found: int = 0  # adoptions: a batch found by its docllm_ref (its batcher died before recording it)
    line_400: int = 0


class SimBatchApi:
    """The provider's Files and Batch APIs (``docllm.domain.batches.ports.BatchApi``), one per run."""

    def __init__(self, system: Any, profile: BatchProfile):
        self.sys, self.profile = system, profile
        self.rng = system.world.rng_for("batch-api")
        self.window_ms = int(profile.window_s * 1000)
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self.ids = itertools.count(1)
        self.counts = BatchCounts()
        self.failed_lines: set[tuple[int, int]] = set()  # (task, attempt) with a failed line in a result file
        self.racer: Any = None  # a BatchPoller of no process: the second poller of a race

    def _up(self, what: str) -> None:
        if self.sys.llm.down_since is not None:
            raise ProviderUnavailable(f"batch provider unavailable (simulated outage) on {what}")

    # -- BatchApi --------------------------------------------------------------------------------
    def upload(self, jsonl: bytes, name: str) -> str:
        self._up("upload")
        file_id = f"file-{next(self.ids)}"
        self.files[file_id] = _File(jsonl.decode().splitlines())
        return file_id

    def create(self, input_file_id: str, ref: str) -> ProviderBatch:
        self._up("create")
        source = self.files.get(input_file_id)
        if source is None:
            raise PermanentError(f"no file {input_file_id}")
        p, r, now = self.profile, self.rng, self.sys.world.now
        if not self.sys.faults_active:  # the faults are over: batches end well (I2's drain)
            p = replace(p, p_expire=0.0, p_lost=0.0, p_twice=0.0, p_race=0.0)
        expires = r.random() < p.p_expire
        delay = self.window_ms if expires else int(r.uniform(0.05, 1.0) * self.window_ms)
        lines = []
        for raw in source.lines:
            custom_id = json.loads(raw)["custom_id"]
            done = now + int(r.uniform(0.1, 0.9 if not expires else 1.6) * delay)
            lines.append((custom_id, done, self._status(custom_id, r.random())))
        lost, twice, race = r.random() < p.p_lost, r.random() < p.p_twice, r.random() < p.p_race
        name = f"batch-{next(self.ids)}"
        batch = _Batch(name, ref, input_file_id, now, now + delay, expires, lost, twice and not lost, race, lines)
        self.batches[batch.id] = batch
        self.counts.created += 1
        self.sys.world.log("note", f"batch {batch.id} of {ref[:8]} created ({len(lines)} lines, ends in {delay}ms)")
        return self._seen(batch)

    def retrieve(self, batch_id: str) -> ProviderBatch:
        self._up("retrieve")
        batch = self.batches.get(batch_id)
        if batch is None:
            raise PermanentError(f"no batch {batch_id}")
        return self._seen(self._advanced(batch))

    def find(self, ref: str) -> ProviderBatch | None:
        self._up("find")
        found = [b for b in self.batches.values() if b.ref == ref]
        self.counts.found += bool(found)
        return self._seen(self._advanced(found[-1])) if found else None

    def cancel(self, batch_id: str) -> None:
        self._up("cancel")
        batch = self._advanced(self.batches[batch_id])
        if batch.status not in ENDED:
            self._finish(batch, "cancelled", self.sys.world.now)

    def content(self, file_id: str) -> list[str]:
        self._up("content")
        self.counts.reads[file_id] += 1
        f = self.files.get(file_id)
        if f is None or f.lost:
            self.counts.lost_reads += 1
            raise BatchFileLost(f"file {file_id} not found (simulated lost file)")
        batch = self.batches.get(f.batch) if f.batch else None
        if batch is not None and batch.race and self.racer is not None:
            batch.race = False  # one race per batch; the racer's own read must not race again
            self.counts.races += 1
            self.sys.world.log("note", f"batch {batch.id}: a second poller applies it during this read")
            try:
                self.racer._visit(batch.ref, "racer")
            except Exception as exc:  # noqa: BLE001 - Redis or the database down: no race this time
                self.sys.world.log("note", f"the racing poller failed: {exc}")
        if batch is not None and batch.twice:
            self.counts.twice_reads += 1
            return f.lines + f.lines
        return list(f.lines)

    # -- the provider's side -------------------------------------------------------------------
    def _status(self, custom_id: str, draw: float) -> int:
        line = parse_custom_id(custom_id)
        book = self.sys.ledger.books.get(line.task_id)
        if book is not None and poison_kind(book.name) is not None:
            return 400
        return 500 if draw < self.profile.p_line_500 else 200

    def _advanced(self, batch: _Batch) -> _Batch:
        now = self.sys.world.now
        if batch.status in ENDED:
            return batch
        if now >= batch.ends:
            self._finish(batch, "expired" if batch.expires else "completed", batch.ends)
        elif now >= batch.created + (batch.ends - batch.created) // 10:
            batch.status = "in_progress"
        return batch

    def _finish(self, batch: _Batch, status: str, at: int) -> None:
        out, errs = [], []
        for custom_id, done, code in batch.lines:
            if done > at:
                unanswered = {"code": f"batch_{status}", "message": f"not executed: the batch {status}"}
                errs.append(json.dumps({"custom_id": custom_id, "response": None, "error": unanswered}))
                continue
            if code != 200:
                line = parse_custom_id(custom_id)
                self.failed_lines.add((line.task_id, line.attempt))
                if code == 400:
                    self.counts.line_400 += 1
                else:
                    self.counts.line_500 += 1
            response = {"status_code": code, "body": _body(code)}
            (out if code == 200 else errs).append(
                json.dumps({"custom_id": custom_id, "response": response, "error": None})
            )
        batch.status = status
        if status == "completed":
            self.counts.completed += 1
        elif status == "expired":
            self.counts.expired += 1
        else:
            self.counts.cancelled += 1
        if out:
            batch.output_file_id = f"file-{next(self.ids)}"
            self.files[batch.output_file_id] = _File(out, batch.id, lost=batch.lost)
        if errs:
            batch.error_file_id = f"file-{next(self.ids)}"
            self.files[batch.error_file_id] = _File(errs, batch.id)
        self.sys.world.log("note", f"batch {batch.id} {status}: {len(out)} answered, {len(errs)} not")

    def _seen(self, batch: _Batch) -> ProviderBatch:
        return ProviderBatch(
            batch.id, batch.status, batch.input_file_id, batch.output_file_id, batch.error_file_id, batch.ref
        )


def _body(code: int) -> dict[str, Any]:
    """A line's body as the SimLLM answers a call: a report without findings, or an error."""
    if code == 400:
        said = {"message": "Poisoned document (sim).", "type": "invalid_request_error", "param": "messages"}
        return {"error": {**said, "code": "context_length_exceeded"}}
    if code != 200:
        return {"error": {"message": "The server had an error.", "type": "server_error", "param": None, "code": None}}
    content = json.dumps({"findings": [], "summary": "simulated review"})
    return {
        "id": "chatcmpl-sim",
        "object": "chat.completion",
        "model": "sim-llm",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 800, "completion_tokens": 200, "total_tokens": 1000},
    }


class BatchRecord:
    """The batch store as the harness sees it: which attempts each batch ran, and when it was
    opened (I15), recorded as the product records them (``open``)."""

    def __init__(self, store: Any, system: Any):
        self._store, self.sys = store, system

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._store, attr)

    def open(self, ref: str, deployment: str, members: Any, now_ms: int, max_chunk_chars: int | None = None) -> Any:
        done = self._store.open(ref, deployment, members, now_ms, max_chunk_chars)
        for task_id, attempt in members:
            self.sys.batch_watch.opened(int(task_id), int(attempt), ref)
        return done


class BatchWatch:
    """The run's batch lane: the provider, the shared record, the racing poller, and each
    process's batch ports through its faults."""

    def __init__(self, system: Any, profile: BatchProfile):
        self.sys = system
        self.api = SimBatchApi(system, profile)
        self.store = BatchRecord(system.container.batch_store(), system)
        self.batched: dict[tuple[int, int], int] = {}  # (task, attempt) -> when its batch was opened (true ms)
        self.refs: dict[tuple[int, int], str] = {}
        self.batch_handbacks: Counter[int] = Counter()  # task -> hand-backs at its batch's end (uncounted)
        s = system.settings
        # The poller's give-up (24 h + 60 s in production) at the scaled window, and I15's bound:
        # the product's ``batch_bound_seconds`` with that give-up in place of its own.
        self.give_up_ms = int((profile.window_s + (s.batch_give_up_seconds - 24 * 3600)) * 1000)
        margin = s.batch_bound_seconds - s.batch_give_up_seconds
        self.bound_ms = self.give_up_ms + int(margin * 1000)

    def opened(self, task_id: int, attempt: int, ref: str) -> None:
        self.batched[(task_id, attempt)] = self.sys.world.now
        self.refs[(task_id, attempt)] = ref
        self.sys.world.log("note", f"attempt {attempt} in batch {ref[:8]}", task_id)

    def ports(self, actor: Any, queue: Any) -> dict[str, Any]:
        """The container overrides of a process's batch ports: the provider, the record (the
        database's outages) and the batch leases (Redis's, on the authority clock, renewing the
        members' leases through the process's own queue), each through its crash budget."""
        s, sys = self.sys.settings, self.sys
        leases = RedisBatchLeases(sys.client, s.queue_prefix, sys.clock, queue)
        return {
            "batch_api": Faulty(self.api, actor.budget, "batch_api"),
            "batch_store": Faulty(Gate(self.store, sys.down, "db", sys.ledger), actor.budget, "batch_store"),
            "batch_leases": Faulty(Gate(leases, sys.down, "redis", sys.ledger), actor.budget, "batch_leases"),
        }

    def monotonic(self) -> float:
        """A process's own clock, on virtual time (seconds): the poller watches a batch's idle time on it."""
        return float(self.sys.world.now) / 1000

    def scaled(self, parts: Any) -> None:
        """The product's poller given the scenario's window (its ``bound_ms``, the one number the
        product derives from the provider's 24 h)."""
        if parts.poller is not None:
            parts.poller.bound_ms = self.give_up_ms
            parts.poller.monotonic = self.monotonic


def batch_lane_for(name: str) -> tuple[str, str | None]:
    """The lane of the task ``name`` in the ``batches`` scenario: three in four bulk (by batch),
    the rest interactive (realtime beside them); fixed by its name, so a run is deterministic."""
    return ("bulk" if zlib.crc32(name.encode()) % 4 else "interactive"), None
