"""One run: a scenario, a design and a seed, from boot through the fault phase to quiescence.

Faults are drawn over the first ``faults_s`` seconds; then they stop, every service comes back,
dead actors restart, and the run goes on until every task is finished and the queue is empty,
or until the bound the settings imply has passed (I2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.ledger import Violation
from sim.original_system import OriginalSystem
from sim.product import ProductSystem
from sim.scenarios import scenario_for

MAX_EVENTS = 400_000  # a runaway run (an actor spinning) is reported, not waited for


@dataclass
class Options:
    tasks: int | None = None
    workers: int | None = None
    brk: str | None = None  # the name of a sim.breaks.Break: a deliberately broken mechanism
    keep_trace: bool = False
    keep_timeline: bool = False


@dataclass
class RunResult:
    scenario: str
    design: str
    seed: int
    tasks: int
    faults: int
    stuck: int
    lost: int
    double_commits: int
    max_attempts: int
    max_processing_ms: int
    drain_ms: int | None
    events: int
    violations: list[Violation]
    trace: list[tuple[int, str, str, int | None, str]] = field(default_factory=list)
    timeline: list[tuple[int, int, str, str]] = field(default_factory=list)
    fault_kinds: dict[str, int] = field(default_factory=dict)


def build(name: str, design: str, seed: int, options: Options) -> Any:
    scenario = scenario_for(name, seed)
    tasks = options.tasks or scenario.tasks
    workers = options.workers or scenario.workers
    if design == "product":
        return ProductSystem(scenario, seed, tasks, workers, options)
    if design == "original":
        return OriginalSystem(scenario, seed, tasks, workers, options)
    raise ValueError(f"unknown design {design!r}")


def run_once(name: str, design: str, seed: int, options: Options | None = None) -> RunResult:
    options = options or Options()
    system = build(name, design, seed, options)
    try:
        return _run(system, name, design, seed, options)
    finally:
        system.world.close()


def _run(system: Any, name: str, design: str, seed: int, options: Options) -> RunResult:
    world, led = system.world, system.ledger
    system.boot()
    faults_end = system.faults_end_ms
    world.run(lambda: world.events_run > MAX_EVENTS, until=faults_end)
    if world.now < faults_end:  # the heal event is due exactly at faults_end
        world.run(lambda: False, until=faults_end)
    bound = system.drain_bound_ms()
    drained = world.run(lambda: system.quiescent() or world.events_run > MAX_EVENTS, until=faults_end + bound)
    if world.events_run > MAX_EVENTS:
        led.violate("ERR", None, f"runaway run: more than {MAX_EVENTS} events", key="runaway")
        drained = False
    system.checker.final(drained and system.quiescent(), faults_end, bound)
    books = led.books.values()
    keep = options.keep_trace or bool(led.violations)
    return RunResult(
        scenario=name,
        design=design,
        seed=seed,
        tasks=len(led.books),
        faults=sum(world.fault_counts.values()),
        stuck=len(led.stuck),
        lost=len(led.lost),
        double_commits=sum(max(0, b.commits - 1) for b in books),
        max_attempts=max((b.max_counted for b in books), default=0),
        max_processing_ms=max((_processing_ms(b, world.now) for b in books), default=0),
        drain_ms=(world.now - faults_end) if drained else None,
        events=world.events_run,
        violations=led.violations,
        trace=world.trace if keep else [],
        timeline=led.timeline if options.keep_timeline else [],
        fault_kinds=dict(world.fault_counts),
    )


def _processing_ms(book: Any, now: int) -> int:
    running = now - book.processing_since if book.processing_since is not None else 0
    return max(book.max_processing_ms, running)
