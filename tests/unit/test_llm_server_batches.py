"""The fake Batch API's life of a batch on a clock the test moves (no sleeps): each status at its
share of the delay, progress counted as lines are answered, and the result files made once."""

from __future__ import annotations

import json

from tests.support.llm_batches import FakeBatches
from tests.support.llm_server import smart_answer

DELAY = 100.0


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def chat(body: dict) -> tuple[int, dict]:
    return 200, smart_answer(body)


def start(batches: FakeBatches, n: int) -> str:
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}
        for i in range(n)
    ]
    jsonl = "".join(json.dumps(x) + "\n" for x in lines).encode()
    status, uploaded, _ = batches.serve(
        "POST", "/v1/files", {"file": {"filename": "in", "content": jsonl}, "purpose": "batch"}
    )
    assert status == 200
    body = {"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    status, batch, _ = batches.serve("POST", "/v1/batches", body)
    assert status == 200 and batch["status"] == "validating"
    return str(batch["id"])


def test_a_batch_moves_through_its_statuses_at_its_shares_of_the_delay() -> None:
    clock = Clock()
    batches = FakeBatches(chat, batch_delay_s=DELAY, clock=clock)
    batch_id = start(batches, 20)
    seen = []
    for at in (5, 9.9, 10, 50, 89.9, 90, 99.9, 100, 200):
        clock.now = at
        _, batch, _ = batches.serve("GET", f"/v1/batches/{batch_id}", None)
        seen.append((at, batch["status"], batch["request_counts"]["completed"]))
    statuses = [status for _, status, _ in seen]
    assert statuses == ["validating"] * 2 + ["in_progress"] * 3 + ["finalizing"] * 2 + ["completed"] * 2
    done = [completed for _, _, completed in seen]
    assert done == sorted(done) and done[2] == 0 and 0 < done[3] < 20 and done[5] == 20  # lines answered over time
    assert batches.counters["batch_lines"] == 20  # the files were made once, at the end
    assert batch["completed_at"] - batch["created_at"] == DELAY


def test_a_batch_cancelled_in_validation_keeps_no_line() -> None:
    clock = Clock()
    batches = FakeBatches(chat, batch_delay_s=DELAY, cancel_delay_s=5, clock=clock)
    batch_id = start(batches, 3)
    clock.now = 1
    _, batch, _ = batches.serve("POST", f"/v1/batches/{batch_id}/cancel", None)
    assert batch["status"] == "cancelling"
    clock.now = 5.9
    assert batches.serve("GET", f"/v1/batches/{batch_id}", None)[1]["status"] == "cancelling"
    clock.now = 6
    _, batch, _ = batches.serve("GET", f"/v1/batches/{batch_id}", None)
    assert batch["status"] == "cancelled" and batch["output_file_id"] is None
    _, errors, _ = batches.serve("GET", f"/v1/files/{batch['error_file_id']}/content", None)
    assert sorted(json.loads(x)["custom_id"] for x in errors.splitlines()) == ["c0", "c1", "c2"]


def test_an_armed_hold_delays_the_next_create_or_retrieve_once_after_doing_it() -> None:
    batches = FakeBatches(chat, batch_delay_s=DELAY, clock=Clock())
    batches.arm("create", 7.5)
    batches.arm("retrieve", 3.0)
    assert batches.hold_for("POST", "/v1/files", 200) == 0.0  # an upload is never held
    batch_id = start(batches, 2)  # the batch is made whatever its answer's wait
    made = {"id": batch_id, "metadata": {"docllm_ref": "r1"}}
    assert batches.hold_for("POST", "/v1/batches", 200, made) == 7.5
    assert batches.hold_for("POST", "/v1/batches", 200) == 0.0  # once
    assert batches.hold_for("GET", "/v1/batches?limit=20", 200) == 0.0  # a list is not a retrieve
    assert batches.hold_for("GET", f"/v1/batches/{batch_id}", 404) == 0.0  # nor a failed one
    assert batches.hold_for("GET", f"/v1/batches/{batch_id}", 200) == 3.0
    assert (batches.counters["creates_held"], batches.counters["retrieves_held"]) == (1, 1)
    assert batches.counters["batches_created"] == 1
    assert [(h["route"], h["batch_id"]) for h in batches.held] == [("create", batch_id), ("retrieve", None)]
    assert batches.held[0]["ref"] == "r1"
