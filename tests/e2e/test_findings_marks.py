"""Findings a person judged (issue 46), as a team uses it: a worker reviews a document with the
LLM (the repository's OpenAI-compatible test server), a person dismisses a finding with
``docllm findings dismiss``, the document is edited around it, and the next review (a worker's
report in ``docllm show``, and ``docllm check`` in CI) shows it dismissed, apart and not gating;
SARIF marks it suppressed; ``--baseline`` reports only what is new against an earlier SARIF run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, start_llm_server, wait_until

pytestmark = pytest.mark.e2e

GUIDE = "# Guide\n\nInstall the tool.\n\n## Usage\n\nRun `tool --help`.\n"
EDITED = "Written for version 2.\nRead it all.\n\n" + GUIDE + "\n## Limits\n\nNone known.\n"


def llm_env(port: int) -> dict[str, str]:
    return {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_API_KEY": "test-key",
        "DOCLLM_LLM_MODEL": "test-model",
        "DOCLLM_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
    }


def reviewed(harness: Harness, probe: Probe, path: Path, env: dict[str, str]) -> dict:
    [task] = harness.submit([path], env=env)
    wait_until(
        lambda: probe.rows(False).get(task["task_id"], {}).get("status") == "success",
        60,
        f"task {task['task_id']} to succeed",
        on_timeout=harness.dump,
    )
    return harness.cli_json("show", str(task["task_id"]), env=env)


def test_a_dismissed_finding_stays_dismissed_after_an_edit_and_does_not_gate_check(
    harness: Harness, probe: Probe, tmp_path: Path
):
    _, port = start_llm_server(harness)
    env = llm_env(port)
    harness.worker("w1", env=env)
    docs = tmp_path / "docs"
    docs.mkdir()
    guide = docs / "guide.md"
    guide.write_text(GUIDE)

    first = reviewed(harness, probe, guide, env)
    [found] = first["result"]["findings"]  # the test server's one finding: the first heading, low
    assert (found["quote"], found["location"]["line_start"], found["severity"]) == ("# Guide", 1, "low")
    task = str(first["task_id"])

    # Bad input: a clear line, a non-zero exit, nothing written.
    bad = [
        (["findings", "dismiss", task, "1", "--reason", "nope"], 2, "invalid choice: 'nope'"),
        (["findings", "dismiss", "999999", "1", "--reason", "accepted"], 1, "no task with id 999999"),
        (["findings", "dismiss", task, "2", "--reason", "accepted"], 1, "give a number from 1 to 1"),
        (["findings", "dismiss", task, "0", "--reason", "accepted"], 2, "'0' is not a finding number"),
    ]
    for argv, code, says in bad:
        done = harness.cli(*argv, check=False)
        assert (done.returncode, says in done.stderr) == (code, True), (argv, done.stderr)
    assert harness.cli_json("findings", "list") == []

    done = harness.cli("findings", "dismiss", task, "1", "--reason", "false-alarm", "--note", "a title, not a claim")
    assert "dismissed as false-alarm" in done.stdout
    [mark] = harness.cli_json("findings", "list")
    assert (mark["document"], mark["reason"], mark["note"], mark["task_id"]) == (
        "guide.md",
        "false-alarm",
        "a title, not a claim",
        first["task_id"],
    )

    # The document is edited around the finding: three lines above it, a section below.
    guide.write_text(EDITED)
    second = reviewed(harness, probe, guide, env)
    [moved] = second["result"]["findings"]
    assert moved["location"]["line_start"] == 4  # the same finding, elsewhere
    assert [(d["number"], d["reason"]) for d in second["dismissed"]] == [(1, "false-alarm")]
    shown = harness.cli("show", str(second["task_id"])).stdout
    assert "DISMISSED (1, not counted)" in shown and "a title, not a claim" in shown

    # docllm check in CI, reviewing the edited file in its own process with the same LLM.
    sarif = tmp_path / "out" / "docllm.sarif"
    check = harness.cli("check", str(docs), "--fail-on", "low", "--sarif", str(sarif), env=env, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "[dismissed: false-alarm]" in check.stdout and "0 at or above low. 1 dismissed." in check.stdout
    [result] = json.loads(sarif.read_text())["runs"][0]["results"]
    assert result["suppressions"] == [
        {"kind": "external", "status": "accepted", "justification": "false-alarm: a title, not a claim"}
    ]
    assert "baselineState" not in result and result["partialFingerprints"]["docllm/v1"]  # no baseline: not compared
    # Without the marks the same run fails: the mark is what let it pass.
    assert harness.cli("check", str(docs), "--fail-on", "low", "--ignore-marks", env=env, check=False).returncode == 1
    # The same through the fleet: the worker's stored report, judged the same way.
    fleet = harness.cli("check", str(docs), "--fleet", "--timeout", "120", "--fail-on", "low", env=env, check=False)
    assert fleet.returncode == 0 and "[dismissed: false-alarm]" in fleet.stdout, fleet.stdout + fleet.stderr

    # --baseline: an earlier SARIF run (marks left out: every finding in it), then a new document.
    base = tmp_path / "base.sarif"
    harness.cli("check", str(docs), "--ignore-marks", "--format", "sarif", "--output", str(base), env=env, check=False)
    (docs / "faq.md").write_text("# FAQ\n\nAsk.\n")
    new = harness.cli(
        "check", str(docs), "--ignore-marks", "--baseline", str(base), "--fail-on", "low", "--format", "json",
        env=env, check=False,
    )  # fmt: skip
    assert new.returncode == 1, new.stderr
    documents = {Path(d["path"]).name: d for d in json.loads(new.stdout)["documents"]}
    assert [f["quote"] for f in documents["faq.md"]["findings"]] == ["# FAQ"]
    assert (documents["guide.md"]["findings"], documents["guide.md"]["in_baseline"]) == ([], 1)
    text = harness.cli("check", str(docs), "--ignore-marks", "--baseline", str(base), env=env, check=False).stdout
    assert "faq.md:1: low clarity: " in text and "1 already in the baseline, not shown." in text
    broken = tmp_path / "broken.sarif"
    broken.write_text("{not json")
    refused = harness.cli("check", str(docs), "--baseline", str(broken), env=env, check=False)
    assert refused.returncode == 2 and refused.stderr.startswith(f"docllm: --baseline {broken}: not JSON")
