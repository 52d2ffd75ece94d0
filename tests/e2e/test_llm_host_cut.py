"""One host cut off from the LLM while the LLM serves the other (issue 22 item 2, ARCHITECTURE.md, Whose fault it is):
the cut-off host's failures are its own, not the documents'. It hands what it holds back uncharged
and stops claiming (re-checking with backoff) while the other worker does the work.

Real processes: the OpenAI-compatible test server, two workers on the real openai client path,
redis-server and MariaDB. Worker A reaches the LLM directly; worker B through a link of the fault
proxy (tests/servers/fault_proxy.py). Twenty documents whose answers take 1 to 2 s keep both busy;
once B has an attempt on its way to the LLM, B's link stops listening (new connections refused) and
its open connections are reset: B's request in flight and every later one fail at once with
"cannot reach the LLM" (ProviderUnavailable), and so does B's own ``check()``.

B is cut once the LLM has served a quarter of the tasks (so the fleet's breaker window holds more
of A's successes than B's first failures, as when one host of many loses its route) and while B
holds an attempt started on its row.

Every task must end ``success`` with no attempt charged (``retry_count`` 0, no retry or failure
that blames "cannot reach the LLM"), B must have handed back what failed, and B must start no
attempt beyond those it held at the cut (it stopped claiming).

Before the fix (issue 22 item 2) the gate saw A served after B's failure, called it the document's,
retried once and charged it, never reaching B's ``check()``: 6 of 20 tasks charged "cannot reach
the LLM" and B kept claiming until the queue was empty.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.harness import FAST_SETTINGS, Harness, Probe, start_llm_server, wait_until, write_documents
from tests.servers.fault_proxy import FaultProxy

pytestmark = pytest.mark.e2e

TASKS = 20
LATENCY_MS = (1000, 2000)  # each answer: long enough that both workers are busy when B is cut
CONCURRENCY = int(FAST_SETTINGS["DOCLLM_CONCURRENCY"])  # attempts per worker at once
LLM_TIMEOUT_S = 5.0  # above the slowest answer with margin on a loaded machine; short if a call hangs
# B is cut once the fleet has been served for a while, as when one host of many loses its route:
# the breaker's window then holds more of A's successes than B's first failures (at least
# DOCLLM_BREAKER_MIN_CALLS, 5 by default, so the fleet's breaker has a ratio to judge by).
SERVED_BEFORE_CUT = TASKS // 4
UNREACHABLE = "cannot reach the LLM"  # the openai reviewer's ProviderUnavailable for a connection error
# Worker A alone does every task one answer after another, each slot at the slowest latency; a
# loaded 2-core machine gets four times that, plus a retry backoff and a timeout or two.
WORK_S = TASKS / CONCURRENCY * LATENCY_MS[1] / 1000
DEADLINE_S = 4 * WORK_S + float(FAST_SETTINGS["DOCLLM_RETRY_MAX_SECONDS"]) + 2 * LLM_TIMEOUT_S


def _ts(event: dict) -> float:
    """A log line's time (its ``ts``, UTC ISO) as epoch seconds."""
    return datetime.fromisoformat(event["ts"]).replace(tzinfo=UTC).timestamp()


@pytest.mark.timeout(120 + 2 * DEADLINE_S)
def test_a_host_cut_off_from_the_llm_charges_nothing_and_stops_claiming(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    headings = write_documents(tmp_path / "docs", TASKS, tag="cut")
    ids = {t["task_id"] for t in harness.submit(sorted(tmp_path / "docs" / name for name in headings))}
    _, llm_port = start_llm_server(harness, latency_ms=f"{LATENCY_MS[0]}-{LATENCY_MS[1]}")
    proxy = FaultProxy()
    try:
        link = proxy.link("B-llm", "127.0.0.1", llm_port)
        settings = {
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_API_KEY": "test-key",
            "DOCLLM_LLM_MODEL": "test-model",
            "DOCLLM_LLM_TIMEOUT_SECONDS": str(LLM_TIMEOUT_S),
        }
        harness.worker("A", {**settings, "DOCLLM_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1"})
        b = harness.worker("B", {**settings, "DOCLLM_LLM_BASE_URL": f"http://127.0.0.1:{link.port}/v1"})

        def started(proc: str) -> list[dict]:
            return [e for e in harness.events("started") if e["_proc"] == proc]

        def b_busy_after_service() -> bool:
            """The LLM has served SERVED_BEFORE_CUT tasks, and B holds an attempt started on its row."""
            rows = probe.rows(False)
            if sum(r["status"] == "success" for r in rows.values()) < SERVED_BEFORE_CUT:
                return False
            held = {x.get("task_id") for x in probe.leases() if x.get("holder") == b.worker_id}
            return link.stats["connections"] >= 1 and any(rows[t]["status"] == "processing" for t in held if t in rows)

        wait_until(
            b_busy_after_service, DEADLINE_S, "the LLM to serve and B to hold an attempt", on_timeout=harness.dump
        )
        b_started_before = len(started("B"))
        cut_at = time.time()
        link.refuse()  # nothing listens on B's LLM address any more: new connections are refused
        link.reset()  # and B's open connections (its request in flight) are reset
        done_at_cut = sum(r["status"] == "success" for r in probe.rows(False).values())

        def settled() -> dict[int, dict] | None:
            rows = probe.rows(False)
            return rows if all(rows[i]["status"] in ("success", "failed") for i in ids) else None

        rows = wait_until(
            settled,
            DEADLINE_S,
            "every task to end",
            interval=0.2,
            on_timeout=lambda: f"{probe.counts()}\n{harness.dump()}",
        )
        took = time.time() - cut_at
    finally:
        proxy.close()

    succeeded = Counter(e["_proc"] for e in harness.events("succeeded") if e["task_id"] in ids)
    handed_back = Counter(e.get("reason") for e in harness.events("released") if e["_proc"] == "B")
    charges = [
        (e["_proc"], e["task_id"], e.get("reason"), e.get("error"))
        for e in harness.events("retried", "failed")
        if e.get("task_id") in ids
    ]
    b_after_cut = started("B")[b_started_before:]
    b_last_start = max((_ts(e) - cut_at for e in b_after_cut), default=None)
    stopped_claiming = "stopped claiming" in harness.procs["B"].log_text()
    charged = {i: r["retry_count"] for i, r in rows.items() if i in ids and r["retry_count"]}
    print(
        f"\n{TASKS} tasks, {done_at_cut} done when B was cut, all ended {took:.1f}s after the cut "
        f"(deadline {DEADLINE_S:g}s): done by A {succeeded['A']}, by B {succeeded['B']}; "
        f"B's attempts handed back {dict(handed_back)}; B started {len(b_after_cut)} attempts after the "
        f"cut (last {b_last_start if b_last_start is None else round(b_last_start, 1)}s after it), "
        f"B's log says it stopped claiming: {stopped_claiming}; "
        f"charged rows {charged}, charging events {len(charges)}"
    )
    for charge in charges:
        print(f"  charged: {charge}")

    assert charged == {}, f"attempts charged for B's cut (task -> retry_count): {charged}\n{charges}"
    blamed = [c for c in charges if UNREACHABLE in str(c[3])]
    assert blamed == [], f"attempts charged for {UNREACHABLE!r}: {blamed}"
    errors = {i: r["error"] for i, r in rows.items() if i in ids and UNREACHABLE in str(r["error"] or "")}
    assert errors == {}, f"rows whose error blames {UNREACHABLE!r}: {errors}"
    assert all(rows[i]["status"] == "success" for i in ids), {i: rows[i]["status"] for i in ids}
    assert sum(handed_back.values()) >= 1, "B handed nothing back: no attempt of B failed after the cut"
    # B stopped claiming: what it started after the cut is at most what it held at the cut.
    assert len(b_after_cut) <= CONCURRENCY, f"B kept claiming after the cut: {b_after_cut}"
