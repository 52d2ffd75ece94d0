"""The CLI's commands: each builds the container, calls a service, prints the result."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from docllm.container import Container
from docllm.domain.services.producer import discard_dead, retry_dead
from docllm.domain.services.producer import submit as submit_task
from docllm.entrypoints import views
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
    from docllm.adapters.migrations import upgrade_schema

    with _container(schema=False) as c:
        upgrade_schema(c.engine())
        print(f"schema is up to date ({redact_url(c.settings().database_url)})")
    return 0


def submit(args: argparse.Namespace) -> int:
    from docllm.adapters.documents import DocumentError, read_document

    with _container() as c:
        limit = c.settings().max_document_bytes
        docs = []
        for path in args.paths:  # read every file first: a bad one creates no task at all
            try:
                docs.append((args.name or os.path.basename(path), read_document(path, limit)))
            except DocumentError as exc:
                raise CommandError(str(exc)) from None
        created = [submit_task(c.repository(), c.queue(), name, text, c.settings().max_attempts) for name, text in docs]
    if args.json:
        print_json([{"task_id": t.task_id, "task_name": t.task_name} for t in created])
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


def dashboard(args: argparse.Namespace) -> int:
    from docllm.entrypoints.dashboard.serve import check_bind, serve

    check_bind(args.host, load_settings().dashboard_token)  # before anything connects
    with _container() as c:
        return serve(c, args.host, args.port)


def worker(args: argparse.Namespace) -> int:
    from docllm.entrypoints.worker import main as run

    return run(workers=True, reaper=True)


def reaper(args: argparse.Namespace) -> int:
    from docllm.entrypoints.worker import main as run

    return run(workers=False, reaper=True)


def demo(args: argparse.Namespace) -> int:
    from docllm.entrypoints.demo import run_demo

    return run_demo(workers=args.workers, dashboard=args.dashboard)
