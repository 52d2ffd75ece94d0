"""The CLI's commands: each builds the container, calls a service, prints the result."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from docllm.container import Container
from docllm.domain.tasks.model import Task
from docllm.domain.tasks.producer import discard_dead, retry_dead
from docllm.domain.tasks.producer import submit as submit_task
from docllm.entrypoints import batch_view, lane_view, views
from docllm.entrypoints.bootstrap import build_container, load_settings, prepare_schema
from docllm.entrypoints.output import CommandError, console, print_json
from docllm.entrypoints.snapshot import stats_of
from docllm.settings import redact_url


@contextmanager
def _container(schema: bool = True) -> Iterator[Container]:
    settings = load_settings()
    # Commands print their results; only warnings and errors go to the log.
    container = build_container(replace(settings, log_level="WARNING"))
    try:
        if schema:
            prepare_schema(container)
        yield container
    finally:
        container.shutdown_resources()


def init_db(args: argparse.Namespace) -> int:
    from docllm.adapters.sql.migrations import upgrade_schema

    with _container(schema=False) as c:
        upgrade_schema(c.engine())
        print(f"schema is up to date ({redact_url(c.settings().database_url)})")
    return 0


def _submitted(t: Task) -> dict[str, object]:
    """``{"task_id", "task_name"}``, and ``priority``/``tenant`` when set (the shape stays as it was)."""
    lane = {"priority": t.priority, "tenant": t.tenant}
    return {"task_id": t.task_id, "task_name": t.task_name, **{k: v for k, v in lane.items() if v is not None}}


def submit(args: argparse.Namespace) -> int:
    from docllm.adapters.files.documents import DocumentError, read_document
    from docllm.domain.errors import RubricError

    with _container() as c:
        limit = c.settings().max_document_bytes
        try:
            if args.rubric is not None:  # before any file: a bad rubric creates no task at all
                c.rubrics().get(args.rubric)
        except RubricError as exc:
            raise CommandError(str(exc)) from None
        docs = []
        for path in args.paths:  # read every file first: a bad one creates no task at all
            try:
                docs.append((args.name or os.path.basename(path), read_document(path, limit)))
            except DocumentError as exc:
                raise CommandError(str(exc)) from None
        created = [
            submit_task(
                c.repository(),
                c.queue(),
                name,
                text,
                c.settings().max_attempts,
                rubric=args.rubric,
                rubrics=c.rubrics(),
                priority=args.priority,
                tenant=args.tenant,
                tracer=c.tracer(),
                fresh=args.fresh,
            )
            for name, text in docs
        ]
    if args.json:
        print_json([_submitted(t) for t in created])
    else:
        for t in created:
            print(f"submitted task {t.task_id} ({t.task_name})")
    return 0


def status(args: argparse.Namespace) -> int:
    with _container() as c:
        repo = c.repository()
        tasks = repo.get_many(args.task_ids) if args.task_ids else repo.recent(50)
    missing = sorted(set(args.task_ids) - {t.task_id for t in tasks})
    if args.json:
        print_json([views.task_json(t) for t in tasks])
    else:
        console().print(views.tasks_table(tasks))
    if missing:
        raise CommandError(f"no task with id {', '.join(map(str, missing))}")
    return 0


def _stats(c: Container) -> dict:
    return stats_of(c)


def stats(args: argparse.Namespace) -> int:
    with _container() as c:
        if args.watch:
            from docllm.entrypoints.watch import watch_stats

            watch_stats(lambda: _stats(c), args.interval, args.iterations)
            return 0
        result = _stats(c)
    if args.json:
        print_json(result)
    else:
        console().print(views.stats_table(result))
        for table in lane_view.lane_tables(result) + batch_view.batch_tables(result):
            console().print(table)
    return 0


def dead_list(args: argparse.Namespace) -> int:
    with _container() as c:
        letters = c.queue().dead_letters(limit=args.limit)
    if args.json:
        print_json([views.dead_json(d) for d in letters])
    else:
        console().print(views.dead_table(letters))
    return 0


def dead_retry(args: argparse.Namespace) -> int:
    with _container() as c:
        ids = retry_dead(c.repository(), c.queue(), None if args.all else args.task_id, c.events())
    if args.json:
        print_json({"requeued": ids})
    else:
        print(f"requeued {len(ids)} task(s): {', '.join(map(str, ids)) or '-'}")
    if not args.all and not ids:
        raise CommandError(f"task {args.task_id} is not failed or has no row to retry")
    return 0


def dead_discard(args: argparse.Namespace) -> int:
    with _container() as c:
        ids = discard_dead(c.queue(), None if args.all else args.task_id, c.events())
    if args.json:
        print_json({"discarded": ids})
    else:
        print(f"discarded {len(ids)} dead letter(s)")
    if not args.all and not ids:
        raise CommandError(f"task {args.task_id} has no dead letter")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """In-process, without Redis or a database: the settings' reviewer, as a worker builds it."""
    import asyncio

    from docllm.adapters.evaluation.golden_set import load_cases
    from docllm.entrypoints.eval_view import eval_json, eval_table
    from docllm.entrypoints.evaluation import run_eval

    settings = replace(load_settings(), log_level="WARNING", metrics_port=None)  # no metrics server either
    container = build_container(settings)
    try:
        cases = load_cases(args.directory, settings.max_document_bytes, container.rubrics())
        results, name, model = asyncio.run(run_eval(container, cases))
    finally:
        container.shutdown_resources()
    if args.json:
        print_json(eval_json(results, name, model))
    else:
        console().print(eval_table(results, name, model))
    return 0


def dashboard(args: argparse.Namespace) -> int:
    from docllm.entrypoints.dashboard.serve import check_bind, serve

    check_bind(args.host, load_settings().dashboard_token)  # before anything connects
    with _container() as c:
        return serve(c, args.host, args.port)


def show(args: argparse.Namespace) -> int:
    from docllm.domain.marks.service import Judgements
    from docllm.entrypoints.report_view import render_task, show_json

    with _container() as c:
        task = c.repository().get(args.task_id)
        default_max = c.settings().max_attempts
        batches = batch_view.task_batches_json(c.batch_store(), args.task_id) if task is not None else []
        marks = Judgements(c.repository(), c.marks()).of_task(task) if task is not None else {}
    if task is None:
        raise CommandError(f"no task with id {args.task_id}")
    if args.json:
        print_json(show_json(task, batches, marks))
    else:
        console().print(render_task(task, default_max, batches, marks))
    return 0


def budget(args: argparse.Namespace) -> int:
    """The fleet's spend today against its cap; ``set --usd N`` holds a cap in Redis for every
    process (0: none), ``clear`` goes back to each process's DOCLLM_SPEND_CAP_USD_PER_DAY."""
    with _container(schema=False) as c:
        spend = c.spend_budget()
        if args.budget_command == "set":
            view = spend.set_cap(args.usd)
        elif args.budget_command == "clear":
            view = spend.set_cap(None)
        else:
            view = spend.view()
    shown = views.budget_json(view)
    if args.json:
        print_json(shown)
    else:
        for key, value in shown.items():
            console().print(f"{key}: {'-' if value is None else value}")
    return 0


def workers(args: argparse.Namespace) -> int:
    with _container(schema=False) as c:
        records = c.worker_registry().live()
        now_s = c.clock().now_ms() / 1000.0
    if args.json:
        print_json([views.worker_json(r) for r in records])
    else:
        console().print(views.workers_table(records, now_s))
    return 0


def cancel(args: argparse.Namespace) -> int:
    """Exit 0 when every task is cancelled (with ``--wait 0``: or marked, still running); 1 when
    any is unknown, had already finished, or still ran when the wait ended."""
    from docllm.domain.tasks.cancel import Canceller, CancelResult

    with _container() as c:
        s = c.settings()
        wait = s.lease_seconds + s.reaper_interval_seconds + 5.0 if args.wait is None else max(0.0, args.wait)
        canceller = Canceller(c.repository(), c.queue(), c.events())
        results = canceller.request(args.task_ids)
        deadline = time.monotonic() + wait
        while wait > 0 and not all(r.done for r in results) and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
            results = [r if r.done else canceller.check(r) for r in results]
    if args.json:
        print_json([views.cancel_json(r) for r in results])
    else:
        console().print(views.cancel_table(results))
    ok = {CancelResult.cancelled} | ({CancelResult.running} if wait == 0 else set())
    failed = [r for r in results if r.result not in ok]
    if failed:
        raise CommandError("not cancelled: " + "; ".join(f"task {r.task_id}: {r.detail}" for r in failed))
    return 0


def worker(args: argparse.Namespace) -> int:
    from docllm.entrypoints.worker import main as run

    if args.supervised:  # a child of --processes
        if args.parent_pid is not None:
            from docllm.adapters.host.parent_death import stop_with_parent

            stop_with_parent(args.parent_pid)
        return run(workers=True, reaper=True, http=False)
    from docllm.adapters.host.cpus import cpu_budget
    from docllm.entrypoints.processes import resolve_processes
    from docllm.entrypoints.processes import run as run_processes
    from docllm.logs import setup_logging

    budget = cpu_budget()
    try:
        processes = resolve_processes(args.processes, budget)
    except ValueError as exc:
        print(f"docllm: {exc}", file=sys.stderr)
        return 2  # a usage error, as argparse's
    settings = load_settings()
    if args.processes != 1:  # asked for: say what was found
        setup_logging(settings.log_format, settings.log_level)
        logging.getLogger("docllm.supervisor").info(
            "--processes %s: %d worker process%s (%s)",
            args.processes,
            processes,
            "" if processes == 1 else "es",
            budget.describe(),
        )
    if processes > 1:
        return run_processes(settings, processes)
    return run(workers=True, reaper=True, http=True)


def reaper(args: argparse.Namespace) -> int:
    from docllm.entrypoints.worker import main as run

    return run(workers=False, reaper=True)


def demo(args: argparse.Namespace) -> int:
    from docllm.entrypoints.demo import run_demo

    return run_demo(workers=args.workers, dashboard=args.dashboard)
