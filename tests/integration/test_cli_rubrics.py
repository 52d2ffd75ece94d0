"""``docllm submit --rubric NAME`` (real Redis, SQLite): the rubric is checked before anything is
written, so an unknown or broken one is one line on stderr with no task and no payload."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.cli_runner import cli_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rubrics"


@pytest.fixture
def cli(redis_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCLLM_REDIS_URL", redis_url)
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'docllm.db'}")
    monkeypatch.setenv("DOCLLM_QUEUE_PREFIX", f"cli{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("DOCLLM_RUBRICS_DIR", str(EXAMPLES))

    run = cli_runner(capsys)

    assert run("init-db")[0] == 0
    return run


def nothing_written(cli) -> bool:
    stats = json.loads(cli("stats", "--json")[1])
    return sum(stats["tasks"].values()) == 0 and sum(stats["queue"].values()) == 0


def test_submit_with_a_rubric_names_it_on_the_task(cli):
    doc = str(EXAMPLES / "golden" / "acmedb-install.md")
    code, out, _ = cli("submit", doc, "--rubric", "install-guide", "--json")
    assert code == 0
    [task] = json.loads(out)
    assert json.loads(cli("show", str(task["task_id"]), "--json")[1])["rubric"] == "install-guide"


def test_an_unknown_rubric_is_one_line_and_nothing_is_queued(cli):
    doc = str(EXAMPLES / "golden" / "acmedb-install.md")
    code, out, err = cli("submit", doc, "--rubric", "install-guides", "--json")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "install-guides" in err and "install-guide" in err.replace("install-guides", "")  # the known ones
    assert nothing_written(cli)


def test_a_broken_rubric_names_its_file_and_line_and_nothing_is_queued(cli, tmp_path, monkeypatch):
    (tmp_path / "team.yaml").write_text("version: 1\nchecks:\n  - {id: x, kind: banned-terms, terms: 3}\n")
    monkeypatch.setenv("DOCLLM_RUBRICS_DIR", str(tmp_path))
    code, _, err = cli("submit", str(EXAMPLES / "golden" / "acmedb-install.md"), "--rubric", "team")
    assert code == 1 and f"{tmp_path / 'team.yaml'}:3: terms must be a list" in err
    assert nothing_written(cli)
