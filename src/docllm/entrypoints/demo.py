"""``docllm demo``: the product surviving a SIGKILL, on embedded defaults, in under a minute.

Submits the sample documents, starts worker processes, SIGKILLs the one holding a task in the
middle of its attempt, and shows the reaper reclaiming that task and another worker finishing it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.payload import task_id_of
from docllm.entrypoints import views

DEMO_ENV = {  # short lease and fast reaper so the recovery shows within seconds
    "DOCLLM_LEASE_SECONDS": "4",
    "DOCLLM_REAPER_INTERVAL_SECONDS": "1",
    "DOCLLM_RETRY_BASE_SECONDS": "0.5",
    "DOCLLM_CONCURRENCY": "1",
    "DOCLLM_OFFLINE_LATENCY_SECONDS": "2",
    "DOCLLM_LLM_PROVIDER": "offline",
    "DOCLLM_REDIS_URL": "embedded",
    "DOCLLM_SHUTDOWN_GRACE_SECONDS": "5",
}
TIMEOUT_SECONDS = 90
DASHBOARD_PORT = 8765
DASHBOARD_URL = f"http://127.0.0.1:{DASHBOARD_PORT}/"


def find_examples() -> Path:
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        candidate = base / "examples" / "docs"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("examples/docs not found: run the demo from the docllm checkout")


def run_demo(workers: int = 3, dashboard: bool = False) -> int:
    console = Console()
    home = Path(os.environ.get("DOCLLM_HOME", ".docllm")).resolve() / "demo"
    env = {**os.environ, **DEMO_ENV, "DOCLLM_HOME": str(home)}
    env.pop("DOCLLM_DATABASE_URL", None)
    os.environ.update({k: env[k] for k in DEMO_ENV} | {"DOCLLM_HOME": str(home)})
    os.environ.pop("DOCLLM_DATABASE_URL", None)

    from docllm.domain.tasks.producer import submit
    from docllm.entrypoints.bootstrap import build_container, load_settings, prepare_schema

    home.mkdir(parents=True, exist_ok=True)
    settings = load_settings()
    container = build_container(settings, log=False)
    _reset(container, home)
    prepare_schema(container)
    repo, queue = container.repository(), container.queue()

    docs = sorted(find_examples().glob("*.md"))
    from docllm.adapters.files.documents import read_document

    tasks = [submit(repo, queue, p.name, read_document(str(p), settings.max_document_bytes)) for p in docs]
    ids = [t.task_id for t in tasks]
    console.print(
        f"[bold]docllm demo[/]: {len(ids)} documents from {docs[0].parent} queued; "
        f"starting {workers} worker processes (lease {DEMO_ENV['DOCLLM_LEASE_SECONDS']} s)"
    )

    logs = home / "logs"
    logs.mkdir(exist_ok=True)
    procs = {f"demo-worker-{i}": _start_worker(f"demo-worker-{i}", env, logs) for i in range(1, workers + 1)}
    story: list[str] = []
    killed: tuple[str, int] | None = None
    started = time.monotonic()
    try:
        with Live(console=console, refresh_per_second=8) as live:
            while time.monotonic() - started < TIMEOUT_SECONDS:
                rows = repo.get_many(ids)
                if killed is None:
                    killed = _kill_one(queue, procs, story)
                else:
                    _follow(rows, killed[1], story)
                live.update(_view(rows, story))
                if killed and all(r.status.terminal for r in rows):
                    break
                time.sleep(0.25)
        rows = repo.get_many(ids)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    console.print(views.tasks_table(rows, title="demo results"))
    for line in story:
        console.print(line)
    ok = all(r.status is TaskStatus.success for r in rows) and killed is not None
    docllm = Path(sys.executable).parent / "docllm"
    console.print(
        f"Reports are stored in {settings.sqlite_path} (table task_doc_llm, column result); "
        f"see them with: DOCLLM_HOME={home} {docllm} status --json"
    )
    console.print(f"Worker logs: {logs}")
    console.print(
        f"[bold {'green' if ok else 'red'}]{'every task succeeded' if ok else 'demo did not finish'}"
        f"[/] in {time.monotonic() - started:.1f} s"
    )
    if dashboard:
        _serve_dashboard(container, console)
    else:
        console.print(
            f"Next, the reports (findings, quotes, suggestions) in a browser: DOCLLM_HOME={home} {docllm} "
            f"dashboard, then open {DASHBOARD_URL} (or run `docllm demo --dashboard`)"
        )
    container.shutdown_resources()
    return 0 if ok else 1


def _serve_dashboard(container, console: Console) -> None:
    from docllm.entrypoints.dashboard.serve import serve

    console.print(f"[bold]dashboard[/] on {DASHBOARD_URL} over the demo's data; Ctrl-C stops it")
    try:
        serve(container, "127.0.0.1", DASHBOARD_PORT)
    except KeyboardInterrupt:
        pass


def _reset(container, home: Path) -> None:
    """A fresh demo each run: empty the embedded Redis and drop the demo database file."""
    container.redis_client().flushall()
    db = Path(container.settings().sqlite_path)
    if db.exists():
        container.engine().dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)


def _start_worker(worker_id: str, env: dict, logs: Path) -> subprocess.Popen:
    with open(logs / f"{worker_id}.log", "w") as out:  # the child has its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "docllm.entrypoints.worker"],
            env={**env, "DOCLLM_WORKER_ID": worker_id},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _kill_one(queue, procs: dict[str, subprocess.Popen], story: list[str]) -> tuple[str, int] | None:
    """SIGKILL the worker holding the oldest lease, once it is in the middle of its attempt."""
    for delivery in queue.in_flight(10):
        proc = procs.get(delivery.worker_id)
        if proc is None or queue.now_ms() - delivery.claimed_at_ms < 700:
            continue
        task_id = task_id_of(delivery.raw)
        assert task_id is not None  # the demo enqueues only its own well-formed payloads
        proc.kill()
        story.append(f"[red]SIGKILL[/] {delivery.worker_id} (pid {proc.pid}) in the middle of task {task_id}")
        return delivery.worker_id, task_id
    return None


def _follow(rows: list[Task], task_id: int, story: list[str]) -> None:
    """Tell the killed task's recovery as it happens: each milestone once, in order."""
    row = next(r for r in rows if r.task_id == task_id)
    milestones = [
        (
            row.retry_count >= 1 or row.attempt >= 2,
            f"[yellow]reaper[/] reclaimed task {task_id}: {row.error or 'lease expired'}",
        ),
        (row.attempt >= 2, f"[cyan]another worker[/] started task {task_id} again (attempt {row.attempt})"),
        (row.status is TaskStatus.success, f"[green]task {task_id} committed once[/] by attempt {row.attempt}"),
    ]
    told = len(story) - 1  # story[0] is the kill
    for reached, line in milestones[told:]:
        if not reached:
            return
        story.append(line)


def _view(rows: list[Task], story: list[str]) -> Table:
    table = views.tasks_table(rows, title="docllm demo (live)")
    for line in story[-4:]:
        table.caption = (table.caption + "\n" if table.caption else "") + line
    return table
