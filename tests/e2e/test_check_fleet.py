"""``docllm check --fleet``: the documents go to the fleet as tasks, a real worker reviews them, the
command waits and reads the stored reports; the same findings as the in-process review. Without a
worker it stops at its timeout with one line and exit 2 (the tasks stay queued)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


def _found(stdout: str) -> set[tuple[str, int | None, str]]:
    return {
        (Path(d["path"]).name, f["location"]["line_start"], f["message"])
        for d in json.loads(stdout)["documents"]
        for f in d["findings"]
    }


def test_the_fleet_reviews_what_check_reviews_in_process(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("design-doc.md", "install-guide.md", "admin-guide.docx"):
        shutil.copy(EXAMPLES / name, docs / name)
    harness.worker("w1")
    fleet = harness.cli("check", str(docs), "--fleet", "--timeout", "120", "--format", "json", check=False)
    assert fleet.returncode == 1 and fleet.stderr == "", fleet.stderr  # design-doc's unclosed fence is high
    here = harness.cli("check", str(docs), "--format", "json", check=False)
    assert _found(fleet.stdout) == _found(here.stdout) and len(_found(here.stdout)) > 5
    assert {d["task_id"] for d in json.loads(fleet.stdout)["documents"]} <= set(probe.rows(False))
    assert {r["status"] for r in probe.rows(False).values()} == {"success"}


def test_without_a_worker_it_stops_at_its_timeout_with_one_line(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nText.\n")
    done = harness.cli("check", str(tmp_path / "a.md"), "--fleet", "--timeout", "2", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "1 of 1 task(s) not finished after 2 s" in done.stderr
    assert [r["status"] for r in probe.rows(False).values()] == ["pending"]  # it stays queued for the fleet
