"""The dashboard's provider batches (issue 28): the list (counts per state, every unfinished batch
and the newest ones, as ``docllm stats --json`` -> "batches") and one batch with its member tasks.
Read from the BatchStore alone; a build without one says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Flask, abort, render_template

from docllm.entrypoints import batch_view

if TYPE_CHECKING:
    from docllm.entrypoints.dashboard.app import Sources

REF_MAX = 64  # a ref is 32 hex characters; anything much longer is no ref (404 without a read)


def add_batch_pages(app: Flask, src: Sources) -> None:
    @app.get("/batches")
    def batches() -> str:
        shown = None if src.batches is None else batch_view.batches_json(src.batches, src.queue.now_ms())
        return render_template("batches.html", kept=src.batches is not None, batches=shown)

    @app.get("/batches/<ref>")
    def batch(ref: str) -> str:
        found = src.batches.get(ref) if src.batches is not None and len(ref) <= REF_MAX else None
        if found is None:
            abort(404, f"no batch {ref}")
        rows = {t.task_id: t for t in src.repository.get_many([m.task_id for m in found.members])}
        return render_template(
            "batch.html",
            batch=found,
            shown=batch_view.batch_json(found, src.queue.now_ms()),
            members=[(m, rows.get(m.task_id)) for m in found.members],
        )
