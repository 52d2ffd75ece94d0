"""Hostile review of `docllm check` (issue 48): holes a CI user hits. Each test fails on branch `check`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_ci_adoption import _run_action, env, sample  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
# A document whose fence is never closed: a high finding on line 5.
BAD = "# Guide\n\nText.\n\n```bash\necho never closed\n"


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DOCLLM_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "docllm.entrypoints.cli", "check", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _git(repo: Path, *args: str) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)


def test_review_changed_from_still_gates_when_git_is_configured_without_diff_prefixes(tmp_path):
    # `git config diff.noprefix true` is a common developer setting: `+++ guide.md`, not `+++ b/guide.md`.
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "guide.md").write_text("# Guide\n\nText.\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "guide.md").write_text(BAD)
    assert _check(repo, "guide.md", "--changed-from", "HEAD").returncode == 1  # the gate works by default
    _git(repo, "config", "diff.noprefix", "true")
    done = _check(repo, "guide.md", "--changed-from", "HEAD")
    # On `check`: exit 0, "0 document(s) checked": the changed file's name lost its first two letters.
    assert done.returncode == 1, done.stdout + done.stderr


def test_review_the_action_checks_every_line_of_a_multiline_paths_input(sample, env):  # noqa: F811
    # A YAML block scalar is how people list inputs:  paths: |\n  fine.md\n  guide.md
    done = _run_action(sample, env, paths="fine.md\nguide.md\n")
    # On `check`: `read -r -a` reads the first line only, guide.md is never checked, exit 0.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "file=guide.md" in done.stdout


@pytest.mark.parametrize("fmt", ["sarif", "json"])
def test_review_a_file_name_that_is_not_utf8_does_not_turn_the_report_into_an_error(tmp_path, fmt):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(BAD)
    os.close(os.open(os.fsencode(docs) + b"/caf\xe9.md", os.O_CREAT | os.O_WRONLY))
    Path(os.fsdecode(os.fsencode(docs) + b"/caf\xe9.md")).write_text("# Caf\n\nFine.\n")
    done = _check(tmp_path, "docs", "--format", fmt, "--output", "out/report")
    # On `check`: exit 2, "docllm: 'utf-8' codec can't encode character '\udce9' ...: surrogates not allowed",
    # no report, guide.md's high finding never shown (junit writes it, replacing the byte).
    assert done.returncode == 1, done.stderr


def test_review_an_empty_markdown_file_in_a_checked_directory_is_not_an_error(tmp_path):
    # An empty placeholder (docs/changelog/unreleased.md, a new page stub) is common; markdownlint passes it.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(BAD)
    (docs / "stub.md").write_text("")
    done = _check(tmp_path, "docs")
    # On `check`: exit 2 "docllm: docs/stub.md: the document is empty", no finding of guide.md reported.
    assert done.returncode == 1, done.stderr


def test_review_changed_from_keeps_the_findings_of_a_changed_docx(tmp_path):
    # docs/CI.md: PDF, DOCX and HTML findings carry no line, "and `--changed-from` keeps them when the
    # file changed at all". git prints no `+++` line for a binary file ("Binary files ... differ").
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "handbook.docx").write_bytes((ROOT / "examples/eval/backup-guide.docx").read_bytes())
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "handbook.docx").write_bytes((ROOT / "examples/eval/support-handbook.docx").read_bytes())
    assert _check(repo, "handbook.docx", "--fail-on", "low").returncode == 1  # it has findings
    done = _check(repo, "handbook.docx", "--fail-on", "low", "--changed-from", "HEAD")
    # On `check`: exit 0, "0 document(s) checked": the changed .docx is dropped as unchanged.
    assert done.returncode == 1, done.stdout + done.stderr


def test_review_an_unknown_changed_from_ref_is_named_in_the_error(tmp_path):
    # The most common CI failure: a shallow clone (fetch-depth 1) without the base commit.
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "guide.md").write_text(BAD)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    done = _check(repo, "guide.md", "--changed-from", "origin/main")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    # On `check`: "docllm: git rev-parse: failed" (rev-parse --quiet prints nothing): no ref, no hint.
    assert "origin/main" in done.stderr, done.stderr


def test_review_a_usage_error_is_one_line_on_stderr(tmp_path):
    # Issue 48 and docs/CI.md: exit 2 for "a usage, configuration or infrastructure error, always one line
    # on stderr". A CI user writes `fail-on: High` in the Action's inputs.
    (tmp_path / "guide.md").write_text(BAD)
    done = _check(tmp_path, "guide.md", "--fail-on", "High")
    assert done.returncode == 2
    # On `check`: argparse's 7-line usage block, then the error.
    assert done.stderr.count("\n") == 1, done.stderr
