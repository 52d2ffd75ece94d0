"""The chaos scenario: the shipped programs under faults, as an operator would run them.

Real redis-server (AOF), real MariaDB (time zone +08:00), the OpenAI-compatible test server
(slow, some 429s and 500s) and several worker processes (``python -m docllm.entrypoints.worker``)
and reapers (``docllm reaper``), some with their wall clocks hours off (libfaketime). Documents go
in with ``docllm submit`` in waves while, at random moments, workers and reapers are SIGKILLed
and restarted, workers get SIGTERM or are frozen (SIGSTOP) past their lease and woken up again,
Redis is restarted and crashed, loses everything once
(FLUSHALL), MariaDB is restarted and crashed, and bad input arrives (malformed payloads pushed
straight to the ready list, rows deleted while their task is in flight, a 10 MB document).

When the faults stop, within a bound computed from the settings (:meth:`ChaosSettings.settle_bound`)
every task must be ``success`` (only the 10 MB one ``failed``), nothing ``pending`` or
``processing``, the ready/processing/delayed structures empty, every report about its own
document, exactly one commit per task by the attempt that holds the row's fencing token (counted
by a database trigger and from the logs), every bad input in the dead-letter list or failed with a
reason, and no worker process dead on its own.

Used by ``tests/e2e/test_chaos.py`` (short) and ``scripts/chaos`` (``python -m tests.e2e.chaos``;
``--soak`` for 30 minutes and 5,000 tasks).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import sqlalchemy as sa

if __package__ in (None, ""):  # `python tests/e2e/chaos.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.harness import (  # noqa: E402
    Harness,
    Probe,
    Proc,
    commits,
    find_libfaketime,
    install_commit_audit,
    product_env,
    report_matches,
    skewed,
    start_llm_server,
    wait_until,
    write_documents,
)
from tests.servers import MariaDBServer, RedisServer, ServerNotInstalled  # noqa: E402

BIG_NAME = "big-10mb.md"
UNKNOWN_TASK_ID = 987654321
MALFORMED = [  # valid UTF-8 each; see test_bad_input.py for a payload that is not
    "not json at all",
    "",
    "[1, 2, 3]",
    '{"task_name": "no id"}',
    '{"task_id": "seven", "task_name": "x"}',
    '{"task_id": -4, "task_name": "negative"}',
    '{"task_id": 1.5}',
    '{"task_id": true}',
    '{"task_id": %d, "task_name": "no such row"}' % UNKNOWN_TASK_ID,
    '{"task_id": 1, "padding": "' + "x" * 100_000 + '"}',  # over DOCLLM_MAX_PAYLOAD_BYTES
]
RECOVERY_EVENTS = ("reclaimed", "requeued", "reconciled", "released", "stale_attempt", "lease_lost",
                   "duplicate_ignored", "stale_lease_dropped", "retried", "dead_lettered")


@dataclass
class ChaosSettings:
    tasks: int = 200
    fault_seconds: float = 60.0  # how long faults go on; documents are submitted all along
    workers: int = 4
    reapers: int = 2
    concurrency: int = 3
    seed: int = 0  # 0: a random seed (printed, and in the summary, to replay a run)
    # product settings (environment of every process)
    lease_s: float = 3.0
    reaper_interval_s: float = 0.5
    reconcile_interval_s: float = 1.0
    reconcile_grace_s: float = 3.0
    retry_base_s: float = 0.25
    retry_max_s: float = 2.0
    shutdown_grace_s: float = 2.0
    max_attempts: int = 10
    llm_timeout_s: float = 10.0
    # the LLM test server
    llm_latency_ms: tuple[int, int] = (300, 2500)
    rate_429: float = 0.05
    rate_500: float = 0.05
    # faults
    process_fault_every_s: tuple[float, float] = (1.5, 3.5)
    restart_after_s: tuple[float, float] = (0.2, 2.0)
    server_fault_every_s: float = 0.0  # 0: each server fault once; else a cycle of them this often
    worker_skews: tuple[str | None, ...] = (None, "+8h", "-7h", "+26h")
    reaper_skews: tuple[str | None, ...] = ("+5h", "-3h")
    submit_skew: str | None = "-9h"
    deleted_rows: int = 3
    min_kills: int = 10  # the phase goes on past its end (kills only) until this many SIGKILLs
    big_document_bytes: int = 10 * 1024 * 1024

    @classmethod
    def soak(cls) -> ChaosSettings:
        return cls(tasks=5000, fault_seconds=30 * 60.0, process_fault_every_s=(3.0, 8.0), server_fault_every_s=180.0,
                   deleted_rows=10, reconcile_interval_s=2.0)

    def env(self) -> dict[str, str]:
        return {
            "DOCLLM_LEASE_SECONDS": str(self.lease_s),
            "DOCLLM_REAPER_INTERVAL_SECONDS": str(self.reaper_interval_s),
            "DOCLLM_RECONCILE_INTERVAL_SECONDS": str(self.reconcile_interval_s),
            "DOCLLM_RECONCILE_GRACE_SECONDS": str(self.reconcile_grace_s),
            "DOCLLM_RETRY_BASE_SECONDS": str(self.retry_base_s),
            "DOCLLM_RETRY_MAX_SECONDS": str(self.retry_max_s),
            "DOCLLM_SHUTDOWN_GRACE_SECONDS": str(self.shutdown_grace_s),
            "DOCLLM_MAX_ATTEMPTS": str(self.max_attempts),
            "DOCLLM_CONCURRENCY": str(self.concurrency),
            "DOCLLM_LLM_TIMEOUT_SECONDS": str(self.llm_timeout_s),
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_API_KEY": "test-key",
            "DOCLLM_LLM_MODEL": "test-model",
        }

    def settle_bound(self, backlog: int) -> float:
        """How long after the last fault every task must be settled (DESIGN I2), in seconds.

        - a task Redis forgot (FLUSHALL) is recovered after two sightings ``grace`` apart: at most
          2 x (grace + reconcile interval);
        - then each of at most ``max_attempts`` attempts ends by an answer (at most the slowest
          LLM answer) or by lease expiry noticed by a reaper (lease + reaper interval), plus its
          backoff (capped at ``retry_max``, at least the 1 s a 429 asks for);
        - the ``backlog`` of tasks left when the faults stopped drains at ``slots`` at a time,
          each at most the slowest answer, with half the slots lost to failed attempts;
        - 10 s for processes restarted at the end to import and connect.
        """
        slowest = self.llm_latency_ms[1] / 1000
        recovery = 2 * (self.reconcile_grace_s + self.reconcile_interval_s)
        per_attempt = max(slowest, self.lease_s + self.reaper_interval_s) + max(self.retry_max_s, 1.0)
        slots = self.workers * self.concurrency
        drain = 2 * backlog * slowest / slots
        return recovery + self.max_attempts * per_attempt + drain + 10.0


@dataclass
class Counters:
    worker_kills: int = 0
    reaper_kills: int = 0
    worker_sigterms: int = 0
    worker_pauses: int = 0
    worker_restarts: int = 0
    reaper_restarts: int = 0
    redis_restarts: int = 0
    redis_crashes: int = 0
    redis_flushes: int = 0
    mariadb_restarts: int = 0
    mariadb_crashes: int = 0
    rows_deleted: int = 0
    malformed_pushed: int = 0
    submits: int = 0
    submit_failures: int = 0

    @property
    def kills(self) -> int:
        return self.worker_kills + self.reaper_kills


@dataclass
class ChaosResult:
    summary: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class Chaos:
    """One run: set up, faults, settle, checks. ``run()`` returns the summary and the problems."""

    def __init__(self, settings: ChaosSettings, redis_server: RedisServer, mariadb_server: MariaDBServer,
                 database_url: str, workdir: Path, say: Callable[[str], None] = print):
        self.s = settings
        self.seed = settings.seed or random.SystemRandom().randrange(1, 2**31)
        self.rng = random.Random(self.seed)
        self.redis, self.mariadb = redis_server, mariadb_server
        self.workdir = workdir
        self.say = say
        prefix = f"chaos-{self.seed}"
        self.harness = Harness(workdir, product_env(redis_server.url, database_url, prefix, workdir / "home",
                                                    **settings.env()))
        self.probe = Probe(redis_server.url, database_url, prefix)
        self.count = Counters()
        self.headings: dict[str, str] = {}  # document name -> first heading
        self.submitted: dict[int, str] = {}  # task_id -> name, from `docllm submit --json`
        self.deleted: set[int] = set()
        self.big_task: int | None = None
        self.restart_at: dict[str, float] = {}  # process name -> monotonic time to start it again
        self.terminated: dict[str, float] = {}  # SIGTERMed process name -> when
        self.paused: dict[str, float] = {}  # SIGSTOPped process name -> when to SIGCONT it
        self.sigterm_seconds: list[float] = []
        self.max_lease_age_s = 0.0
        self.max_row_processing_s = 0.0
        self.max_backlog = 0
        self.problems: list[str] = []
        self.llm: Proc | None = None

    # -- set-up -------------------------------------------------------------------------------
    def _setup(self) -> None:
        h = self.harness
        self.llm, port = start_llm_server(h, latency_ms="%d-%d" % self.s.llm_latency_ms, rate_429=self.s.rate_429,
                                          rate_500=self.s.rate_500, seed=self.seed)
        h.env["DOCLLM_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        h.init_db()
        install_commit_audit(self.probe)
        self.headings = write_documents(self.workdir / "docs", self.s.tasks, "chaos")
        for i in range(self.s.workers):
            self._start(f"worker-{i + 1}")
        for i in range(self.s.reapers):
            self._start(f"reaper-{i + 1}")

    def _skew(self, name: str) -> str | None:
        kind, _, number = name.rpartition("-")
        skews = self.s.worker_skews if kind == "worker" else self.s.reaper_skews
        return skews[(int(number) - 1) % len(skews)] if skews else None

    def _start(self, name: str) -> Proc:
        h = self.harness
        skew = self._skew(name)
        if name in h.procs:
            proc = h.procs[name].start()
            if name.startswith("worker"):
                self.count.worker_restarts += 1
            else:
                self.count.reaper_restarts += 1
            return proc
        return h.worker(name, skew=skew) if name.startswith("worker") else h.reaper(name, skew=skew)

    # -- the fault phase ------------------------------------------------------------------------
    def _plan(self, start: float) -> list[tuple[float, str, float]]:
        """Server faults, SIGTERMs and bad input at fixed fractions of the phase (each at least once):
        (when, what, until when to try again if there is nothing to act on yet)."""
        d = self.s.fault_seconds
        plan = [(0.15, "flushall"), (0.30, "malformed"), (0.35, "big_document"), (0.40, "restart_redis"),
                (0.55, "restart_mariadb"), (0.70, "crash_redis"), (0.85, "crash_mariadb")]
        sigterms = max(3, int(d / 120))  # 3 in a short run, one every 2 minutes in a soak
        plan += [(0.1 + 0.8 * i / sigterms, "sigterm") for i in range(sigterms)]
        plan += [(0.3, "pause"), (0.6, "pause")]  # more come at random with the kills
        plan += [(0.25 + 0.5 * (i + 1) / (self.s.deleted_rows + 1), "delete_row") for i in range(self.s.deleted_rows)]
        if self.s.server_fault_every_s:
            cycle = ("restart_redis", "restart_mariadb", "crash_redis", "crash_mariadb")
            at, i = 0.2 * d + self.s.server_fault_every_s, 0
            while at < 0.95 * d:
                plan.append((at / d, cycle[i % len(cycle)]))
                at += self.s.server_fault_every_s
                i += 1
        retry_for = max(10.0, 0.05 * d)
        return sorted((start + frac * d, what, start + frac * d + retry_for) for frac, what in plan)

    def _fault_phase(self) -> None:
        s = self.s
        start = time.monotonic()
        end = start + s.fault_seconds
        plan = self._plan(start)
        waves = max(1, round(s.tasks / 15)) if s.tasks <= 300 else max(1, round(s.tasks / 60))
        names = sorted(self.headings)
        batches = [names[i::waves] for i in range(waves)]
        # The last wave 2 s before the faults stop, so that work is in flight when they do.
        submit_times = [start + (s.fault_seconds - 2.0) * i / max(1, waves - 1) for i in range(waves)]
        next_fault = start + self.rng.uniform(*s.process_fault_every_s)
        next_sample = next_report = start
        # `docllm submit` runs on a thread of its own, so a slow CLI start on a loaded machine does
        # not hold up the faults.
        submitter = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="submit")
        submits = []
        while (now := time.monotonic()) < end or self.count.kills < s.min_kills:
            if now >= end:  # a slow machine did not get to enough kills: more, a second apart
                next_fault = min(next_fault, now + 1.0)
            if batches and now >= submit_times[0]:
                submit_times.pop(0)
                submits.append(submitter.submit(self._submit, sorted(batches.pop(0))))
            while plan and now >= plan[0][0]:
                at, what, give_up = plan.pop(0)
                if not self._server_fault(what) and now < give_up:  # nothing to hit yet: try again soon
                    plan.append((now + 1.0, what, give_up))
                    plan.sort()
            if now >= next_fault:
                self._process_fault()
                next_fault = time.monotonic() + self.rng.uniform(*s.process_fault_every_s)
            self._restarts(time.monotonic())
            if now >= next_sample:
                self._sample()
                next_sample = now + 0.5
            if now >= next_report:
                self.say(self._progress(now - start))
                next_report = now + (15 if s.fault_seconds <= 300 else 60)
            time.sleep(0.05)
        for batch in batches:  # whatever a slow machine did not get to
            submits.append(submitter.submit(self._submit, sorted(batch)))
        for _, what, _ in plan:
            self._server_fault(what)
        for done in submits:
            done.result()
        submitter.shutdown()

    def _progress(self, elapsed: float) -> str:
        c = self.count
        try:
            counts = self.probe.counts()
        except Exception:  # noqa: BLE001 - a server is down right now
            counts = {}
        return (f"[{elapsed:6.1f}s] submitted {len(self.submitted)} rows {counts} kills {c.kills} "
                f"sigterms {c.worker_sigterms} redis {c.redis_restarts}+{c.redis_crashes}/flush {c.redis_flushes} "
                f"mariadb {c.mariadb_restarts}+{c.mariadb_crashes}")

    def _submit(self, batch: list[str]) -> None:
        if not batch:
            return
        paths = [self.workdir / "docs" / name for name in batch]
        env = skewed(self.s.submit_skew, self.harness.env["PYTHONPATH"]) if self.s.submit_skew else None
        for tries in range(5):
            result = self.harness.cli("submit", "--json", *map(str, paths), env=env, check=False)
            self.count.submits += 1
            if result.returncode == 0:
                for task in json.loads(result.stdout):
                    self.submitted[task["task_id"]] = task["task_name"]
                return
            # Rows created before the failure stay and must be settled like the others (they are
            # checked by name); submitting again may create a second row for a document: fine.
            self.count.submit_failures += 1
            self.say(f"submit failed ({result.returncode}): {result.stderr.strip()[:200]}")
            time.sleep(2.0)  # a server restarting
        self.problems.append(f"docllm submit failed 5 times for {len(batch)} documents")

    def _procs(self, kind: str) -> list[Proc]:
        return [p for p in self.harness.procs.values()
                if p.kind == kind and p.alive and p.name not in self.terminated and p.name not in self.paused]

    def _process_fault(self) -> None:
        """SIGKILL a worker (in the middle of an attempt when one is) or a reaper; now and then
        SIGSTOP a busy worker for longer than its lease instead (D5: slow but alive)."""
        workers, reapers = self._procs("worker"), self._procs("reaper")
        if workers and self.rng.random() < 0.15:
            self._pause(self._busy_worker(workers))
            return
        if reapers and (self.rng.random() < 0.25 or not workers):
            victim = self.rng.choice(reapers)
            self.count.reaper_kills += 1
        elif workers:
            victim = self._busy_worker(workers) if self.rng.random() < 0.7 else self.rng.choice(workers)
            self.count.worker_kills += 1
        else:
            return
        victim.kill()
        self.restart_at[victim.name] = time.monotonic() + self.rng.uniform(*self.s.restart_after_s)

    def _pause(self, victim: Proc) -> None:
        """Freeze a worker past its lease: another worker takes its task over, and when it wakes
        up its attempt must commit nothing (its heartbeat finds the lease gone, its commit is fenced)."""
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGSTOP)
        self.paused[victim.name] = time.monotonic() + self.s.lease_s + self.rng.uniform(0.5, 3.0)
        self.count.worker_pauses += 1

    def _pause_one(self) -> bool:
        workers = self._procs("worker")
        if not workers:
            return False
        self._pause(self._busy_worker(workers))
        return True

    def _resume(self, now: float, everyone: bool = False) -> None:
        for name, at in list(self.paused.items()):
            if everyone or now >= at:
                del self.paused[name]
                proc = self.harness.procs[name]
                if proc.alive and proc.pid is not None:
                    os.kill(proc.pid, signal.SIGCONT)

    def _sigterm(self) -> bool:
        """SIGTERM a busy worker; it must stop within the grace period (checked in ``_restarts``)."""
        serving = [w for w in self._procs("worker") if w.serving]  # before its handlers exist, SIGTERM kills it
        if not serving:
            return False
        victim = self._busy_worker(serving)
        victim.terminate()
        sent = self.terminated[victim.name] = time.monotonic()
        self.count.worker_sigterms += 1
        popen = victim.popen
        assert popen is not None

        def clock_the_stop() -> None:  # on a thread: the fault loop may be busy restarting a server
            popen.wait()
            self.sigterm_seconds.append(time.monotonic() - sent)

        threading.Thread(target=clock_the_stop, daemon=True).start()
        return True

    def _busy_worker(self, workers: list[Proc]) -> Proc:
        """A worker in the middle of an attempt when there is one (it holds a lease)."""
        try:
            holders = {lease.get("holder") for lease in self.probe.leases()}
        except Exception:  # noqa: BLE001
            holders = set()
        busy = [w for w in workers if w.worker_id in holders]
        return self.rng.choice(busy or workers)

    def _restarts(self, now: float) -> None:
        self._resume(now)
        grace_limit = self.s.shutdown_grace_s + 5.0
        for name, sent in list(self.terminated.items()):
            proc = self.harness.procs[name]
            code = proc.returncode
            if code is None and now - sent <= grace_limit:
                continue
            del self.terminated[name]
            if code is None:
                proc.kill()
                self.problems.append(f"{name} did not stop within {grace_limit:g}s of SIGTERM")
            elif code != 0:
                self.problems.append(f"{name} exited {code} after SIGTERM")
            self.restart_at[name] = now + self.rng.uniform(*self.s.restart_after_s)
        for name, at in list(self.restart_at.items()):
            if now >= at:
                del self.restart_at[name]
                self._start(name)
        for proc in list(self.harness.procs.values()):
            if (proc.kind in ("worker", "reaper") and not proc.alive and proc.name not in self.restart_at
                    and proc.name not in self.terminated):
                self.problems.append(f"{proc.name} died on its own (exit code {proc.returncode}): {proc.tail(3)}")
                self._start(proc.name)

    def _server_fault(self, what: str) -> bool:
        """A planned fault; False when it found nothing to act on (no busy worker, no task in flight)."""
        if what in ("sigterm", "delete_row", "pause"):
            done = {"sigterm": self._sigterm, "delete_row": self._delete_in_flight_row, "pause": self._pause_one}[what]()
            if done:
                self.say(f"fault: {what}")
            return done
        self.say(f"fault: {what}")
        if what == "flushall":
            self.probe.redis.flushall()
            self.count.redis_flushes += 1
        elif what == "restart_redis":
            self.redis.restart()
            self.count.redis_restarts += 1
        elif what == "crash_redis":
            self.redis.kill()
            time.sleep(self.rng.uniform(0.2, 1.0))
            self.redis.start()
            self.count.redis_crashes += 1
        elif what == "restart_mariadb":
            self.mariadb.restart()
            self.count.mariadb_restarts += 1
        elif what == "crash_mariadb":
            self.mariadb.kill()
            time.sleep(self.rng.uniform(0.2, 1.0))
            self.mariadb.start()
            self.count.mariadb_crashes += 1
        elif what == "malformed":
            for raw in MALFORMED:
                self.probe.redis.lpush(self.probe.keys.ready, raw)
            self.count.malformed_pushed += len(MALFORMED)
        elif what == "big_document":
            self._submit_big()
        return True

    def _submit_big(self) -> None:
        path = self.workdir / BIG_NAME
        heading = "# A document of ten megabytes"
        paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 16 + "\n\n"
        size = self.s.big_document_bytes
        path.write_text((heading + "\n\n" + paragraph * (size // len(paragraph) + 1))[:size], encoding="utf-8")
        # The producer accepts it; the workers' limit (DOCLLM_MAX_DOCUMENT_BYTES, 5 MB) does not.
        result = self.harness.cli("submit", "--json", str(path), check=False,
                                  env={"DOCLLM_MAX_DOCUMENT_BYTES": str(size + (1 << 20))})
        if result.returncode != 0:
            self.problems.append(f"could not submit the 10 MB document: {result.stderr.strip()[:300]}")
            return
        [task] = json.loads(result.stdout)
        self.big_task = task["task_id"]

    def _delete_in_flight_row(self) -> bool:
        try:
            leases = self.probe.leases()
        except Exception as exc:  # noqa: BLE001 - Redis is restarting
            self.say(f"delete_row: {exc}")
            return False
        candidates = [lease["task_id"] for lease in leases
                      if isinstance(lease.get("task_id"), int) and lease["task_id"] != self.big_task]
        self.rng.shuffle(candidates)
        for task_id in candidates:
            try:
                deleted = self.probe.execute("DELETE FROM task_doc_llm WHERE task_id = :id AND status = 'processing'",
                                             id=task_id)
            except Exception as exc:  # noqa: BLE001 - MariaDB is restarting
                self.say(f"delete_row: {exc}")
                return False
            if deleted == 1:
                self.deleted.add(task_id)
                self.count.rows_deleted += 1
                return True
        return False

    def _sample(self) -> None:
        try:
            now = self.probe.redis_now_ms()
            leases = self.probe.leases()
            backlog = self.probe.redis.llen(self.probe.keys.ready)
            with self.probe.engine.connect() as conn:
                age = conn.execute(sa.text(
                    "SELECT MAX(TIMESTAMPDIFF(MICROSECOND, processing_started_at, UTC_TIMESTAMP(6))) "
                    "FROM task_doc_llm WHERE status = 'processing'")).scalar()
        except Exception:  # noqa: BLE001 - a server is down right now
            return
        if leases:
            self.max_lease_age_s = max(self.max_lease_age_s, max(now - int(x["claimed_at"]) for x in leases) / 1000)
        if age is not None:
            self.max_row_processing_s = max(self.max_row_processing_s, float(age) / 1e6)
        self.max_backlog = max(self.max_backlog, backlog)

    # -- after the faults -----------------------------------------------------------------------
    def _everything_up(self) -> None:
        self._resume(time.monotonic(), everyone=True)
        self.redis.start()
        self.mariadb.start()
        deadline = time.monotonic() + self.s.shutdown_grace_s + 6
        while self.terminated and time.monotonic() < deadline:
            self._restarts(time.monotonic())
            time.sleep(0.1)
        for name in list(self.restart_at):
            self.restart_at[name] = 0.0
        self._restarts(time.monotonic())

    def _settled(self) -> bool:
        counts = self.probe.counts()
        sizes = self.probe.queue_sizes()
        return (counts["pending"] == counts["processing"] == 0
                and all(sizes[k] == 0 for k in ("ready", "processing", "delayed", "leases", "lease_index")))

    def _settle(self) -> tuple[float, float, int]:
        backlog = sum(v for k, v in self.probe.counts().items() if k in ("pending", "processing"))
        bound = self.s.settle_bound(backlog)
        started = time.monotonic()
        try:
            wait_until(self._settled, bound, "every task to settle", interval=0.25)
        except AssertionError as exc:
            self.problems.append(f"not settled within the bound of {bound:.0f}s ({backlog} tasks open when the "
                                 f"faults stopped): {exc}; counts {self.probe.counts()} redis {self.probe.queue_sizes()}")
        return time.monotonic() - started, bound, backlog

    def _check(self) -> dict[str, Any]:
        h, p, problems = self.harness, self.probe, self.problems
        stats = h.stats()
        if stats["tasks"]["pending"] or stats["tasks"]["processing"]:
            problems.append(f"docllm stats: tasks {stats['tasks']}")
        if any(stats["queue"][k] for k in ("ready", "processing", "delayed")):
            problems.append(f"docllm stats: queue {stats['queue']}")
        sizes = p.queue_sizes()
        if sizes["leases"] or sizes["lease_index"] or sizes["processing_ts"]:
            problems.append(f"leases left in Redis: {sizes}")

        rows = p.rows(with_result=False)
        missing = sorted(set(self.submitted) - set(rows) - self.deleted)
        if missing:
            problems.append(f"{len(missing)} submitted tasks have no row: {missing[:10]}")
        if self.deleted & set(rows):
            problems.append(f"deleted rows came back: {sorted(self.deleted & set(rows))}")
        statuses = h.status(*sorted(rows)) if rows else []
        intended_failures = {self.big_task} if self.big_task else set()
        by_status = collections.Counter(t["status"] for t in statuses)
        for task in statuses:
            tid, name = task["task_id"], task["task_name"]
            if tid in intended_failures:
                if task["status"] != "failed" or "over the limit" not in (task["error"] or ""):
                    problems.append(f"the 10 MB document (task {tid}) is {task['status']}: {task['error']}")
                continue
            if task["status"] != "success":
                problems.append(f"task {tid} ({name}) is {task['status']}: {task['error']}")
            elif name not in self.headings or not report_matches(task["result"], self.headings[name]):
                problems.append(f"task {tid} ({name}): the stored report is not about its document")

        # Fencing: one commit per successful task, by the attempt that holds the row's token.
        audit = commits(p)
        for tid, row in rows.items():
            made = audit.get(tid, [])
            expected = [row["attempt"]] if row["status"] == "success" else []
            if made != expected:
                problems.append(f"task {tid}: commits by attempts {made}, the row is {row['status']} "
                                f"at attempt {row['attempt']}")
        stray = sorted(set(audit) - set(rows))
        if stray:
            problems.append(f"commits for tasks without a row: {stray[:10]}")
        events = h.events()
        succeeded = collections.Counter(e["task_id"] for e in events if e["event"] == "succeeded")
        twice = {tid: n for tid, n in succeeded.items() if n > 1}
        if twice:
            problems.append(f"tasks with more than one `succeeded` event in the logs: {twice}")
        for e in events:
            if e["event"] == "succeeded" and e["task_id"] in rows and e["attempt"] != rows[e["task_id"]]["attempt"]:
                problems.append(f"task {e['task_id']}: `succeeded` by attempt {e['attempt']}, the row holds "
                                f"attempt {rows[e['task_id']]['attempt']}")

        slowest = max(self.sigterm_seconds, default=0.0)
        if slowest > self.s.shutdown_grace_s + 5:
            problems.append(f"a SIGTERMed worker took {slowest:.1f}s to stop (grace {self.s.shutdown_grace_s:g}s)")

        # Bad input: in the dead-letter list (or failed) with a reason.
        dead = h.cli_json("dead", "list", "--limit", "100000")
        reasons = collections.defaultdict(list)
        for d in dead:
            if not d["reason"]:
                problems.append(f"a dead letter without a reason: {d['payload'][:80]!r}")
            reasons[d["task_id"]].append(d["reason"])
        payloads = collections.Counter(d["payload"] for d in dead)
        for raw in MALFORMED:
            if payloads[raw] != 1:
                problems.append(f"malformed payload {raw[:50]!r} is {payloads[raw]} times in the dead-letter list")
        for tid in sorted(self.deleted):
            if not any("deleted" in r or "no row" in r for r in reasons.get(tid, [])):
                problems.append(f"task {tid} (row deleted in flight) is not dead-lettered: {reasons.get(tid)}")
        if self.big_task and not any("over the limit" in r for r in reasons.get(self.big_task, [])):
            problems.append(f"the 10 MB document's payload is not dead-lettered: {reasons.get(self.big_task)}")
        expected_dead = {None, UNKNOWN_TASK_ID, 1, self.big_task, *self.deleted}  # 1: the oversized payload
        unexpected = {tid: r for tid, r in reasons.items() if tid not in expected_dead}
        if unexpected:
            problems.append(f"unexpected dead letters: {dict(list(unexpected.items())[:10])}")

        # An error docllm logs is a bug (or a broken harness): none are allowed. Libraries' own error
        # lines (SQLAlchemy's pool failing to roll back a connection MariaDB dropped) are counted only.
        all_errors = [r for r in h.log_lines() if r.get("level") in ("error", "critical")]
        errors = [r for r in all_errors if str(r.get("logger", "")).startswith("docllm")]
        if errors:
            first = errors[0]
            problems.append(f"{len(errors)} error log lines, the first from {first['_proc']}: {first.get('message')} "
                            f"{(first.get('exc') or '')[-600:]}")
        recoveries = collections.Counter(e["event"] for e in events if e["event"] in RECOVERY_EVENTS)
        return {
            "rows": len(rows), "by_status": dict(by_status), "dead_letters": len(dead),
            "commits_max_per_task": max((len(v) for v in audit.values()), default=0),
            "recoveries": dict(sorted(recoveries.items())),
            "error_log_lines": len(all_errors),
            "error_log_messages": sorted(collections.Counter(
                f"{r.get('logger')}: {r.get('message')}"[:160] for r in all_errors).items(), key=lambda kv: -kv[1])[:8],
        }

    def _stop_all(self) -> None:
        """SIGTERM every worker and reaper: each must stop, with exit code 0, within the grace period."""
        procs = [p for p in self.harness.procs.values() if p.kind in ("worker", "reaper") and p.alive]
        for proc in procs:
            proc.terminate()
        sent = time.monotonic()
        for proc in procs:
            code = proc.wait(max(0.1, sent + self.s.shutdown_grace_s + 5 - time.monotonic()))
            if code is None:
                self.problems.append(f"{proc.name} did not stop within {self.s.shutdown_grace_s + 5:g}s of SIGTERM")
                proc.kill()
            elif code != 0:
                self.problems.append(f"{proc.name} exited {code} after SIGTERM")
        self.harness.close()

    def run(self) -> ChaosResult:
        began = time.monotonic()
        self.say(f"chaos: seed {self.seed}, {self.s.tasks} tasks, {self.s.fault_seconds:g}s of faults, "
                 f"logs in {self.harness.logs}")
        try:
            self._setup()
            set_up = time.monotonic() - began
            self._fault_phase()
            faults_done = time.monotonic()
            self.say("faults stopped; waiting for every task to settle")
            self._everything_up()
            settle_s, bound, backlog = self._settle()
            checks = self._check()
            self._stop_all()
        finally:
            self.harness.close()
            self.probe.close()
        successes = checks["by_status"].get("success", 0)
        busy = faults_done - began - set_up + settle_s
        c = self.count
        summary = {
            "seed": self.seed,
            "settings": {k: v for k, v in asdict(self.s).items()},
            "tasks_submitted": len(self.submitted) + (1 if self.big_task else 0),
            **checks,
            "setup_s": round(set_up, 1),
            "fault_phase_s": round(faults_done - began - set_up, 1),
            "settle_s": round(settle_s, 1),
            "settle_bound_s": round(bound, 1),
            "open_tasks_when_faults_stopped": backlog,
            "total_s": round(time.monotonic() - began, 1),
            "tasks_per_s": round(successes / busy, 2) if busy > 0 else None,
            "kills": c.kills,
            "faults": asdict(c),
            "sigterm_stop_s_max": round(max(self.sigterm_seconds, default=0.0), 2),
            "max_lease_age_s": round(self.max_lease_age_s, 2),
            "max_row_processing_s": round(self.max_row_processing_s, 2),
            "max_ready_backlog": self.max_backlog,
            "deleted_rows": sorted(self.deleted),
            "big_task": self.big_task,
            "skews": {"workers": list(self.s.worker_skews), "reapers": list(self.s.reaper_skews),
                      "submit": self.s.submit_skew},
            "problems": list(self.problems),
        }
        return ChaosResult(summary, list(self.problems))


# -- the summary as text ----------------------------------------------------------------------------


def markdown(summary: dict[str, Any], command: str = "") -> str:
    s, f = summary, summary["faults"]
    lines = [
        f"- command: `{command}`" if command else "",
        f"- seed {s['seed']}; {s['settings']['workers']} workers x {s['settings']['concurrency']} slots, "
        f"{s['settings']['reapers']} reapers; lease {s['settings']['lease_s']} s, reaper every "
        f"{s['settings']['reaper_interval_s']} s, reconcile every {s['settings']['reconcile_interval_s']} s "
        f"(grace {s['settings']['reconcile_grace_s']} s), max attempts {s['settings']['max_attempts']}",
        f"- LLM test server: {s['settings']['llm_latency_ms'][0]}-{s['settings']['llm_latency_ms'][1]} ms, "
        f"{s['settings']['rate_429']:.0%} 429, {s['settings']['rate_500']:.0%} 500",
        f"- clocks: workers {s['skews']['workers']}, reapers {s['skews']['reapers']}, submit {s['skews']['submit']} "
        "(libfaketime, monotonic clock not faked); MariaDB in +08:00",
        f"- tasks: {s['tasks_submitted']} submitted, {s['rows']} rows at the end: {s['by_status']}; "
        f"{len(s['deleted_rows'])} rows deleted in flight; {s['dead_letters']} dead letters",
        f"- time: set-up {s['setup_s']} s, faults {s['fault_phase_s']} s, settled {s['settle_s']} s after the "
        f"last fault (bound {s['settle_bound_s']} s, {s['open_tasks_when_faults_stopped']} tasks open then), "
        f"total {s['total_s']} s; {s['tasks_per_s']} tasks/s",
        f"- kills: {s['kills']} SIGKILL ({f['worker_kills']} workers, {f['reaper_kills']} reapers), "
        f"{f['worker_sigterms']} SIGTERM (slowest stop {s['sigterm_stop_s_max']} s), {f['worker_pauses']} SIGSTOP "
        "past the lease then SIGCONT",
        f"- restarts: {f['worker_restarts']} workers, {f['reaper_restarts']} reapers, Redis {f['redis_restarts']} "
        f"restarts + {f['redis_crashes']} SIGKILLs + {f['redis_flushes']} FLUSHALL, MariaDB {f['mariadb_restarts']} "
        f"restarts + {f['mariadb_crashes']} SIGKILLs",
        f"- max time in processing: {s['max_lease_age_s']} s (Redis lease age), {s['max_row_processing_s']} s "
        f"(row `processing`); largest ready backlog {s['max_ready_backlog']}",
        f"- recoveries (log events): {s['recoveries']}",
        f"- commits per task (DB trigger): at most {s['commits_max_per_task']}",
        f"- error log lines: {s['error_log_lines']} {s['error_log_messages'] or ''}",
        f"- problems: {s['problems'] or 'none'}",
    ]
    return "\n".join(line for line in lines if line)


# -- scripts/chaos --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--soak", action="store_true", help="30 minutes of faults and 5,000 tasks")
    parser.add_argument("--tasks", type=int, help="documents to submit (default 200, soak 5000)")
    parser.add_argument("--minutes", type=float, help="how long the faults go on (default 1, soak 30)")
    parser.add_argument("--seed", type=int, default=0, help="replay a run (default: random)")
    parser.add_argument("--summary", type=Path, help="write the summary here: JSON, and Markdown next to it (.md); "
                        "default with --soak: ./chaos-soak-summary.json")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, server data)")
    args = parser.parse_args(argv)

    settings = ChaosSettings.soak() if args.soak else ChaosSettings()
    if args.tasks:
        settings.tasks = args.tasks
    if args.minutes:
        settings.fault_seconds = args.minutes * 60
    settings.seed = args.seed
    if args.soak and not args.summary:
        args.summary = Path("chaos-soak-summary.json")
    if find_libfaketime() is None:
        print("scripts/chaos: libfaketime is missing (apt-get install faketime, or run scripts/test once)",
              file=sys.stderr)
        return 2

    workdir = Path(tempfile.mkdtemp(prefix="docllm-chaos-"))
    started = time.monotonic()
    try:
        redis_server, mariadb_server = RedisServer(workdir / "redis"), MariaDBServer(workdir / "mariadb")
    except ServerNotInstalled as exc:
        print(f"scripts/chaos: {exc}", file=sys.stderr)
        return 2
    with redis_server, mariadb_server:
        url = mariadb_server.create_database("docllm_chaos")
        result = Chaos(settings, redis_server, mariadb_server, url, workdir, say=lambda m: print(m, flush=True)).run()
    command = "scripts/chaos " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result.summary, command.strip())
    print(text)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(result.summary | {"command": command.strip()}, indent=2) + "\n")
        args.summary.with_suffix(".md").write_text(text + "\n")
    print(f"{'PASSED' if result.ok else 'FAILED'} in {time.monotonic() - started:.0f}s; work directory {workdir}"
          + ("" if args.keep or not result.ok else " (removed)"))
    if result.ok and not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
