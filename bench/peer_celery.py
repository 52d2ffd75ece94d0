"""Celery side of the peer runs: the app and its tasks. The worker is Celery's own program:
``python -m celery -A bench.peer_celery worker -P solo -c 1 -Q bench``. ``acks_late`` is on;
``BENCH_CELERY_VISIBILITY`` sets the Redis transport's visibility timeout (default 3600 s) and
``BENCH_CELERY_RESTORE_INTERVAL`` how often a worker sweeps the unacked hash (default: kombu's).
``BENCH_CELERY_RESULT_URL`` (e.g. ``db+mysql+pymysql://...``) stores every result there, with
``track_started``: the equal-durability peer, which writes each job's state to a database as docllm does.
The LLM-bound runs use the threads pool and ``bench.llm`` (``bench.llm_task``)."""

from __future__ import annotations

import os
import time

from celery import Celery

from bench.llm_task import review
from bench.peer_marks import mark_first_start, record_start

QUEUE = "bench"


def transport_options() -> dict:
    options: dict = {"visibility_timeout": float(os.environ.get("BENCH_CELERY_VISIBILITY", "3600"))}
    if os.environ.get("BENCH_CELERY_RESTORE_INTERVAL"):  # sweep the unacked hash every so many seconds
        options.update(
            unacked_restore_interval=int(os.environ["BENCH_CELERY_RESTORE_INTERVAL"]), unacked_restore_throttle=1
        )
    return options


app = Celery("bench", broker=os.environ.get("BENCH_CELERY_URL", "redis://127.0.0.1:6379/3"))
app.conf.update(
    task_acks_late=True,
    task_ignore_result=True,
    task_default_queue=QUEUE,
    broker_transport_options=transport_options(),
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_send_task_events=False,
)
if os.environ.get("BENCH_CELERY_RESULT_URL"):
    app.conf.update(
        result_backend=os.environ["BENCH_CELERY_RESULT_URL"],
        task_ignore_result=False,
        task_track_started=True,
        result_extended=False,
    )


@app.task(name="bench.noop")
def noop() -> None:
    mark_first_start()


@app.task(name="bench.slow")
def slow(key: str, seconds: float) -> None:
    record_start(key)
    time.sleep(seconds)


@app.task(name="bench.llm")
def llm(task_id: int) -> int:
    return review(task_id)
