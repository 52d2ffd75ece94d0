"""OpenAIBatchApi (issue 28) against the test server's Files and Batch APIs with the real openai
client: upload, create with its docllm_ref, find by that ref (adoption), retrieve, the result
files' lines, cancel; a lost file is BatchFileLost, a server that does not answer is
ProviderUnavailable, as the realtime reviewer's errors are."""

from __future__ import annotations

import json
import time

import pytest

from docllm.adapters.llm.batch_client import OpenAIBatchApi
from docllm.domain.batches.lines import request_lines
from docllm.domain.errors import BatchFileLost, DocllmError, ProviderUnavailable
from tests.support.llm_server import FakeLLM

DOC = "# Install\n\nRun it.\n"


def jsonl(task_id: int) -> bytes:
    lines = request_lines(task_id, 1, "d.md", DOC, None, "test-model", 12000)
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def wait_status(api: OpenAIBatchApi, batch_id: str, status: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while api.retrieve(batch_id).status != status:
        assert time.monotonic() < end, f"{batch_id} not {status} within {timeout} s"
        time.sleep(0.02)


def test_a_batch_round_trip_and_adoption_by_ref():
    with FakeLLM(batch_delay_s=0.2) as llm:
        api = OpenAIBatchApi(llm.base_url, "sk-test", "test-model", 5)
        file_id = api.upload(jsonl(7), "in.jsonl")
        made = api.create(file_id, "ref-1")
        assert made.ref == "ref-1" and made.input_file_id == file_id
        found = api.find("ref-1")
        assert found is not None and (found.id, found.ref) == (made.id, "ref-1")
        assert api.find("ref-unknown") is None
        wait_status(api, made.id, "completed")
        done = api.retrieve(made.id)
        assert done.output_file_id and json.loads(api.content(done.output_file_id)[0])["custom_id"] == "docllm:7:1:0"
        api.cancel(made.id)  # an ended batch: nothing to do, no error
        api.close()


def test_a_lost_file_and_an_unreachable_server_are_the_domains_errors():
    with FakeLLM(batch_delay_s=0.1, lose_files=1) as llm:
        api = OpenAIBatchApi(llm.base_url, "sk-test", "test-model", 5)
        made = api.create(api.upload(jsonl(1), "in.jsonl"), "ref-2")
        wait_status(api, made.id, "completed")
        with pytest.raises(BatchFileLost, match="is gone"):
            api.content(api.retrieve(made.id).output_file_id or "")
        with pytest.raises(DocllmError):
            api.retrieve("batch_unknown")
        port = llm.port
    gone = OpenAIBatchApi(f"http://127.0.0.1:{port}/v1", "sk-test", "test-model", 2)
    with pytest.raises(ProviderUnavailable):
        gone.retrieve("batch_x")
