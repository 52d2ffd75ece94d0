"""Hostile code blocks through the real worker and through ``docllm check`` (issue 48): a JSON block
100,000 arrays deep, a YAML flow as deep and a Python line of 100,000 unary minus signs used to
raise RecursionError or MemoryError in the offline reviewer (retried as a reviewer bug, then
``failed``). Each now ends ``success`` with a finding saying it is too deeply nested to check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, wait_until
from tests.support.hostile import HOSTILE, NEEDLE

pytestmark = pytest.mark.e2e


def test_each_hostile_block_is_a_finding_through_a_worker(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    for name, text in HOSTILE.items():
        (tmp_path / f"{name}.md").write_text(text)
    submitted = harness.submit(sorted(tmp_path.glob("*.md")))
    ids = [s["task_id"] for s in submitted]
    harness.worker("w1")
    wait_until(
        lambda: all(probe.rows(False)[i]["status"] in ("success", "failed") for i in ids),
        90,
        "the hostile documents to be settled",
        on_timeout=harness.dump,
    )
    rows = probe.rows()
    for task_id in ids:
        row = rows[task_id]
        assert (row["status"], row["attempt"], row["retry_count"]) == ("success", 1, 0), row
        messages = [f["message"] for f in row["result"]["findings"]]
        assert any(NEEDLE in m for m in messages), (row["task_name"], messages)


def test_each_hostile_block_is_a_finding_through_docllm_check(harness: Harness, tmp_path: Path) -> None:
    for name, text in HOSTILE.items():
        (tmp_path / f"{name}.md").write_text(text)
    done = harness.cli("check", str(tmp_path), "--format", "json", "--fail-on", "medium", check=False)
    assert done.returncode == 1 and done.stderr == "", done.stderr  # the finding is medium: it fails the gate
    found = {Path(d["path"]).stem: [f["message"] for f in d["findings"]] for d in json.loads(done.stdout)["documents"]}
    assert set(found) == set(HOSTILE)
    assert all(any(NEEDLE in m for m in messages) for messages in found.values()), found
