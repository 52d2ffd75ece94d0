"""One task's trace across processes (docs/DEPLOY.md, Tracing), with the real OpenTelemetry SDK.

Each process writes its spans as JSON lines (DOCLLM_TRACING_FILE, one file per process): the
submitting CLI, a worker that is stopped (SIGSTOP) in the middle of its LLM call until it has
lost its lease, and a second worker whose reaper reclaims the task and which commits it. Read
together, the files must show one trace: the submit, both attempts (the first with its lease
loss), the LLM calls with their GenAI attributes, and the reaper's action linked to the trace.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Harness, Probe, wait_until, write_documents
from tests.support.llm_server import FakeLLM, Reply

pytestmark = pytest.mark.e2e

LEASE = 3.0  # FAST_SETTINGS
HELD = 60.0  # the first worker's LLM answer: longer than the whole test, so the lease loss ends it
# ... and the client's timeout longer still (the harness's 10 s ended the held call first in a
# loaded run, where the first worker stayed stopped past it: outcome "error", not "cancelled").
TIMEOUT = 2 * HELD


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def test_a_task_stopped_mid_attempt_and_finished_elsewhere_is_one_trace(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    files = {name: harness.logs / f"spans-{name}.jsonl" for name in ("submit", "w1", "w2")}
    with FakeLLM() as llm:
        env = {
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_BASE_URL": llm.base_url,
            "DOCLLM_LLM_API_KEY": "test-key",
            "DOCLLM_LLM_MODEL": "test-model",
            "DOCLLM_CONCURRENCY": "1",
            "DOCLLM_LLM_TIMEOUT_SECONDS": str(TIMEOUT),
        }
        llm.script(Reply(delay=HELD))  # the first request, w1's first chat, hangs
        w1 = harness.worker("w1", env | {"DOCLLM_TRACING_FILE": str(files["w1"])})
        headings = write_documents(tmp_path / "docs", 1, "traced")
        [(name, heading)] = headings.items()
        [created] = harness.submit([tmp_path / "docs" / name], env={"DOCLLM_TRACING_FILE": str(files["submit"])})
        task_id = created["task_id"]
        wait_until(
            lambda: any(r["path"] == "/v1/chat/completions" for r in list(llm.requests)),
            30,
            "the first worker to call the LLM",
            on_timeout=harness.dump,
        )
        assert w1.pid is not None
        os.kill(w1.pid, signal.SIGSTOP)
        try:
            harness.worker("w2", env | {"DOCLLM_TRACING_FILE": str(files["w2"])})
            wait_until(
                lambda: probe.rows(False)[task_id]["status"] == "success",
                30 + LEASE,
                "the second worker to reclaim and commit the task",
                on_timeout=harness.dump,
            )
        finally:
            os.kill(w1.pid, signal.SIGCONT)

        def lost() -> list[dict[str, Any]]:
            return [s for s in _named(_spans(files["w1"]), "docllm.attempt") if s["end_time"]]

        wait_until(lost, 20, "the first worker to notice its lost lease", on_timeout=harness.dump)

    submitted, first, second = (_spans(files[n]) for n in ("submit", "w1", "w2"))
    [submit] = _named(submitted, "docllm.submit")
    trace_id = submit["context"]["trace_id"]
    [a1] = _named(first, "docllm.attempt")
    [a2] = _named(second, "docllm.attempt")
    for attempt, number in ((a1, 1), (a2, 2)):
        assert attempt["context"]["trace_id"] == trace_id
        assert attempt["parent_id"] == submit["context"]["span_id"]
        assert attempt["attributes"]["docllm.task_id"] == task_id
        assert attempt["attributes"]["docllm.attempt"] == number
    # The first attempt lost its lease (it was stopped past it); the reaper had charged it meanwhile.
    assert "docllm.lease_lost" in [e["name"] for e in a1["events"]]
    assert (a1["attributes"]["docllm.verdict"], a1["attributes"]["docllm.reason"]) == ("release", "lease_lost")
    assert a1["attributes"]["docllm.landed"] is False
    assert (a2["attributes"]["docllm.verdict"], a2["attributes"]["docllm.landed"]) == ("success", True)

    # The LLM calls, in the trace under each attempt's chunk, with the GenAI attributes.
    chats = {n: [s for s in spans if s["name"] == "chat test-model"] for n, spans in (("w1", first), ("w2", second))}
    for spans, attempt in ((first, a1), (second, a2)):
        [chunk] = _named(spans, "docllm.chunk")
        assert chunk["parent_id"] == attempt["context"]["span_id"]
    assert chats["w1"] and chats["w2"]
    for chat in chats["w1"] + chats["w2"]:
        assert chat["context"]["trace_id"] == trace_id
        assert chat["kind"] == "SpanKind.CLIENT"
        assert chat["attributes"]["gen_ai.system"] == "openai"
        assert chat["attributes"]["gen_ai.request.model"] == "test-model"
    [held] = chats["w1"]
    assert held["attributes"]["docllm.llm.outcome"] == "cancelled"  # abandoned: its request stopped (I11)
    done = chats["w2"][-1]["attributes"]
    assert done["gen_ai.usage.input_tokens"] > 0 and done["gen_ai.usage.output_tokens"] > 0
    assert done["gen_ai.response.finish_reasons"] == ["stop"]

    # The reaper's reclaim is a span of its own, linked to the task's trace.
    [reap] = [s for s in _named(second, "docllm.reap") if s["attributes"].get("docllm.task_id") == task_id]
    assert [link["context"]["trace_id"] for link in reap["links"]] == [trace_id]
    assert reap["attributes"]["docllm.action"] == "reclaimed"
    # No document text in any span.
    assert not any(heading in files[n].read_text() for n in files)
