"""The faults of a chaos run, and the restarts after them.

Processes: SIGKILL (a worker in the middle of an attempt when one is, or a reaper), SIGTERM (it
must stop within the grace period), SIGSTOP past the lease then SIGCONT; each restarted after a
random pause, with the same wall-clock skew. Servers: Redis restarted, crashed and FLUSHALLed,
MariaDB restarted and crashed; with a Sentinel set (``sentinel``) those hit the current primary
and the primary is SIGKILLed for a failover (the replica promoted, the old primary back as its
replica). Network (each process's own links through the fault proxy, see
``network``): latency bursts, half-open links, resets, dropped replies of commits and scripts.
Bad input: malformed payloads, a 10 MB document, rows deleted while their task is in flight.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable

from tests.e2e.chaos.bad_input import MALFORMED
from tests.e2e.chaos.counters import Counters
from tests.e2e.chaos.network import KINDS as NETWORK_FAULTS
from tests.e2e.chaos.network import NetworkFaults
from tests.e2e.chaos.sentinel import SentinelRedis
from tests.e2e.chaos.settings import ChaosSettings
from tests.e2e.chaos.workload import Workload
from tests.e2e.harness import Harness, Probe, Proc
from tests.servers import MariaDBServer, RedisServer
from tests.servers.procs import ServerFailedToStart

SERVER_OUTAGES = ("restart_redis", "crash_redis", "restart_mariadb", "crash_mariadb", "sentinel_failover")
# Faults the run's checks count on: tried until the phase ends, then again right after it. A row
# to delete needs a task in flight, and a loaded machine's `docllm submit` may leave none for long
# (a CI run had none from 15 s to past 50 s of a 60-s phase, and deleted no row).
MUST_HAPPEN = (*SERVER_OUTAGES, "delete_row")


class Faults:
    def __init__(
        self,
        settings: ChaosSettings,
        rng: random.Random,
        harness: Harness,
        probe: Probe,
        redis_server: RedisServer | SentinelRedis,
        mariadb_server: MariaDBServer,
        workload: Workload,
        count: Counters,
        problems: list[str],
        say: Callable[[str], None],
        network: NetworkFaults,
    ):
        self.s, self.rng, self.harness, self.probe, self.network = settings, rng, harness, probe, network
        self.redis, self.mariadb, self.workload = redis_server, mariadb_server, workload
        self.count, self.problems, self.say = count, problems, say
        self.deleted: set[int] = set()
        self.restart_at: dict[str, float] = {}  # process name -> monotonic time to start it again
        self.terminated: dict[str, float] = {}  # SIGTERMed process name -> when
        self.paused: dict[str, float] = {}  # SIGSTOPped process name -> when to SIGCONT it
        self.sigterm_seconds: list[float] = []
        self.sentinel = isinstance(redis_server, SentinelRedis)
        self.failover_seconds: list[float] = []  # SIGKILL of the primary -> the replica promoted

    def _skew(self, name: str) -> str | None:
        kind, _, number = name.rpartition("-")
        skews = self.s.worker_skews if kind == "worker" else self.s.reaper_skews
        return skews[(int(number) - 1) % len(skews)] if skews else None

    def start(self, name: str) -> Proc:
        h = self.harness
        skew = self._skew(name)
        if name in h.procs:
            proc = h.procs[name].start()
            if name.startswith("worker"):
                self.count.worker_restarts += 1
            else:
                self.count.reaper_restarts += 1
            return proc
        env = self.network.env(name)
        return h.worker(name, env, skew) if name.startswith("worker") else h.reaper(name, env, skew)

    def plan(self, start: float) -> list[tuple[float, str, float]]:
        """Server faults, SIGTERMs and bad input at fixed fractions of the phase (each at least once):
        (when, what, until when to try again if there is nothing to act on yet)."""
        d = self.s.fault_seconds
        plan = [
            (0.15, "flushall"),
            (0.30, "malformed"),
            (0.35, "big_document"),
            (0.40, "restart_redis"),
            (0.55, "restart_mariadb"),
            (0.70, "crash_redis"),
            (0.85, "crash_mariadb"),
        ]
        sigterms = max(3, int(d / 120))  # 3 in a short run, one every 2 minutes in a soak
        plan += [(0.1 + 0.8 * i / sigterms, "sigterm") for i in range(sigterms)]
        plan += [(0.3, "pause"), (0.6, "pause")]  # more come at random with the kills
        kinds = self.network.kinds
        plan += [(0.2 + 0.6 * i / len(kinds), what) for i, what in enumerate(kinds)]
        if self.sentinel:
            # Early: it waits while a SIGTERMed worker drains and while the set is unhealthy after
            # another Redis fault, and a run in CI once used up its whole phase waiting from 0.5.
            plan.append((0.15, "sentinel_failover"))
        plan += [(0.25 + 0.5 * (i + 1) / (self.s.deleted_rows + 1), "delete_row") for i in range(self.s.deleted_rows)]
        if self.s.server_fault_every_s:
            cycle: tuple[str, ...] = ("restart_redis", "restart_mariadb", "crash_redis", "crash_mariadb")
            if self.sentinel:
                cycle += ("sentinel_failover",)
            at, i = 0.2 * d + self.s.server_fault_every_s, 0
            while at < 0.95 * d:
                plan.append((at / d, cycle[i % len(cycle)]))
                at += self.s.server_fault_every_s
                i += 1
        retry_for = max(10.0, 0.05 * d)
        # A server outage waits while a SIGTERMed worker drains (``planned``): it may try until the end.
        return sorted(
            (start + frac * d, what, max(start + frac * d + retry_for, start + d if what in MUST_HAPPEN else 0.0))
            for frac, what in plan
        )

    def _procs(self, kind: str) -> list[Proc]:
        return [
            p
            for p in self.harness.procs.values()
            if p.kind == kind and p.alive and p.name not in self.terminated and p.name not in self.paused
        ]

    def process_fault(self) -> None:
        """SIGKILL a worker (in the middle of an attempt when one is) or a reaper; now and then
        SIGSTOP a busy worker for longer than its lease instead (D5: slow but alive)."""
        workers, reapers = self._procs("worker"), self._procs("reaper")
        if self.rng.random() < self.s.network_fault_share:
            self._network(self.rng.choice(self.network.kinds))
            return
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

    def resume(self, now: float, everyone: bool = False) -> None:
        for name, at in list(self.paused.items()):
            if everyone or now >= at:
                del self.paused[name]
                proc = self.harness.procs[name]
                if proc.alive and proc.pid is not None:
                    os.kill(proc.pid, signal.SIGCONT)

    def _sigterm(self) -> bool:
        """SIGTERM a busy worker; it must stop within the grace period (checked in ``restarts``)."""
        # Before its handlers exist, SIGTERM kills it. Not one whose links are faulted right now: a
        # worker cut off from Redis stops only when its blocked calls time out (Redis socket timeout),
        # which is not what the grace-period check is about.
        serving = [w for w in self._procs("worker") if w.serving and w.name not in self.network.heal_at]
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

    def _network(self, what: str) -> bool:
        """A network fault on a busy worker's links (a reaper's, now and then)."""
        workers, reapers = self._procs("worker"), self._procs("reaper")
        if not workers:
            return False
        to_reaper = reapers and self.rng.random() < 0.2 and not what.startswith("net_drop")  # reapers rarely commit
        victim = self.rng.choice(reapers) if to_reaper else self._busy_worker(workers)
        self.say(f"fault: {what}: {self.network.fault(what, victim.name, self.count)}")
        return True

    def _busy_worker(self, workers: list[Proc]) -> Proc:
        """A worker in the middle of an attempt when there is one (it holds a lease)."""
        try:
            holders = {lease.get("holder") for lease in self.probe.leases()}
        except Exception:  # noqa: BLE001
            holders = set()
        busy = [w for w in workers if w.worker_id in holders]
        return self.rng.choice(busy or workers)

    def restarts(self, now: float) -> None:
        self.resume(now)
        self.network.heal_due(now)
        grace_limit = self.s.stop_limit_s
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
                self.start(name)
        for proc in list(self.harness.procs.values()):
            if (
                proc.kind in ("worker", "reaper")
                and not proc.alive
                and proc.name not in self.restart_at
                and proc.name not in self.terminated
            ):
                self.problems.append(f"{proc.name} died on its own (exit code {proc.returncode}): {proc.tail(3)}")
                self.start(proc.name)

    def planned(self, what: str) -> bool:
        """A planned fault; False when it found nothing to act on (no busy worker, no task in flight)."""
        if what in NETWORK_FAULTS:
            return self._network(what)
        if what in ("sigterm", "delete_row", "pause"):
            return self._planned_process_fault(what)
        if what in SERVER_OUTAGES and self.terminated:
            # A SIGTERMed worker is draining: a server down now would hold its stop up to a
            # database or Redis timeout, which is not what the grace-period check is about. Soon.
            self.say(f"{what}: waits for {sorted(self.terminated)} to stop")
            return False
        if what == "sentinel_failover":
            return self._failover()
        self.say(f"fault: {what}")
        self._server_fault_or_bad_input(what)
        return True

    def _planned_process_fault(self, what: str) -> bool:
        act = {"sigterm": self._sigterm, "delete_row": self._delete_in_flight_row, "pause": self._pause_one}[what]
        done = act()
        if done:
            self.say(f"fault: {what}")
        return done

    def _server_fault_or_bad_input(self, what: str) -> None:
        """A restart, crash or flush of a server, or bad input pushed: always something to act on."""
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
            self.workload.submit_big()

    def _failover(self) -> bool:
        """SIGKILL the Sentinel set's primary; the replica is promoted, the old primary restarted."""
        assert isinstance(self.redis, SentinelRedis)
        try:
            seconds = self.redis.failover()
        except ServerFailedToStart as exc:
            self.problems.append(f"sentinel_failover: {exc}")
            return True
        if seconds is None:  # no replica in sync right now (a Redis fault just before): later
            self.say("sentinel_failover: the set is not healthy yet (no replica in sync)")
            return False
        self.failover_seconds.append(seconds)
        self.count.redis_failovers += 1
        self.say(f"fault: sentinel_failover: the replica promoted {seconds:.1f}s after the primary's SIGKILL")
        return True

    def _delete_in_flight_row(self) -> bool:
        try:
            leases = self.probe.leases()
        except Exception as exc:  # noqa: BLE001 - Redis is restarting
            self.say(f"delete_row: {exc}")
            return False
        candidates = [
            lease["task_id"]
            for lease in leases
            if isinstance(lease.get("task_id"), int) and lease["task_id"] != self.workload.big_task
        ]
        self.rng.shuffle(candidates)
        for task_id in candidates:
            try:
                deleted = self.probe.execute(
                    "DELETE FROM task_doc_llm WHERE task_id = :id AND status = 'processing'", id=task_id
                )
            except Exception as exc:  # noqa: BLE001 - MariaDB is restarting
                self.say(f"delete_row: {exc}")
                return False
            if deleted == 1:
                self.deleted.add(task_id)
                self.count.rows_deleted += 1
                return True
        return False

    def heal(self) -> None:
        """The faults are over: every paused worker woken, both servers up, every process running."""
        self.resume(time.monotonic(), everyone=True)
        self.network.heal_due(time.monotonic(), everyone=True)
        if isinstance(self.redis, SentinelRedis):
            self.redis.heal()
        else:
            self.redis.start()
        self.mariadb.start()
        deadline = time.monotonic() + self.s.stop_limit_s + 1
        while self.terminated and time.monotonic() < deadline:
            self.restarts(time.monotonic())
            time.sleep(0.1)
        for name in list(self.restart_at):
            self.restart_at[name] = 0.0
        self.restarts(time.monotonic())
