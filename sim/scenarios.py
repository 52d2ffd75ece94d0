"""The named scenarios: one per defect D1 to D11 of DESIGN section 2, plus skew, poison, cancel,
storm and random. Each is a set of numbers (tasks, workers, LLM behaviour, clocks) and a fault mix:
how many faults of each kind (``sim.faults``) a run gets on average during its fault phase.

``expect_original`` names the invariants the original note's design is expected to break in the
scenario (the point of the comparison); the product must break none.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from docllm.domain.llm.deployments import Deployment
from docllm.settings import Settings
from sim.batches import BatchProfile
from sim.faults import KINDS, POINTS
from sim.llm import POISON_KINDS, LlmProfile

SETTINGS = Settings(
    database_url="sqlite://",
    queue_prefix="{docllm}",
    lease_seconds=30.0,
    processing_timeout_seconds=120.0,
    reaper_interval_seconds=5.0,
    reconcile_interval_seconds=15.0,
    reconcile_grace_seconds=30.0,
    max_attempts=3,
    retry_base_seconds=2.0,
    retry_max_seconds=20.0,
    concurrency=2,
    shutdown_grace_seconds=10.0,
    llm_timeout_seconds=60.0,
    worker_id="sim",
)


@dataclass(frozen=True)
class ClockSpec:
    skew_h: float = 0.0  # each actor's wall clock is off by up to +/- this many hours
    min_skew_h: float = 0.0
    drift_ppm: float = 0.0
    db_tz: tuple[float, ...] = (0.0,)  # the database session's time zone (NOW()), one per seed
    skew_redis: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    defect: str = ""
    tasks: int = 8
    seeds: int = 5
    workers: int = 3
    slots: int = 2
    reapers: int = 2
    producers: int = 1
    operator: bool = False
    arrival_s: float = 60.0
    faults_s: float = 120.0
    restart_s: tuple[float, float] = (2.0, 15.0)
    llm: LlmProfile = LlmProfile()
    poison: float = 0.0
    poison_kinds: tuple[str, ...] = POISON_KINDS
    faults: dict[str, float | tuple[float, float, float]] = field(default_factory=dict)
    clocks: ClockSpec = ClockSpec()
    reaper_cost: bool = False
    expect_original: tuple[str, ...] = ()
    settings_changes: dict = field(default_factory=dict)
    lanes: bool = False  # tasks get lanes and tenants (sim/lanes.py); I13 is checked on every run
    # Several LLM deployments by name, first in order first (sim/deployments.py); () for one provider.
    deployments: tuple[str, ...] = ()
    # The batch lane on (DOCLLM_LLM_BATCH) against a simulated Batch API (sim/batches.py); None: off.
    batches: BatchProfile | None = None
    default_run: bool = True  # in the default run (``python -m sim.crash_scenarios`` without --scenario)

    def settings(self) -> Settings:
        changes = dict(self.settings_changes)
        if self.deployments:  # DOCLLM_LLM_DEPLOYMENTS: the container builds each one's breaker
            changes.update(llm_provider="openai", llm_deployments=tuple(map(_deployment, enumerate(self.deployments))))
        if self.batches is not None:  # the single-URL deployment offers the Batch API
            changes.update(llm_provider="openai", llm_batch=True, llm_base_url="https://llm.sim/v1", llm_api_key="sim")
        return replace(SETTINGS, **changes)

    def llm_max_s(self) -> float:
        """The longest an LLM call of this scenario can take (a hung one: forever)."""
        p = self.llm
        longest = max(p.timeout_s, p.long_s[1] if p.p_long else 0, p.slow_s[1] if p.p_slow else 0)
        return float("inf") if self.poison and "hang" in self.poison_kinds else longest


def _deployment(entry: tuple[int, str]) -> Deployment:
    order, name = entry
    return Deployment(name=name, base_url=f"https://{name}.llm.sim/v1", model="sim-llm", api_key="sim", order=order)


CRASHES = {"crash_worker": 2, "kill_llm": 1, "crash_reaper": 1}
ALL_FAULTS = KINDS + POINTS  # every fault the plan can fire (sim.faults)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "d1",
            "a worker dies right after taking a payload, before anything else is written",
            defect="D1",
            faults={"worker:after_claim": (4, 0.0, 0.5), "worker:after_stage": (3, 0.0, 0.5)},
            expect_original=("I1", "I2"),
        ),
        Scenario(
            "d2",
            "a worker dies after the claim, before the row goes processing; a reaper dies "
            "between its row reclaim and its Redis requeue",
            defect="D2",
            faults_s=240.0,
            faults={
                "worker:before_start": (3, 0.0, 0.25),
                "kill_llm": (3, 0.0, 0.25),
                "reaper:after_reclaim": (4, 0.1, 0.9),
                "lost_reply": (4, 0.0, 0.5),
            },
            expect_original=("I1", "I2"),
        ),
        Scenario(
            "d3",
            "the LLM raises: timeouts, 429, 500, garbage",
            defect="D3",
            llm=LlmProfile(p_timeout=0.1, p_429=0.1, p_500=0.15, p_garbage=0.1),
            expect_original=("I3",),
        ),
        Scenario(
            "d4",
            "worker, reaper and DB clocks hours apart, the DB's NOW() in UTC+8 or UTC-5",
            defect="D4",
            faults={"kill_llm": 3, "crash_worker": 1},
            llm=LlmProfile(p_long=0.2, long_s=(35.0, 100.0)),
            clocks=ClockSpec(skew_h=3.0, min_skew_h=0.2, drift_ppm=100, db_tz=(8.0, -5.0)),
            expect_original=("I1", "I2", "I8", "I4"),
        ),
        Scenario(
            "d5",
            "slow but alive workers past their lease (with and without heartbeats) and past PROCESSING_TIMEOUT_SECONDS",
            defect="D5",
            faults={"no_heartbeat": 4, "pause": 2},
            llm=LlmProfile(p_long=0.4, long_s=(35.0, 100.0), p_slow=0.25, slow_s=(125.0, 180.0)),
            expect_original=("I4",),
        ),
        Scenario(
            "d6",
            "poison documents that always fail, always time out, or hang",
            defect="D6",
            poison=0.4,
            tasks=8,
            expect_original=("I5",),
        ),
        Scenario(
            "d7",
            "malformed payloads and payloads that name no task",
            defect="D7",
            faults={"malformed": 5, "duplicate": 2},
            expect_original=("I7",),
        ),
        Scenario(
            "d8",
            "many long tasks in flight: the reaper's cost must not grow with them",
            defect="D8",
            tasks=16,
            workers=4,
            slots=4,
            llm=LlmProfile(p_long=0.9, long_s=(35.0, 90.0)),
            faults={"kill_llm": 2},
            reaper_cost=True,
            expect_original=("D8",),
        ),
        Scenario(
            "d9",
            "crashes while long tasks run: recovered within a lease, live ones untouched",
            defect="D9",
            llm=LlmProfile(p_long=0.5, long_s=(35.0, 110.0)),
            faults={"kill_llm": 3, "worker:after_llm": 2, "duplicate": 3},
            expect_original=("I1",),
        ),
        Scenario(
            "d10",
            "Redis loses data (restart without AOF, failover losing the last writes); a "
            "producer dies between its insert and its push",
            defect="D10",
            tasks=10,
            workers=2,
            slots=1,
            arrival_s=30.0,
            llm=LlmProfile(median_s=12.0),
            faults={"redis_flush": (1, 0.1, 0.6), "redis_failover": (1.5, 0.1, 0.6), "crash_producer": (1.5, 0.0, 0.3)},
            expect_original=("I3",),
        ),
        Scenario(
            "lanes",
            "tasks in three lanes from three tenants (one at a cap of 1) while workers and reapers crash "
            "and Redis loses data: every task ends, each lane is served by weight (I13)",
            tasks=15,
            workers=2,
            arrival_s=30.0,
            llm=LlmProfile(median_s=8.0),
            faults={**CRASHES, "redis_flush": (1, 0.1, 0.6), "redis_failover": (1, 0.1, 0.6), "crash_producer": 1},
            settings_changes={"tenant_caps": "acme=1"},
            lanes=True,
        ),
        Scenario(
            "d11",
            "SIGTERM while attempts are in flight",
            defect="D11",
            faults={"sigterm": 4},
            llm=LlmProfile(p_long=0.5, long_s=(35.0, 100.0)),
            expect_original=("I1",),
        ),
        Scenario(
            "skew",
            "every clock off by up to +/- 12 h with drift, the DB in UTC+8, Redis clock stepping back, crashes",
            faults=dict(CRASHES, pause=1, no_heartbeat=1, clock_back=1.5, clock_forward=1.5),
            llm=LlmProfile(p_long=0.2),
            clocks=ClockSpec(skew_h=12.0, min_skew_h=0.0, drift_ppm=500, db_tz=(8.0,), skew_redis=True),
            expect_original=("I1",),
        ),
        Scenario(
            "poison",
            "poison documents among healthy ones, with LLM errors, crashes and an operator who retries dead letters",
            poison=0.25,
            operator=True,
            llm=LlmProfile(p_timeout=0.05, p_500=0.05, p_garbage=0.05),
            faults=dict(CRASHES),
            expect_original=("I5",),
        ),
        Scenario(
            "cancel",
            "an operator cancels pending and running tasks (docllm cancel) among long LLM calls, "
            "crashes, pauses and outages",
            tasks=10,
            workers=2,
            slots=2,  # a backlog: some cancels find the task pending
            llm=LlmProfile(p_long=0.5, long_s=(35.0, 100.0)),
            faults=dict(CRASHES, cancel=(6, 0.05, 0.9), pause=0.5, redis_down=0.5, db_down=0.5),
            expect_original=("I1",),
        ),
        Scenario(
            "limits",
            "a provider that refuses calls over 30 a minute, shared by the fleet (DOCLLM_LLM_RPM=30), with crashes",
            tasks=40,
            seeds=2,
            workers=4,
            slots=2,
            arrival_s=20.0,
            llm=LlmProfile(median_s=1.0, provider_rpm=30),
            # and answers whose headers and usage carry numbers beyond belief (issue 22 item 4)
            faults={"crash_worker": 1, "kill_llm": 1, "garbage_hints": (1.5, 0.0, 0.5)},
            settings_changes={"llm_rpm": 30},
            expect_original=("RATE",),
        ),
        Scenario(
            "outage",
            "the LLM provider down for up to 2 h, twice, among LLM errors, poison documents and crashes: "
            "no attempt is charged for the outage (I9)",
            tasks=10,
            seeds=3,
            workers=2,
            reapers=1,
            arrival_s=3600.0,
            faults_s=1.5 * 3600.0,
            faults={"llm_down": (2, 0.05, 0.6), "crash_worker": 1, "kill_llm": 1, "redis_down": 1},
            llm=LlmProfile(p_500=0.05, p_timeout=0.02),
            poison=0.15,
            poison_kinds=("fail", "timeout"),
            # Hours of virtual time: the fleet's chores at production rates keep the run cheap.
            settings_changes={"reaper_interval_seconds": 20.0, "reconcile_interval_seconds": 60.0},
        ),
        Scenario(
            "deployments",
            "two LLM deployments, each down for 4 to 15 min at times of its own (overlapping or not), among "
            "crashes, a Redis outage and skewed clocks: the workers' RoutedReviewer falls back; no attempt is "
            "charged for either one's outage (I9 per deployment), commits go on while one serves (FALLBACK)",
            tasks=40,
            seeds=4,
            workers=2,
            reapers=1,
            arrival_s=1500.0,
            faults_s=1500.0,
            # each deployment's outages drawn on their own: 5 to 12 min each (sim.faults), overlapping or not
            faults={
                "deployment_down:a": (2.5, 0.0, 0.8),
                "deployment_down:b": (2.5, 0.0, 0.8),
                **CRASHES,
                "redis_down": 1,
            },
            llm=LlmProfile(median_s=3.0, timeout_s=20.0, p_500=0.03),
            clocks=ClockSpec(skew_h=1.0, drift_ppm=200, skew_redis=True),
            # Half an hour of virtual time: the fleet's chores at production rates keep the run cheap.
            settings_changes={"reaper_interval_seconds": 20.0, "reconcile_interval_seconds": 60.0},
            deployments=("a", "b"),
            default_run=False,  # run when named (tests/sim/test_deployments_run.py), not in the default run
        ),
        Scenario(
            "batches",
            "the bulk lane by batch (issue 28) against a Batch API whose batches end at times up to a 3 min "
            "window, some expiring with part of their lines answered, some losing their output file, some "
            "read twice or by two racing pollers, with failed (500) and poisoned (400) lines, beside "
            "interactive tasks served realtime; workers (batchers and pollers) killed, also right after an "
            "upload, before a created batch's id is recorded and mid-poll, Redis losing data, skewed clocks: "
            "I1-I12 hold and I15 (each batched attempt "
            "committed at most once, uncharged for the batch's end, out of processing within the bound)",
            tasks=24,
            seeds=4,
            workers=3,
            reapers=1,
            arrival_s=300.0,
            faults_s=450.0,
            poison=0.1,
            poison_kinds=("fail",),
            llm=LlmProfile(median_s=3.0, timeout_s=20.0, p_500=0.03),
            faults={
                **CRASHES,
                "worker:after_upload": (1, 0.0, 0.7),  # killed between the upload and the create
                "worker:after_create": (2, 0.0, 0.7),  # killed before the batch's id is recorded
                "worker:mid_poll": (2, 0.0, 0.8),  # killed after reading a batch's results, before applying
                "redis_flush": (0.7, 0.1, 0.6),
                "redis_failover": (0.7, 0.1, 0.6),
                "redis_down": 0.5,
                "db_down": 0.5,
            },
            clocks=ClockSpec(skew_h=1.0, drift_ppm=200, skew_redis=True),
            settings_changes={
                "reaper_interval_seconds": 10.0,
                "batch_max_tasks": 6,
                "batch_max_wait_seconds": 20.0,
                "batch_poll_seconds": 10.0,
            },
            batches=BatchProfile(window_s=180.0),
            default_run=False,  # run when named (tests/sim/test_batches_run.py), not in the default run
        ),
        Scenario(
            "money",
            "the spend ledger (issue 43, I16): priced calls, a fleet's daily cap reached mid-run by the "
            "realtime lane and the batch lane together (each reserves before the provider is asked), "
            "batches read by two racing pollers and twice over, workers killed mid-poll and after a "
            "create, Redis down and failing over; the operator raises the cap as the faults stop. "
            "SPEND: the day's spend and holds never pass the cap by more than answers beyond their "
            "estimates, and never more is counted than the rows' writes that landed recorded",
            tasks=32,
            seeds=4,
            workers=3,
            reapers=1,
            arrival_s=300.0,
            faults_s=600.0,
            llm=LlmProfile(median_s=3.0, timeout_s=20.0, p_500=0.03),
            faults={
                **CRASHES,
                "worker:after_create": (1, 0.0, 0.7),
                "worker:mid_poll": (2, 0.0, 0.8),
                "redis_failover": (0.5, 0.1, 0.6),
                "redis_down": 0.5,
                "db_down": 0.3,
            },
            settings_changes={
                "reaper_interval_seconds": 10.0,
                "batch_max_tasks": 3,
                "batch_max_wait_seconds": 15.0,
                "batch_poll_seconds": 10.0,
                "llm_model": "sim-llm",
                "llm_prices": "sim-llm=2/8",
                "spend_cap_usd_per_day": 0.025,
            },
            batches=BatchProfile(window_s=180.0, p_expire=0.1, p_lost=0.05, p_twice=0.3, p_race=0.6),
            default_run=False,  # run when named (tests/sim/test_money_run.py)
        ),
        Scenario(
            "storm",
            "many workers crashing again and again, reapers too",
            tasks=12,
            workers=8,
            slots=2,
            producers=2,
            restart_s=(0.5, 5.0),
            faults={
                "crash_worker": 14,
                "kill_llm": 8,
                "crash_reaper": 5,
                "crash_reconciler": 1,
                "crash_producer": 1,
                "worker:after_claim": 3,
                "worker:after_llm": 3,
                "worker:after_commit": 3,
                "reaper:after_reclaim": 3,
                "lost_reply": 4,
                # issue 22: whose fault it is
                "llm_partition": 1.5,
                "poison_batch": 1,
                "provider_hold": 0.7,
                "garbage_hints": 1,
                "clock_step_flap": 0.7,
            },
            settings_changes={"llm_rpm": 600},  # the fleet's limiter: not binding, but it holds
            expect_original=("I1", "I2"),
        ),
        Scenario(
            "blame",
            "whose fault it is (issue 22): hosts cut off from the LLM while others are served, poison "
            "batches that fail together, provider holds longer than PROCESSING_TIMEOUT_SECONDS, numbers "
            "beyond belief in headers and usage, a host whose clock-step reports flap, crashes",
            tasks=16,
            seeds=6,
            workers=4,
            slots=2,
            reapers=1,
            arrival_s=120.0,
            faults_s=240.0,
            llm=LlmProfile(p_500=0.03, p_timeout=0.02, p_429=0.02),
            faults={
                "llm_partition": (3, 0.02, 0.7),
                "poison_batch": (1.5, 0.05, 0.6),
                "provider_hold": (1.2, 0.05, 0.6),
                "garbage_hints": 1.5,
                "clock_step_flap": 1,
                "crash_worker": 1,
                "llm_down": (0.3, 0.1, 0.5),
            },
            settings_changes={"llm_rpm": 600},
        ),
        Scenario(
            "groups",
            "grouped starts and commits (issue 31): bursts claimed in batches whose starts go to the "
            "store as one group; workers die before a group, after it, and lose its reply; clocks skewed",
            tasks=40,
            seeds=5,
            workers=3,
            slots=6,
            reapers=1,
            arrival_s=0.2,
            faults={
                "worker:before_start": 3,
                "worker:after_claim": 2,
                "worker:after_commit": 2,
                "lost_reply": 3,
                "worker:start_reply_lost": 6,  # a group of starts lands and its reply is lost
                "crash_worker": 2,
                "duplicate": 2,
                "malformed": 2,
            },
            clocks=ClockSpec(skew_h=1, drift_ppm=200, skew_redis=True),
        ),
    )
}

RANDOM = Scenario(
    "random",
    "random faults of every kind, random LLM errors, over many seeds",
    tasks=5,
    seeds=200,
    operator=True,
    expect_original=("I1",),
)


def random_variant(base: Scenario, seed: int) -> Scenario:
    """The random scenario of one seed: its own fault mix, LLM errors and clock skew."""
    r = random.Random(f"random-scenario:{seed}")
    faults = {kind: round(r.uniform(0, 1.5), 2) for kind in r.sample(ALL_FAULTS, r.randint(3, 9))}
    llm = LlmProfile(
        p_timeout=r.choice((0, 0.05)),
        p_429=r.choice((0, 0.05)),
        p_500=r.choice((0, 0.1)),
        p_garbage=r.choice((0, 0.05)),
        p_long=r.choice((0, 0.2)),
        p_slow=r.choice((0, 0, 0.1)),
    )
    clocks = ClockSpec(
        skew_h=r.choice((0, 0, 1, 12)),
        drift_ppm=r.choice((0, 200)),
        db_tz=(r.choice((0.0, 8.0, -5.0)),),
        skew_redis=r.random() < 0.3,
    )
    # A provider's hold and its numbers go through the fleet's limiter: give it one.
    changes = {"llm_rpm": 600} if {"provider_hold", "garbage_hints"} & set(faults) else {}
    return replace(
        base,
        settings_changes=changes,
        faults=faults,
        llm=llm,
        clocks=clocks,
        poison=r.choice((0, 0, 0.2)),
        workers=r.randint(1, 4),
        slots=r.randint(1, 3),
        reapers=r.randint(1, 3),
        producers=r.randint(1, 2),
    )


def scenario_for(name: str, seed: int) -> Scenario:
    if name == "random":
        return random_variant(RANDOM, seed)
    return SCENARIOS[name]


def names() -> list[str]:
    """The default run's scenarios."""
    return [n for n, s in SCENARIOS.items() if s.default_run] + ["random"]


def all_names() -> list[str]:
    """Every scenario ``--scenario`` takes: the default run's and those run only when named."""
    return list(SCENARIOS) + ["random"]


def default_seeds(name: str) -> int:
    return RANDOM.seeds if name == "random" else SCENARIOS[name].seeds


def default_tasks(name: str) -> int:
    return RANDOM.tasks if name == "random" else SCENARIOS[name].tasks
