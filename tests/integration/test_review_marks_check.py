"""Hostile review of branch `marks` (issue 46): ``docllm check`` with marks and --baseline, in-process
with the offline reviewer and a real SQLite database (as tests/integration/test_check_marks.py)."""

from __future__ import annotations

import os

import pytest

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from tests.support.cli_runner import cli_runner

QUOTE = "TODO: write the install steps."
INDEX = f"# Guide\n\n{QUOTE}\n"


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    for name in [n for n in os.environ if n.startswith("DOCLLM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")
    url = f"sqlite:///{tmp_path / 'docllm.db'}"
    monkeypatch.setenv("DOCLLM_DATABASE_URL", url)
    engine = make_engine(url)
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)  # docs/api/index.md was reviewed, its TODO judged
    task = repo.create("index.md", INDEX)
    repo.start_attempt(task.task_id, "tok")
    assert repo.commit(task.task_id, 1, OfflineReviewer().review_now("index.md", INDEX, None))
    engine.dispose()
    for part in ("api", "guide"):
        (tmp_path / "docs" / part).mkdir(parents=True)
    (tmp_path / "docs" / "api" / "index.md").write_text(INDEX)
    monkeypatch.chdir(tmp_path)
    run = cli_runner(capsys)
    code, _, err = run("findings", "dismiss", str(task.task_id), "1", "--reason", "wont-fix", "--note", "api: later")
    assert code == 0, err
    return run


def test_review_a_mark_on_one_index_md_never_silences_another_folders_index_md(cli, tmp_path):
    # A docs site has an index.md per folder (mkdocs, Docusaurus, Hugo's _index.md). The person judged
    # docs/api/index.md's TODO; docs/guide/index.md then gets its own, new TODO in a section of the
    # same name. That new finding must gate: nobody has looked at it.
    assert cli("check", "docs", "--fail-on", "medium")[0] == 0
    (tmp_path / "docs" / "guide" / "index.md").write_text(INDEX)
    code, out, _ = cli("check", "docs", "--fail-on", "medium")
    assert "docs/guide/index.md:3: medium completeness [fails]" in out
    assert code == 1


@pytest.mark.parametrize(
    "content",
    [
        '{"runs": [{"results": 5}]}',
        '{"runs": [{"results": [{"locations": [{"physicalLocation": "docs/x.md"}]}]}]}',
    ],
)
def test_review_a_malformed_sarif_baseline_is_named_as_such(cli, tmp_path, content):
    # docs/FINDINGS.md: "A file that is not JSON or not a SARIF log stops the run (exit 2, one line)";
    # the line should name the file, not a Python exception.
    (tmp_path / "bad.sarif").write_text(content)
    code, out, err = cli("check", "docs", "--baseline", "bad.sarif")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("docllm: --baseline bad.sarif: "), err


def test_review_a_dismissed_finding_the_baseline_never_had_is_not_unchanged(cli, tmp_path):
    # SARIF 2.1.0 (3.27.24): "unchanged" = detected both in the baseline run and in this run. The
    # baseline here is an earlier run with no result at all: docs/api/index.md's TODO (dismissed)
    # is new against it, whatever a person said about it.
    import json

    empty = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "docllm"}}, "results": []}]}
    (tmp_path / "base.sarif").write_text(json.dumps(empty))
    code, out, _ = cli("check", "docs", "--baseline", "base.sarif", "--format", "sarif")
    [result] = json.loads(out)["runs"][0]["results"]
    assert result["suppressions"] and result["baselineState"] == "new"
