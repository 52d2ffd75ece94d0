"""The ``docllm`` CLI's contract: JSON shapes, exit codes, errors that name the file (real Redis, SQLite)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest

from docllm.domain.batches.model import BatchState
from docllm.domain.review.answer_schema import SCHEMA_VERSION
from docllm.domain.review.report import finding, make_report
from docllm.domain.tasks.workers import InFlight, WorkerRecord
from docllm.entrypoints.bootstrap import build_container, load_settings
from tests.support.cli_runner import cli_runner
from tests.support.cli_shapes import BATCH_FIELDS, CLOSED_BREAKER, SHOW_FIELDS, STATUS_FIELDS


@pytest.fixture
def cli(redis_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCLLM_REDIS_URL", redis_url)
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'docllm.db'}")
    monkeypatch.setenv("DOCLLM_QUEUE_PREFIX", f"cli{uuid.uuid4().hex[:6]}")

    run = cli_runner(capsys)

    return run


OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState

NO_USAGE = {
    f"{key}{suffix}": (None if key == "cost_usd" else 0)
    for suffix in ("", "_last_hour")
    for key in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "llm_seconds", "cost_usd")
}


def lane_row(key, name, depth):
    """A row of ``stats --json`` -> lanes with ``depth`` pending rows, none started or ended."""
    waits = {"wait_p50_s": None, "wait_p95_s": None, "wait_samples": 0}
    oldest = ANY_AGE if depth else None
    done = {"finished": 0, "done_per_min": 0.0}
    return {key: name, "depth": depth, "in_flight": 0, **done, **waits, "oldest_pending_s": oldest}


class _AnyAge:
    def __eq__(self, other):
        return isinstance(other, float) and 0 <= other < 600

    def __repr__(self):
        return "<an age in seconds>"


ANY_AGE = _AnyAge()


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def test_submit_status_and_stats_have_the_documented_shapes(cli, tmp_path):
    a, b = write(tmp_path, "a.md", "# A\n\nTODO: write\n"), write(tmp_path, "b.md", "# B\n")
    assert cli("init-db")[0] == 0
    code, out, _ = cli("submit", a, b, "--json")
    assert code == 0 and json.loads(out) == [{"task_id": 1, "task_name": "a.md"}, {"task_id": 2, "task_name": "b.md"}]
    code, out, _ = cli("submit", a, "--name", "renamed", "--json")
    assert json.loads(out) == [{"task_id": 3, "task_name": "renamed"}]

    code, out, _ = cli("status", "1", "--json")
    [task] = json.loads(out)
    assert code == 0 and set(task) >= STATUS_FIELDS
    assert (task["status"], task["attempt"], task["result"], task["finished_at"]) == ("pending", 0, None, None)
    assert [t["task_id"] for t in json.loads(cli("status", "--json")[1])] == [3, 2, 1]  # newest first

    code, out, _ = cli("stats", "--json")
    stats = json.loads(out)
    budget = stats["llm"].pop("budget")  # no cap set: claims allowed (its day follows the authority clock)
    assert (budget["claims"], budget["cap_from"], budget["spent_usd_today"]) == ("allowed", "off", 0)
    assert code == 0 and stats == {
        "tasks": {"pending": 3, "processing": 0, "success": 0, "failed": 0},
        "queue": {"ready": 3, "processing": 0, "delayed": 0, "dead": 0},
        "oldest_processing_s": None,
        "llm": {
            "breaker": CLOSED_BREAKER,
            "usage": NO_USAGE,
        },
        "lanes": {
            "window_s": 3600,
            "by_lane": [
                lane_row("lane", name, depth) for name, depth in (("interactive", 0), ("default", 3), ("bulk", 0))
            ],
            "by_tenant": [lane_row("tenant", None, 3)],  # submit gives no tenant (yet): one group, null
            "other_tenants": None,  # every tenant is shown: no "(other)" row
            "tenants_with_work": 0,
        },
    }  # no "batches" key: no batch was ever recorded (cli_shapes.BATCH_FIELDS)
    table = cli("stats")[1]
    assert "queue ready" in table and "llm breaker state" in table
    assert re.search(r"default\s.*\s3\s", table) and "top tenants by depth (1 shown, 0 with work)" in table


@pytest.mark.parametrize(
    "content, why",
    [
        (None, "not found|No such file|does not exist"),
        (b"\x89PNG\x00\x00binary", "binary|not text|NUL"),
        (b"x" * 2048, "limit|too large|over"),
    ],
)
def test_submit_refuses_a_bad_file_by_name_and_creates_no_task(cli, tmp_path, monkeypatch, content, why):
    monkeypatch.setenv("DOCLLM_MAX_DOCUMENT_BYTES", "1024")
    good = write(tmp_path, "good.md", "# fine\n")
    bad = str(tmp_path / "bad.bin") if content is None else write(tmp_path, "bad.bin", content)
    code, out, err = cli("submit", good, bad, "--json")
    assert code == 1 and "bad.bin" in err and len(err.strip().splitlines()) == 1
    assert re.search(why, err, re.I)
    assert json.loads(cli("stats", "--json")[1])["tasks"]["pending"] == 0


def test_usage_errors_exit_2_and_bad_settings_name_the_variable(cli, monkeypatch):
    assert cli("submit")[0] == 2
    assert cli("frobnicate")[0] == 2
    assert cli("status", "--json", "not-a-number")[0] == 2
    monkeypatch.setenv("DOCLLM_LEASE_SECONDS", "-1")
    with pytest.raises(SystemExit) as stop:
        cli("stats")
    assert stop.value.code == 2


def test_unknown_task_id_is_an_error(cli):
    code, out, err = cli("status", "999", "--json")
    assert code == 1 and "999" in err and json.loads(out) == []


def test_dead_letters_list_and_retry(cli, tmp_path, redis_url):
    import redis

    from docllm.domain.tasks.attempts import TaskProcessor
    from docllm.entrypoints.bootstrap import build_container, load_settings

    path = write(tmp_path, "a.md", "# A\n")
    cli("submit", path)
    container = build_container(load_settings(), log=False)
    queue, repo = container.queue(), container.repository()

    class Refuses:
        name = "stub"

        def review(self, *_):
            from docllm.domain.errors import PermanentError

            raise PermanentError("the document is not a document")

        def check(self):
            pass

    proc = TaskProcessor(
        queue, repo, Refuses(), container.clock(), container.retry_policy(), container.lease_policy(), "w"
    )
    attempt = proc.begin(proc.claim())
    proc.finish(attempt, asyncio.run(proc.review(attempt)))
    redis.Redis.from_url(redis_url).lpush(container.settings().queue_prefix + ":queue:ready", "garbage")
    proc.begin(proc.claim())

    code, out, _ = cli("dead", "list", "--json")
    letters = json.loads(out)
    assert code == 0 and {d["reason"] for d in letters} >= {"the document is not a document"}
    assert any("malformed" in d["reason"] and d["payload"] == "garbage" for d in letters)
    code, out, _ = cli("dead", "retry", "1", "--json")
    assert code == 0 and json.loads(out) == {"requeued": [1]}
    status = json.loads(cli("status", "1", "--json")[1])[0]
    assert status["status"] == "pending" and status["retry_count"] == 0
    assert [d["payload"] for d in json.loads(cli("dead", "list", "--json")[1])] == ["garbage"]
    assert cli("dead", "retry", "1")[0] == 1  # nothing to retry any more
    code, out, err = cli("dead", "discard", "1", "--json")
    assert code == 1 and "no dead letter" in err
    code, out, _ = cli("dead", "discard", "--all", "--json")  # the malformed letter names no task
    assert code == 0 and json.loads(out) == {"discarded": [None]}
    assert json.loads(cli("dead", "list", "--json")[1]) == []
    container.shutdown_resources()


# -- show, workers, cancel (the operator's surface, ARCHITECTURE.md, Operator surface) ------------------------------


@pytest.fixture
def ports(cli):
    cli("init-db")
    container = build_container(load_settings(), log=False)
    yield container
    container.shutdown_resources()


REPORT = make_report(
    [
        finding("style", "low", "Passive voice.", heading="Intro", line_start=3, quote="was written"),
        finding(
            "security",
            "critical",
            "A real API key is published.",
            heading="Install > Linux",
            line_start=12,
            line_end=14,
            quote="sk-live-123",
            suggestion="Rotate the key and use a placeholder.",
        ),
        finding("links", "high", "Broken anchor.", heading="Install", line_start=20, quote="[x](#nope)"),
    ],
    "Three problems.",
    "offline",
    "offline-rules-1",
)


def test_show_renders_the_report_by_severity_and_has_a_json_shape(cli, ports, tmp_path):
    cli("submit", write(tmp_path, "guide.md", "# Guide\n"))
    repo = ports.repository()
    attempt = repo.start_attempt(1, "tok").task.attempt
    assert repo.commit(1, attempt, REPORT)

    code, out, _ = cli("show", "1")
    assert code == 0
    for text in ("task 1", "guide.md", "success", "Three problems.", "sk-live-123", "Install > Linux · lines 12-14"):
        assert text in out
    assert "Rotate the key and use a placeholder." in out
    assert f", schema v{SCHEMA_VERSION}" in out and "prompt v" not in out  # the offline reviewer has no prompt
    assert out.index("CRITICAL (1)") < out.index("HIGH (1)") < out.index("LOW (1)")

    code, out, _ = cli("show", "1", "--json")
    shown = json.loads(out)
    assert code == 0 and set(shown) == SHOW_FIELDS
    assert shown["result"] == REPORT and shown["status"] == "success"

    code, out, err = cli("show", "77")
    assert (code, out) == (1, "") and err.strip() == "docllm: no task with id 77"
    assert cli("show", "x")[0] == 2


def test_stats_and_show_list_the_batches_from_the_batch_store(cli, ports, tmp_path):
    """Issue 28: "batches" appears once a batch is recorded (counts per state, every unfinished
    batch and the newest ones), and ``show`` names the batches holding the task."""
    for _ in range(3):
        cli("submit", write(tmp_path, "a.md", "# A\n"))
    store, now = ports.batch_store(), ports.queue().now_ms()
    store.open("a" * 32, "east", [(1, 1), (2, 1)], now - 90_000)
    assert store.advance("a" * 32, OPEN, UPLOADED, now - 80_000, input_file_id="file-1")
    assert store.advance("a" * 32, UPLOADED, SUBMITTED, now - 70_000, batch_id="batch_1", provider_status="in_progress")
    store.open("b" * 32, "east", [(1, 2), (3, 1)], now - 5_000)  # a later attempt of task 1, its upload not yet done
    store.open("c" * 32, "east", [(3, 1)], now - 200_000)
    assert store.advance("c" * 32, OPEN, SUBMITTED, now - 190_000, batch_id="batch_0")
    assert store.advance("c" * 32, SUBMITTED, APPLIED, now - 100_000, provider_status="completed", cost_usd=0.0125)

    code, out, _ = cli("stats", "--json")
    batches = json.loads(out)["batches"]
    assert code == 0 and {k: v for k, v in batches.items() if k != "shown"} == {
        "by_state": {"open": 1, "uploaded": 0, "submitted": 1, "applied": 1, "returned": 0},
        "tasks_by_state": {"open": 2, "uploaded": 0, "submitted": 2, "applied": 1, "returned": 0},
        "tasks_in_unfinished": 4,
    }
    assert [(b["ref"][0], b["state"], b["batch_id"], b["tasks"]) for b in batches["shown"]] == [
        ("b", "open", None, 2),
        ("a", "submitted", "batch_1", 2),
        ("c", "applied", "batch_0", 1),
    ]  # newest first
    a = batches["shown"][1]
    assert set(a) == set(BATCH_FIELDS) and (a["deployment"], a["provider_status"], a["cost_usd"]) == (
        "east",
        "in_progress",
        None,
    )
    assert 89 <= a["age_s"] < 600 and batches["shown"][2]["cost_usd"] == 0.0125
    table = cli("stats")[1]
    assert "batches (4 tasks unfinished)" in table and re.search(r"submitted\s.*\s1\s.*\s2\s", table)
    assert f" {'a' * 8} " in table and "batch_1" in table and "in_progress" in table

    code, out, _ = cli("show", "1", "--json")
    shown = json.loads(out)
    assert code == 0 and set(shown) == SHOW_FIELDS | {"batches"}
    assert shown["batches"] == [
        {"ref": "b" * 32, "batch_id": None, "state": "open", "attempts": [2]},
        {"ref": "a" * 32, "batch_id": "batch_1", "state": "submitted", "attempts": [1]},
    ]
    text = " ".join(cli("show", "1")[1].replace("│", " ").split())
    assert f"batch {'b' * 32} (no batch id yet) open, attempt 2 batch {'a' * 32} batch_1 submitted, attempt 1" in text
    assert set(json.loads(cli("show", "2", "--json")[1])) == SHOW_FIELDS | {"batches"}
    code, out, _ = cli("submit", write(tmp_path, "d.md", "# D\n"), "--json")
    alone = json.loads(cli("show", "4", "--json")[1])
    assert set(alone) == SHOW_FIELDS and "batch " not in cli("show", "4")[1]  # in no batch: no key, no line


def test_workers_lists_live_records(cli, ports):
    code, out, _ = cli("workers", "--json")
    assert (code, json.loads(out)) == (0, [])
    now = ports.clock().now_ms() / 1000
    record = WorkerRecord("host-a:7", "host-a", 7, "0.1.0", 4, (InFlight(3, 2, 1.5),), now - 30, now)
    ports.worker_registry().beat(record, 60_000)
    code, out, _ = cli("workers", "--json")
    assert code == 0 and json.loads(out) == [
        {
            "id": "host-a:7",
            "host": "host-a",
            "pid": 7,
            "version": "0.1.0",
            "slots": 4,
            "in_flight": [{"task_id": 3, "attempt": 2, "age_s": 1.5}],
            "started_at": now - 30,
            "last_beat": now,
        }
    ]
    code, out, _ = cli("workers")
    assert code == 0 and "host-a:7" in out and "1/4" in out and "3#2" in out


def test_cancel_exit_codes_and_json(cli, ports, tmp_path):
    path = write(tmp_path, "a.md", "# A\n")
    for _ in range(3):
        cli("submit", path)
    repo = ports.repository()
    repo.start_attempt(2, "tok-2")  # task 2 runs (no worker here: nobody will stop it)
    assert repo.commit(3, repo.start_attempt(3, "tok-3").task.attempt, REPORT)

    code, out, err = cli("cancel", "1", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        {"task_id": 1, "result": "cancelled", "cancelled": True, "status": "failed", "detail": "cancelled by operator"}
    ]
    row = json.loads(cli("status", "1", "--json")[1])[0]
    assert (row["status"], row["error"]) == ("failed", "cancelled by operator")

    code, out, err = cli("cancel", "1", "3", "99", "--json")
    assert code == 1 and [(r["task_id"], r["result"], r["cancelled"]) for r in json.loads(out)] == [
        (1, "finished", False),
        (3, "finished", False),
        (99, "unknown", False),
    ]
    assert err.count("\n") == 1 and "task 3: already success" in err and "task 99: no task" in err

    code, out, _ = cli("cancel", "2", "--wait", "0", "--json")  # marked: its worker would stop it
    assert code == 0 and json.loads(out)[0]["result"] == "running"
    code, out, err = cli("cancel", "2", "--wait", "0.3")
    assert code == 1 and "running" in out and "task 2: running" in err
    assert ports.queue().cancel_marks([1, 2, 3]) == {2}


@pytest.mark.parametrize(
    "argv",
    [
        ("show", "99999999999999999999"),
        ("show", "0"),
        ("show", "-5"),
        ("show", "9223372036854775808"),  # one over BIGINT
        ("cancel", "1", "99999999999999999999"),
        ("status", "3", "x"),
        ("dead", "retry", "99999999999999999999"),
        ("dead", "discard", "0"),
    ],
)
def test_a_bad_task_id_is_one_line_naming_the_argument_and_a_usage_error(cli, ports, argv):
    """SQLite's driver raises OverflowError on an id over 64 bits: checked before any lookup (issue 22)."""
    code, out, err = cli(*argv)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("docllm: ") and "TASK_ID" in err and repr(argv[-1]) in err


def test_the_largest_task_id_is_looked_up(cli, ports):
    code, _, err = cli("show", "9223372036854775807")
    assert code == 1 and err.strip() == "docllm: no task with id 9223372036854775807"
