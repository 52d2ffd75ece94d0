"""Adoption in one line (issue 48): the repository's pre-commit hooks run through ``pre-commit
try-repo`` on a sample repository, and the GitHub Action's check step runs its command line as the
Action runs it (action.yml's ``run`` and ``env``, the inputs filled in as GitHub fills them)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BAD = "# Guide\n\nText.\n\n```bash\necho never closed\n"
GOOD = "# Fine\n\nAll good.\n"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A git repository with a document whose fence is never closed (high) and a clean one."""
    repo = tmp_path / "sample"
    repo.mkdir()
    (repo / "guide.md").write_text(BAD)
    (repo / "fine.md").write_text(GOOD)
    (repo / "notes.py").write_text("x = 1  # not a document: the hooks' files pattern skips it\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "sample"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    return repo


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment with a ``docllm`` on the PATH that is this checkout's (as an installed one is)."""
    shims = tmp_path / "bin"
    shims.mkdir()
    docllm = shims / "docllm"
    docllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m docllm.entrypoints.cli "$@"\n')
    docllm.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DOCLLM_", "GITHUB_"))}
    return {
        **clean,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "DOCLLM_REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens: check needs no Redis
        "DOCLLM_DATABASE_URL": f"sqlite:///{tmp_path / 'db' / 'docllm.db'}",
    }


def _try_repo(hook: str, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), hook, "--all-files", "--color", "never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_installed_hook_fails_on_a_high_finding_and_passes_once_fixed(sample, env):
    done = _try_repo("docllm-check-installed", sample, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"docllm check \(docllm on the PATH\)\.+Failed", done.stdout)
    assert "guide.md:5: high formatting [fails]: This code fence is never closed" in done.stdout
    assert "2 document(s) checked" in done.stdout  # guide.md and fine.md, not notes.py
    (sample / "guide.md").write_text(BAD + "```\n")
    done = _try_repo("docllm-check-installed", sample, env)
    assert done.returncode == 0 and re.search(r"docllm check \(docllm on the PATH\)\.+Passed", done.stdout)


@pytest.mark.skipif(
    os.environ.get("DOCLLM_TEST_PRECOMMIT_INSTALL") != "1",
    reason="installs docllm and its dependencies from PyPI into a new virtualenv (minutes); "
    "DOCLLM_TEST_PRECOMMIT_INSTALL=1 runs it",
)
def test_the_python_hook_installs_docllm_from_the_repository(sample, env):
    env = {**env, "PATH": os.environ["PATH"], "PYTHONPATH": ""}  # its own virtualenv's docllm, not the shim
    done = _try_repo("docllm-check", sample, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "guide.md:5: high formatting [fails]" in done.stdout


def _action_step(name: str, inputs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The step's ``run`` and ``env`` with ``${{ inputs.X }}`` and ``${{ github.action_path }}`` filled in."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()} | inputs
    [step] = [s for s in action["runs"]["steps"] if s.get("name") == name]
    assert step["shell"] == "bash"

    def fill(text: str) -> str:
        text = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        return re.sub(r"\$\{\{\s*github\.action_path\s*\}\}", str(ROOT), text)

    assert "${{" not in fill(step["run"]), "the step uses an expression this test does not fill"
    return fill(step["run"]), {k: fill(str(v)) for k, v in step.get("env", {}).items()}


def _run_action(sample: Path, env: dict[str, str], **inputs: str) -> subprocess.CompletedProcess[str]:
    run, step_env = _action_step("docllm check", inputs)
    return subprocess.run(
        ["bash", "-e", "-c", run],  # GitHub runs a bash step as `bash --noprofile --norc -eo pipefail {0}`
        cwd=sample,
        env={**env, **step_env, "GITHUB_ACTIONS": "true"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_action_annotates_each_finding_and_fails_at_its_threshold(sample, env):
    done = _run_action(sample, env)
    assert done.returncode == 1 and done.stderr == ""
    [line] = done.stdout.splitlines()
    assert line.startswith("::error file=guide.md,line=5,endLine=6,title=docllm%3A high formatting (Guide)::")
    assert _run_action(sample, env, **{"fail-on": "critical"}).returncode == 0


def test_the_action_writes_sarif_when_asked_and_passes_its_inputs_safely(sample, env):
    done = _run_action(sample, env, paths="guide.md fine.md", sarif="reports/docllm.sarif", **{"fail-on": "low"})
    assert done.returncode == 1 and done.stdout.count("::error ") == 1
    sarif = json.loads((sample / "reports" / "docllm.sarif").read_text())
    assert sarif["version"] == "2.1.0" and len(sarif["runs"][0]["results"]) == 1
    hostile = _run_action(sample, env, rubric="$(touch pwned)")  # an input is data, never shell
    assert hostile.returncode == 2 and not (sample / "pwned").exists()
    assert hostile.stderr.count("\n") == 1 and "rubric name '$(touch pwned)'" in hostile.stderr


def test_the_action_installs_this_checkout_unless_told_otherwise():
    run, step_env = _action_step("Install docllm", {})
    assert run == 'python -m pip install --quiet "${DOCLLM_INSTALL:-$DOCLLM_ACTION_PATH}"'
    assert step_env == {"DOCLLM_INSTALL": "", "DOCLLM_ACTION_PATH": str(ROOT)}
