"""One chaos run: set up, faults while documents are submitted, settle, checks, summary."""

from __future__ import annotations

import concurrent.futures
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.chaos.checks import check, settled
from tests.e2e.chaos.counters import Counters
from tests.e2e.chaos.faults import MUST_HAPPEN, Faults
from tests.e2e.chaos.network import NetworkFaults
from tests.e2e.chaos.sampling import Sampler
from tests.e2e.chaos.sentinel import SentinelRedis
from tests.e2e.chaos.settings import ChaosSettings
from tests.e2e.chaos.workload import Workload
from tests.e2e.harness import Harness, Probe, Proc, install_commit_audit, product_env, start_llm_server, wait_until
from tests.servers import MariaDBServer, RedisServer, SentinelSet


@dataclass
class ChaosResult:
    summary: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class Chaos:
    """One run: set up, faults, settle, checks. ``run()`` returns the summary and the problems."""

    def __init__(
        self,
        settings: ChaosSettings,
        redis_server: RedisServer | SentinelSet,  # a SentinelSet when settings.topology == "sentinel"
        mariadb_server: MariaDBServer,
        database_url: str,
        workdir: Path,
        say: Callable[[str], None] = print,
    ):
        self.s = settings
        self.seed = settings.seed or random.SystemRandom().randrange(1, 2**31)
        self.rng = random.Random(self.seed)
        self.workdir = workdir
        self.say = say
        prefix = f"chaos-{self.seed}"
        if settings.topology == "sentinel":
            assert isinstance(redis_server, SentinelSet), "topology sentinel: pass a SentinelSet"
        redis: RedisServer | SentinelRedis = (
            SentinelRedis(redis_server) if isinstance(redis_server, SentinelSet) else redis_server
        )
        self.harness = Harness(
            workdir, product_env(redis.url, database_url, prefix, workdir / "home", **settings.env())
        )
        self.probe = Probe(redis.url, database_url, prefix)  # follows the primary on a Sentinel set
        self.count = Counters()
        self.problems: list[str] = []
        self.workload = Workload(settings, self.harness, workdir, self.count, self.problems, say)
        self.network = NetworkFaults(self.rng, redis, mariadb_server, database_url, settings.lease_s)
        self.faults = Faults(
            settings,
            self.rng,
            self.harness,
            self.probe,
            redis,
            mariadb_server,
            self.workload,
            self.count,
            self.problems,
            say,
            self.network,
        )
        self.sampler = Sampler(self.probe)
        self.llm: Proc | None = None

    def _setup(self) -> None:
        h = self.harness
        low, high = self.s.llm_latency_ms
        self.llm, port = start_llm_server(
            h, latency_ms=f"{low}-{high}", rate_429=self.s.rate_429, rate_500=self.s.rate_500, seed=self.seed
        )
        h.env["DOCLLM_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        self.network.llm_port = port
        h.init_db()
        install_commit_audit(self.probe)
        self.workload.write()
        for i in range(self.s.workers):
            self.faults.start(f"worker-{i + 1}")
        for i in range(self.s.reapers):
            self.faults.start(f"reaper-{i + 1}")

    def _fault_phase(self) -> None:
        s = self.s
        start = time.monotonic()
        end = start + s.fault_seconds
        plan = self.faults.plan(start)
        missed: list[str] = []
        batches, submit_times = self._submission_waves(start)
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
                submits.append(submitter.submit(self.workload.submit, sorted(batches.pop(0))))
            self._fire_due_planned_faults(plan, now, missed)
            if now >= next_fault:
                self.faults.process_fault()
                next_fault = time.monotonic() + self.rng.uniform(*s.process_fault_every_s)
            self.faults.restarts(time.monotonic())
            if now >= next_sample:
                self.sampler.sample()
                next_sample = now + 0.5
            if now >= next_report:
                self.say(self._progress(now - start))
                next_report = now + (15 if s.fault_seconds <= 300 else 60)
            time.sleep(0.05)
        for batch in batches:  # whatever a slow machine did not get to
            submits.append(submitter.submit(self.workload.submit, sorted(batch)))
        self._fire_faults_not_reached(missed + [what for _, what, _ in plan])
        for done in submits:
            done.result()
        submitter.shutdown()

    def _submission_waves(self, start: float) -> tuple[list[list[str]], list[float]]:
        """The workload's documents in waves, and when each wave is submitted: the last one 2 s
        before the faults stop, so that work is in flight when they do."""
        s = self.s
        waves = max(1, round(s.tasks / 15)) if s.tasks <= 300 else max(1, round(s.tasks / 60))
        names = sorted(self.workload.headings)
        batches = [names[i::waves] for i in range(waves)]
        submit_times = [start + (s.fault_seconds - 2.0) * i / max(1, waves - 1) for i in range(waves)]
        return batches, submit_times

    def _fire_due_planned_faults(self, plan: list[tuple[float, str, float]], now: float, missed: list[str]) -> None:
        """Fire the planned faults that are due. One with nothing to hit yet is tried again a second
        later until it gives up; one the checks count on (``MUST_HAPPEN``: a server outage held up by
        drains, a row to delete with no task in flight, all phase long) goes to ``missed``, to run
        right after the phase."""
        while plan and now >= plan[0][0]:
            _at, what, give_up = plan.pop(0)
            if self.faults.planned(what):
                continue
            if now < give_up:  # nothing to hit yet: try again soon
                plan.append((now + 1.0, what, give_up))
                plan.sort()
            elif what in MUST_HAPPEN:
                missed.append(what)

    def _fire_faults_not_reached(self, faults: list[str]) -> None:
        """What the phase did not get to; a server outage waits up to 20 s for a drain, a row to
        delete for a task in flight (the last waves are being submitted)."""
        for what in faults:
            deadline = time.monotonic() + 20.0
            while not self.faults.planned(what) and what in MUST_HAPPEN and time.monotonic() < deadline:
                self.faults.restarts(time.monotonic())
                time.sleep(0.5)

    def _progress(self, elapsed: float) -> str:
        c = self.count
        try:
            counts = self.probe.counts()
        except Exception:  # noqa: BLE001 - a server is down right now
            counts = {}
        return (
            f"[{elapsed:6.1f}s] submitted {len(self.workload.submitted)} rows {counts} kills {c.kills} "
            f"sigterms {c.worker_sigterms} redis {c.redis_restarts}+{c.redis_crashes}/flush {c.redis_flushes} "
            f"mariadb {c.mariadb_restarts}+{c.mariadb_crashes}"
            + (f" failovers {c.redis_failovers}" if self.faults.sentinel else "")
        )

    def _settle(self) -> tuple[float, float, int]:
        backlog = sum(v for k, v in self.probe.counts().items() if k in ("pending", "processing"))
        bound = self.s.settle_bound(backlog)
        started = time.monotonic()
        try:
            wait_until(lambda: settled(self.probe), bound, "every task to settle", interval=0.25)
        except AssertionError as exc:
            self.problems.append(
                f"not settled within the bound of {bound:.0f}s ({backlog} tasks open when the "
                f"faults stopped): {exc}; counts {self.probe.counts()} "
                f"redis {self.probe.queue_sizes()}"
            )
        return time.monotonic() - started, bound, backlog

    def _stop_all(self) -> None:
        """SIGTERM every worker and reaper: each must stop, with exit code 0, within the grace period."""
        procs = [p for p in self.harness.procs.values() if p.kind in ("worker", "reaper") and p.alive]
        for proc in procs:
            proc.terminate()
        sent = time.monotonic()
        for proc in procs:
            code = proc.wait(max(0.1, sent + self.s.stop_limit_s - time.monotonic()))
            if code is None:
                self.problems.append(f"{proc.name} did not stop within {self.s.stop_limit_s:g}s of SIGTERM")
                proc.kill()
            elif code != 0:
                self.problems.append(f"{proc.name} exited {code} after SIGTERM")
        self.harness.close()

    def run(self) -> ChaosResult:
        began = time.monotonic()
        self.say(
            f"chaos: seed {self.seed}, {self.s.tasks} tasks, {self.s.fault_seconds:g}s of faults, "
            f"logs in {self.harness.logs}"
        )
        try:
            self._setup()
            set_up = time.monotonic() - began
            self._fault_phase()
            faults_done = time.monotonic()
            self.say("faults stopped; waiting for every task to settle")
            self.faults.heal()
            settle_s, bound, backlog = self._settle()
            checks = check(self.s, self.harness, self.probe, self.workload, self.faults, self.problems)
            self._stop_all()
        finally:
            self.harness.close()
            self.probe.close()
            self.count.net_dropped_replies = self.network.dropped_replies()
            self.network.close()
        successes = checks["by_status"].get("success", 0)
        busy = faults_done - began - set_up + settle_s
        c = self.count
        summary = {
            "seed": self.seed,
            "settings": {k: v for k, v in asdict(self.s).items()},
            "tasks_submitted": len(self.workload.submitted) + (1 if self.workload.big_task else 0),
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
            "failover_s": [round(x, 1) for x in self.faults.failover_seconds],
            "sigterm_stop_s_max": round(max(self.faults.sigterm_seconds, default=0.0), 2),
            "max_lease_age_s": round(self.sampler.max_lease_age_s, 2),
            "max_row_processing_s": round(self.sampler.max_row_processing_s, 2),
            "max_ready_backlog": self.sampler.max_backlog,
            "deleted_rows": sorted(self.faults.deleted),
            "big_task": self.workload.big_task,
            "skews": {
                "workers": list(self.s.worker_skews),
                "reapers": list(self.s.reaper_skews),
                "submit": self.s.submit_skew,
            },
            "problems": list(self.problems),
        }
        return ChaosResult(summary, list(self.problems))
