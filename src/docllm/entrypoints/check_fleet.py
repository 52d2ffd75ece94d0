"""``docllm check --fleet``: the documents submitted to the fleet as tasks, waited for with a progress
bar on stderr (a terminal only) and a timeout, and their stored reports read back."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from docllm.domain.review.checking import Checked, Source, unread, wait_for_reports
from docllm.domain.tasks.producer import submit
from docllm.settings import Settings

POLL_SECONDS = 0.5


def check_in_fleet(
    settings: Settings, sources: Sequence[Source], rubric: str | None, timeout_s: float, tenant: str | None = None
) -> list[Checked]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from docllm.entrypoints.bootstrap import build_container, prepare_schema

    container = build_container(settings)
    try:
        prepare_schema(container)
        repo, queue, rubrics = container.repository(), container.queue(), container.rubrics()
        limit = settings.max_attempts
        readable = [s for s in sources if s.text.strip() and not s.unreadable]
        ids = [
            submit(repo, queue, s.name, s.text, limit, rubric=rubric, rubrics=rubrics, tenant=tenant).task_id
            for s in readable
        ]
        console = Console(stderr=True)
        with Progress(
            "reviewing in the fleet",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as bar:
            task = bar.add_task("tasks", total=len(ids))
            reviewed = wait_for_reports(
                ids,
                readable,
                repo.get_many,
                timeout_s,
                POLL_SECONDS,
                time.monotonic,
                time.sleep,
                lambda done, total: bar.update(task, completed=done, total=total),
            )
        by_key = {r.source.key: r for r in reviewed}
        return [by_key[s.key] if s.key in by_key else unread(s) for s in sources]
    finally:
        container.shutdown_resources()
        sys.stderr.flush()
