"""The batch lane end to end (issue 28's "Done when"): 200 bulk tasks reviewed by provider batches
through two real worker processes, redis-server, MariaDB and the OpenAI-compatible test server's
Files and Batch APIs (tests/support/llm_batches.py), with the real ``openai`` client.

What goes wrong on purpose, each at a known step (the test server holds one answer until the test
has killed its caller: ``POST /_fake/hold``):

- a batcher is SIGKILLed after its upload and after the provider made its batch, before it learnt
  the batch's id (the create's answer is held): the durable record has the batch ``uploaded`` with
  no id; a poller must adopt it by its docllm_ref (``batches.list``), never create it twice;
- a poller is SIGKILLed mid-poll (its ``batches.retrieve`` is held) while the batch is in progress:
  another process takes the batch lease over once it lapses;
- the third batch created expires (half its lines never answered): its tasks are handed back
  uncharged and go by a later batch;
- 5 % of all batch lines answer 500 (the provider's fault: handed back uncharged, counted towards
  DOCLLM_MAX_HANDBACKS), and three documents are poisoned (their line answers 400
  ``context_length_exceeded``: the document's fault, judged by the one verdict model, so they fail at
  once, without a retry).

The tasks go in two waves of 100: the second is submitted once the poller's hold is armed, so that
retrieves surely follow it (the first wave may be done by then).

Checked: every task ends ``success`` (the poisoned ``failed`` with a readable error); each committed
exactly once (a MariaDB trigger counts the commits, apart from the product's logs); no attempt
charged (``retry_count`` 0) for the expiry, the kills or the failed lines; every batch the provider
made is in the durable record and was created once; every cost at the batch price (half the
realtime DOCLLM_LLM_PRICES); ``stats --json`` and ``show --json`` list the batches.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.e2e.harness import (
    FAST_SETTINGS,
    Harness,
    Probe,
    Proc,
    commits,
    install_commit_audit,
    start_llm_server,
    tcp_ports,
    wait_until,
    write_documents,
)
from tests.support.cli_shapes import BATCH_FIELDS

pytestmark = pytest.mark.e2e

TASKS = 200
WAVE = TASKS // 2
POISONED = (10, 110, 190)  # 1-based document numbers whose batch line answers 400
POISON = "POISON-THIS-DOCUMENT"
PRICE_IN, PRICE_OUT = 1000.0, 4000.0  # USD per 1M tokens, realtime: the batch price is half of each
BATCH_DELAY_S = (1.0, 2.0)  # a batch's run at the test server, from create to completed
POLL_S = 0.5  # DOCLLM_BATCH_POLL_SECONDS
MAX_TASKS = 25  # DOCLLM_BATCH_MAX_TASKS: a wave makes four batches or more
MAX_WAIT_S = 0.5  # DOCLLM_BATCH_MAX_WAIT_SECONDS
# Twice the harness's: a dead batcher's or poller's members must not lapse before the next poller
# renews them (a batch lease and a poll later: about 1 s) even on a loaded machine; if they did, the
# reaper would hand them back uncharged and the run would still pass, proving less.
LEASE_S = 2 * float(FAST_SETTINGS["DOCLLM_LEASE_SECONDS"])
BATCH_LEASE_S = min(POLL_S, LEASE_S / 3)  # Settings.batch_lease_seconds
EXPIRES = 3  # the third batch created expires
FAIL_RATE = 0.05
NO_MEMBER_LEFT = "no member is waiting for it any more"  # the poller's reason to return a batch of none
# ... and a batch left open (recorded, not uploaded) by a batcher that died or stalled past its lease
BATCHER_GONE = "its batcher stopped before the upload"
# A held answer waits this long for the test to kill its caller (the test looks every 0.1 s); the
# client's timeout is longer, so the held call never times out before the kill.
HOLD_S = 30.0
LLM_TIMEOUT_S = HOLD_S + 15
# Starting a worker (imports, schema check) takes seconds; a loaded 2-core machine, many more.
START_S = 30.0
# One wave, once the workers run: its batches sent one after another by each batcher, each polled
# until it ends; a batch handed back (expired, failed lines) goes again. Generous: 10 rounds of a
# batch's whole life (claim wait, run, poll, the lapse of a dead holder's lease) on a loaded machine.
ROUND_S = MAX_WAIT_S + BATCH_DELAY_S[1] + POLL_S + BATCH_LEASE_S + LEASE_S
DEADLINE_S = START_S + 10 * ROUND_S


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:  # noqa: S310 - loopback
        return json.loads(r.read())


def _arm(port: int, route: str) -> None:
    body = json.dumps({"route": route, "seconds": HOLD_S}).encode()
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"http://127.0.0.1:{port}/_fake/hold", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as r:  # noqa: S310
        assert r.status == 200


def _batches(probe: Probe) -> dict[str, dict[str, Any]]:
    with probe.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT ref, state, batch_id, input_file_id, error, tasks FROM llm_batches"))
        return {r["ref"]: dict(r) for r in found.mappings()}


def _tasks(probe: Probe) -> dict[int, dict[str, Any]]:
    cols = "task_id, task_name, status, attempt, retry_count, handbacks, error, prompt_tokens, completion_tokens"
    with probe.engine.connect() as conn:
        found = conn.execute(sa.text(f"SELECT {cols}, cost_usd FROM task_doc_llm")).mappings()  # noqa: S608
        return {int(r["task_id"]): dict(r) for r in found}


def _members(probe: Probe, ref: str) -> dict[int, int]:
    """A batch's member tasks -> the attempt each was in it on."""
    with probe.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT task_id, attempt FROM llm_batch_tasks WHERE ref = :r"), {"r": ref})
        return {int(t): int(a) for t, a in found}


def _sender(harness: Harness, peer: int) -> Proc | None:
    """The worker whose TCP socket has local port ``peer`` (the client end the server saw)."""
    found = [p for p in harness.procs.values() if p.kind == "worker" and p.alive and peer in tcp_ports(p.pid or 0)]
    return found[0] if len(found) == 1 else None


def _held(harness: Harness, port: int, route: str) -> tuple[dict[str, Any], Proc]:
    """The request whose answer the server holds (once it is held), and the worker that sent it
    (found by the held connection's port: a lease owner may have changed meanwhile)."""
    [held] = wait_until(
        lambda: [h for h in _get(port, "/_fake/held") if h["route"] == route],
        DEADLINE_S,
        f"the test server to hold a batch {route}",
        on_timeout=harness.dump,
    )
    return held, wait_until(lambda: _sender(harness, held["peer"]), 10, f"the sender of the held {route}")


@pytest.mark.timeout(120 + 3 * DEADLINE_S)
def test_bulk_tasks_by_batch_through_kills_an_expiry_and_failed_lines_commit_once_at_half_price(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    low, high = BATCH_DELAY_S
    llm, port = start_llm_server(
        harness,
        seed=7,
        extra=[
            *("--batch-delay-s", f"{low}-{high}", "--batch-fail-rate", str(FAIL_RATE)),
            *("--poison-marker", POISON, "--expire-batches", f"at:{EXPIRES}"),
        ],
    )
    harness.env.update(
        DOCLLM_LLM_PROVIDER="openai",
        DOCLLM_LLM_BASE_URL=f"http://127.0.0.1:{port}/v1",
        DOCLLM_LLM_API_KEY="test-key",
        DOCLLM_LLM_MODEL="test-model",
        DOCLLM_LLM_PRICES=f"test-model={PRICE_IN:g}/{PRICE_OUT:g}",
        DOCLLM_LLM_TIMEOUT_SECONDS=str(LLM_TIMEOUT_S),
        DOCLLM_LLM_BATCH="on",
        DOCLLM_BATCH_MAX_TASKS=str(MAX_TASKS),
        DOCLLM_BATCH_MAX_WAIT_SECONDS=str(MAX_WAIT_S),
        DOCLLM_BATCH_POLL_SECONDS=str(POLL_S),
        # A task whose line fails (5 %) four batches in a row would be charged at the default bound
        # of 3 hand-backs (I12); with 10 that needs 0.05^11: never, so retry_count 0 must hold.
        DOCLLM_MAX_HANDBACKS="10",
        DOCLLM_LEASE_SECONDS=f"{LEASE_S:g}",
    )
    install_commit_audit(probe)
    headings = write_documents(tmp_path / "docs", TASKS, tag="bulk")
    names = sorted(headings)
    for n in POISONED:
        path = tmp_path / "docs" / names[n - 1]
        path.write_text(path.read_text() + f"\n{POISON}\n")
    paths = [tmp_path / "docs" / name for name in names]

    def submit(wave: list[Path]) -> set[int]:
        return {t["task_id"] for t in harness.cli_json("submit", "--priority", "bulk", *map(str, wave))}

    first = submit(paths[:WAVE])
    _arm(port, "create")  # the first batch created: made at the provider, its answer held
    for name in ("A", "B"):
        harness.worker(name)

    # 1. The batcher dies after its upload, once the provider made the batch, before it learnt the id.
    created, batcher = _held(harness, port, "create")
    adopted_ref = created["ref"]
    row = _batches(probe)[adopted_ref]
    assert (row["state"], row["batch_id"]) == ("uploaded", None), row  # uploaded, the id not recorded
    batcher.kill()
    batcher.start()  # a new incarnation: two workers again
    wait_until(lambda: batcher.serving, START_S, "the restarted worker to serve", on_timeout=batcher.tail)

    # 2. A poller dies mid-poll (its retrieve held) while its batch is in progress; the other worker
    # polls on meanwhile (armed once both serve, so a poller is left to renew the members' leases).
    _arm(port, "retrieve")
    second = submit(paths[WAVE:])  # more batches to poll, surely after the hold is armed
    retrieved, poller = _held(harness, port, "retrieve")
    polled_ref = retrieved["ref"]
    assert _batches(probe)[polled_ref]["state"] == "submitted"  # in progress, not yet applied
    poller.kill()
    poller.start()

    ids = first | second

    def settled() -> dict[int, dict[str, Any]] | None:
        rows = _tasks(probe)
        return rows if all(rows[i]["status"] in ("success", "failed") for i in ids) else None

    rows = wait_until(settled, DEADLINE_S, "every task to end", interval=0.2, on_timeout=lambda: str(probe.counts()))
    counters = _get(port, "/_fake/counters")

    def ended() -> dict[str, dict[str, Any]] | None:
        found = _batches(probe)
        return found if all(b["state"] in ("applied", "returned") for b in found.values()) else None

    batches = wait_until(ended, DEADLINE_S, "every batch to be applied or returned")
    stats = harness.stats()
    by_name = {r["task_name"]: r for r in rows.values()}
    poisoned = {by_name[names[n - 1]]["task_id"] for n in POISONED}
    audited = commits(probe)

    # The figures: what the run cost at the batch price, and what realtime would have cost.
    batch_usd = sum(r["cost_usd"] or 0 for r in rows.values())
    realtime_usd = sum(
        ((r["prompt_tokens"] or 0) * PRICE_IN + (r["completion_tokens"] or 0) * PRICE_OUT) / 1e6 for r in rows.values()
    )
    states = Counter(b["state"] for b in batches.values())
    returned_why = [b["error"] for b in batches.values() if b["state"] == "returned"]
    print(
        f"\n{TASKS} bulk tasks, {len(batches)} batches {dict(states)} (returned: {returned_why}); "
        f"server {counters}; cost {batch_usd:.4f} USD at the batch price vs {realtime_usd:.4f} USD realtime "
        f"(saved {realtime_usd - batch_usd:.4f} USD, {100 * (1 - batch_usd / realtime_usd):.1f} %); "
        f"attempts {dict(Counter(r['attempt'] for r in rows.values()))}, "
        f"hand-backs {dict(Counter(r['handbacks'] for r in rows.values()))}"
    )

    # Every task ended: the poisoned failed at once with a readable error, the others succeeded.
    for i in poisoned:
        r = rows[i]
        assert r["status"] == "failed" and "(400): poisoned document" in (r["error"] or "").lower(), r
        assert r["retry_count"] == 1 and audited.get(i) is None, r  # the document's fault: failed at once
    others = ids - poisoned
    assert {i: rows[i]["status"] for i in others if rows[i]["status"] != "success"} == {}
    # Each committed exactly once, on the attempt the row ended on (the audit trigger, not the logs).
    assert {i: audited.get(i) for i in others if audited.get(i) != [rows[i]["attempt"]]} == {}
    # No attempt charged: not for the expiry, the kills, nor a line that failed (the provider's fault).
    assert {i: rows[i]["retry_count"] for i in others if rows[i]["retry_count"]} == {}
    assert not [e for e in harness.events("retried", "failed") if e.get("task_id") in others]

    # The kills: the batch left uploaded was adopted (found by its ref, never made twice) and applied
    # (or, had its members lapsed meanwhile, returned without them: they went uncharged by another);
    # the batch whose poller died was finished by another process.
    adopted = batches[adopted_ref]
    assert adopted["state"] == "applied" or adopted["error"] == NO_MEMBER_LEFT, adopted
    assert [e["ref"] for e in harness.events("batch_adopted")] == [adopted_ref]
    made = {b["batch_id"] for b in batches.values() if b["batch_id"]}
    assert counters["batches_created"] == len(made), "a batch made at the provider twice, or one not recorded"
    assert counters["creates_held"] == 1 and counters["retrieves_held"] == 1
    assert batches[polled_ref]["state"] in ("applied", "returned")
    # The expiry: one batch returned because the provider said expired, its tasks went by a later
    # batch. (Others may be returned with no member left: members whose leases ran out while their
    # poller was killed or held were handed back by the reaper, uncharged, as checked above; or
    # left open: the killed poller's process was also a batcher, and a suite run saw it die with a
    # batch recorded and not yet uploaded, which the other worker returned, its members uncharged.)
    [expired_ref] = [ref for ref, b in batches.items() if "ended expired" in (b["error"] or "")]
    assert batches[expired_ref]["state"] == "returned"
    assert {why for why in returned_why if "ended expired" not in (why or "")} <= {NO_MEMBER_LEFT, BATCHER_GONE}
    expired = _members(probe, expired_ref)
    assert len(expired) == batches[expired_ref]["tasks"] > 0
    # Handed back uncharged: a later attempt, by a later batch, and no charge (checked above).
    assert {i: rows[i]["attempt"] for i, attempt in expired.items() if rows[i]["attempt"] <= attempt} == {}
    assert counters["batch_lines_failed"] >= 2, "no line failed: the failed lines prove nothing"

    # Cost at the batch price: every success's cost is its tokens at half the realtime prices.
    for i in others:
        r = rows[i]
        half = (r["prompt_tokens"] * PRICE_IN / 2 + r["completion_tokens"] * PRICE_OUT / 2) / 1e6
        assert r["cost_usd"] == pytest.approx(half), r
    assert batch_usd == pytest.approx(realtime_usd / 2)

    # stats --json lists the batches; show --json a task's (the expired batch, then the one that applied).
    listed = stats["batches"]
    assert listed["by_state"]["applied"] == states["applied"] and listed["by_state"]["returned"] == states["returned"]
    assert listed["tasks_in_unfinished"] == 0
    assert listed["shown"] and all(set(BATCH_FIELDS) <= set(b) for b in listed["shown"])
    member = next(i for i in expired if i in others)
    shown = harness.cli_json("show", str(member))
    assert {b["ref"]: b["state"] for b in shown["batches"]}[expired_ref] == "returned"
    assert [b["state"] for b in shown["batches"]][0] == "applied"  # newest first: the one that committed it
