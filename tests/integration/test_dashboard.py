"""The dashboard over HTTP, in process (Flask's test client), on real Redis and MariaDB: every
page, both actions, CSRF refusal, token auth, the loopback rule, and the app on the worker's port."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from prometheus_client import CollectorRegistry

from docllm.container import Container
from docllm.domain.batches.model import BatchState
from docllm.domain.review.report import finding, make_report
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.workers import InFlight, WorkerRecord
from docllm.entrypoints.bootstrap import build_container
from docllm.entrypoints.cli import main
from docllm.entrypoints.dashboard.app import Sources, create_app
from docllm.entrypoints.snapshot import stats_of
from docllm.runtime.http_endpoints import HttpEndpoints
from docllm.settings import Settings
from tests.support.fake_worker_registry import InMemoryWorkerRegistry

QUOTE = "Run `make instal` to set it up."
TOKEN = "9c1e7a4f0b2d86e35f4a1c0b7e9d2a3f6b8c"  # at least 32 random characters, not a placeholder


@dataclass
class World:
    container: Container
    sources: Sources
    done: int  # a task with a report
    dead: int  # a failed task with a dead letter
    waiting: int  # a pending task


@pytest.fixture
def world(redis_url: str, mysql_url: str) -> Iterator[World]:
    from docllm.adapters.sql.migrations import upgrade_schema

    settings = replace(
        Settings.from_env({}), redis_url=redis_url, database_url=mysql_url, queue_prefix=f"d{uuid.uuid4().hex[:6]}"
    )
    c = build_container(settings, log=False)
    upgrade_schema(c.engine())
    repo, queue = c.repository(), c.queue()
    from docllm.domain.tasks.producer import submit

    done, dead, waiting = (
        submit(repo, queue, name, "# Guide\n\ntext\n") for name in ("guide.md", "broken.md", "later.md")
    )
    for task in (done, dead):  # claim both (FIFO), then end them as a worker would
        delivery = queue.claim("w1", 30_000)
        assert delivery is not None
        row = repo.start_attempt(task.task_id, delivery.token).task
        assert row is not None
        if task is done:
            report = make_report(
                [
                    finding(
                        "correctness",
                        "high",
                        "The target is misspelt.",
                        heading="Guide > Install",
                        line_start=3,
                        quote=QUOTE,
                        suggestion="Write `make install`.",
                    ),
                    finding("style", "low", "Passive voice.", quote="it is done") | {"check": "rubric:team/voice"},
                ],
                "Two findings.",
                "offline",
                "rules",
            ) | {"rubric": "team@2"}
            assert repo.commit(task.task_id, row.attempt, report) and queue.ack(delivery.token)
        else:
            assert repo.fail(task.task_id, row.attempt, "the document is not a document")
            assert queue.dead_letter(delivery.token, delivery.raw, "the document is not a document", task.task_id)
    registry = InMemoryWorkerRegistry(queue.now_ms)
    now_s = queue.now_ms() / 1000
    registry.beat(
        WorkerRecord("host-a:41", "host-a", 41, "0.1.0", 4, (InFlight(waiting.task_id, 1, 2.5),), now_s - 60, now_s),
        ttl_ms=10_000,
    )
    sources = Sources(
        repo, queue, lambda: stats_of(c), registry, c.events(), batches=c.batch_store(), sessions=c.dashboard_sessions()
    )
    yield World(c, sources, done.task_id, dead.task_id, waiting.task_id)
    c.shutdown_resources()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def status_of(repo, task_id: int) -> TaskStatus | None:
    row = repo.get(task_id)
    return None if row is None else row.status


def test_every_page_renders_what_the_services_hold(world: World):
    client = create_app(world.sources).test_client()
    page = client.get("/").get_data(as_text=True)
    assert "tasks success" in page and 'id="queue-dead">1<' in page and 'id="queue-ready">1<' in page
    assert "<svg" in page and "1 succeeded, 1 failed" in page  # the last hour's chart
    assert 'id="llm-usage"' in page and "<th>calls</th><td>0</td>" in page  # usage, rendered generically
    assert 'id="llm-breaker"' in page  # the fleet's LLM breaker (issue 14a), closed
    lanes = _group(r'<table class="list" id="lanes">(.*?)</table>', page)
    assert [m for m in re.findall(r'data-lane="([^"]*)"', lanes)] == ["interactive", "default", "bulk"]
    default = _group(r'data-lane="default">(.*?)</tr>', lanes)
    assert re.findall(r"<td>([^<]*)</td>", default)[:4] == ["default", "1", "0", "2"]  # depth, running, done
    tenants = _group(r'<table class="list" id="tenants">(.*?)</table>', page)
    assert 'data-tenant=""' in tenants and "<td>(none)</td>" in tenants  # rows without a tenant
    assert "1 shown, 0 with work" in page

    listed = client.get("/tasks").get_data(as_text=True)
    assert all(f'data-task-id="{i}"' in listed for i in (world.done, world.dead, world.waiting))
    only = client.get("/tasks?status=success").get_data(as_text=True)
    assert f'data-task-id="{world.done}"' in only and f'data-task-id="{world.dead}"' not in only
    found = client.get("/tasks?q=BROK").get_data(as_text=True)
    assert f'data-task-id="{world.dead}"' in found and f'data-task-id="{world.done}"' not in found
    assert client.get("/tasks?status=bogus").status_code == 400

    report = client.get(f"/tasks/{world.done}").get_data(as_text=True)
    assert "Run `make instal` to set it up." in report  # the quote, escaped text, not markup
    assert "Guide &gt; Install · line 3" in report and "Suggestion: Write `make install`." in report
    assert "· schema v1" in report and "prompt v" not in report  # the versions the report records
    assert report.index(">high <") < report.index(">low <")  # grouped, worst first
    assert "· rubric team@2" in report and " · rubric:team/voice</p>" in report  # which rubric and check
    failed = client.get(f"/tasks/{world.dead}").get_data(as_text=True)
    assert "the document is not a document" in failed and "dead letter" in failed
    running = client.get(f"/tasks/{world.waiting}").get_data(as_text=True)
    assert "attempt 1 on" in running and "host-a:41" in running
    assert client.get("/tasks/999999").status_code == 404

    dead = client.get("/dead").get_data(as_text=True)
    assert f'data-task-id="{world.dead}"' in dead and "Retry" in dead and "Discard" in dead
    workers = client.get("/workers").get_data(as_text=True)
    assert "host-a:41" in workers and "1 / 4" in workers and f"/tasks/{world.waiting}" in workers
    assert "<caption>usage</caption>" in client.get("/llm").get_data(as_text=True)
    assert "<th>state</th><td>closed</td>" in client.get("/llm").get_data(as_text=True)


def test_llm_state_is_rendered_generically_and_a_missing_registry_is_said(world: World):
    llm = {"breaker": {"state": "open", "failures": 5}, "usage": {"prompt_tokens": 1200, "cost_usd": 0.42}}
    sources = replace(world.sources, stats=lambda: {**stats_of(world.container), "llm": llm}, registry=None)
    client = create_app(sources).test_client()
    page = client.get("/llm").get_data(as_text=True)
    assert 'id="llm-breaker"' in page and "<th>state</th><td>open</td>" in page
    assert "<th>cost_usd</th><td>0.42</td>" in page
    assert 'id="llm-usage"' in client.get("/").get_data(as_text=True)
    assert "keeps no worker registry" in client.get("/workers").get_data(as_text=True)


def test_retry_and_discard_are_posts_refused_without_the_csrf_token(world: World):
    repo, queue = world.sources.repository, world.sources.queue
    client = create_app(world.sources).test_client()
    token = csrf_of(client.get("/dead").get_data(as_text=True))

    for form in ({}, {"csrf": "forged"}):
        assert client.post(f"/dead/{world.dead}/retry", data=form).status_code == 403
    assert client.get(f"/dead/{world.dead}/retry").status_code == 405  # an action is never a GET
    assert status_of(repo, world.dead) is TaskStatus.failed and queue.stats().dead == 1

    answer = client.post(f"/dead/{world.dead}/retry", data={"csrf": token}, follow_redirects=True)
    assert answer.status_code == 200 and f"requeued task {world.dead}" in answer.get_data(as_text=True)
    row = repo.get(world.dead)
    assert row is not None and row.status is TaskStatus.pending and row.retry_count == 0
    assert queue.stats().dead == 0 and queue.stats().ready == 2  # queued again

    queue.dead_letter(None, make_payload(world.dead, "broken.md"), "given up again", world.dead)
    assert client.post(f"/dead/{world.dead}/discard", data={"csrf": "forged"}).status_code == 403
    assert queue.stats().dead == 1
    answer = client.post(f"/dead/{world.dead}/discard", data={"csrf": token}, follow_redirects=True)
    assert "discarded 1 dead letter(s)" in answer.get_data(as_text=True) and queue.stats().dead == 0
    assert client.post("/dead/retry-all", data={"csrf": token}).status_code == 302


def test_a_token_guards_every_page_and_the_login_compares_it(world: World):
    client = create_app(world.sources, token=TOKEN).test_client()
    answer = client.get("/tasks?status=failed")
    assert answer.status_code == 302 and "/login" in answer.headers["Location"]
    assert client.post(f"/dead/{world.dead}/retry", data={}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 302
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    # a script with the bearer token needs no form token; nothing else is let through
    assert client.post("/dead/retry-all", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 302

    form = csrf_of(client.get("/login").get_data(as_text=True))
    assert client.post("/login", data={"csrf": form, "token": TOKEN[:-1] + "X"}).status_code == 401
    assert client.post("/login", data={"token": TOKEN}).status_code == 403  # the login form has CSRF too
    answer = client.post("/login?next=/tasks", data={"csrf": form, "token": TOKEN})
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/tasks")
    page = client.get("/")
    assert page.status_code == 200
    assert client.post(f"/dead/{world.dead}/retry", data={}).status_code == 403  # logged in, still CSRF
    assert client.post("/logout", data={"csrf": form}).status_code == 403  # the session was new at login
    assert client.post("/logout", data={"csrf": csrf_of(page.get_data(as_text=True))}).status_code == 302
    assert client.get("/").status_code == 302


def test_without_a_token_only_loopback_hosts_are_answered_and_other_binds_are_refused(world, monkeypatch, capsys):
    client = create_app(world.sources).test_client()
    assert client.get("/", headers={"Host": "127.0.0.1:8765"}).status_code == 200
    assert client.get("/", headers={"Host": "evil.example:8765"}).status_code == 403  # a rebound name
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: refused first
    monkeypatch.delenv("DOCLLM_DASHBOARD_TOKEN", raising=False)
    assert main(["dashboard", "--host", "0.0.0.0", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "refusing to serve the dashboard on 0.0.0.0" in err and "DOCLLM_DASHBOARD_TOKEN" in err


def test_the_loopback_rule_matches_exact_names_and_addresses_only(world: World):
    """A rebound name that merely starts like a loopback one is refused (issue 22)."""
    client = create_app(world.sources).test_client()
    for host in ("127.attacker.example:8765", "127.0.0.1.evil.com", "localhost.evil.com", "127.1", "[::1].evil"):
        assert client.get("/dead", headers={"Host": host}).status_code == 403, host
    for host in ("127.0.0.1:8765", "localhost", "[::1]:8765", "[::1]", "127.0.0.2", "LOCALHOST:8765"):
        assert client.get("/dead", headers={"Host": host}).status_code == 200, host


def test_dashboard_pages_are_not_stored_by_caches(world: World):
    """Pages carry the CSRF token and the operator's data: no cache may keep them."""
    client = create_app(world.sources).test_client()
    for path in ("/", "/tasks", f"/tasks/{world.done}", "/dead", "/workers", "/llm", "/batches", "/tasks/999999"):
        assert client.get(path).headers.get("Cache-Control") == "no-store", path
    assert client.post("/dead/retry-all").headers.get("Cache-Control") == "no-store"  # the 403 page
    assert client.get("/static/style.css").headers.get("Cache-Control") != "no-store"


def test_a_task_id_out_of_range_is_a_404_not_an_error(world: World):
    client = create_app(world.sources).test_client()
    token = csrf_of(client.get("/dead").get_data(as_text=True))
    for bad in ("99999999999999999999", "9223372036854775808", "0", "-5", "x"):
        assert client.get(f"/tasks/{bad}").status_code == 404, bad
        for action in ("dead/{}/retry", "dead/{}/discard", "tasks/{}/cancel"):
            assert client.post("/" + action.format(bad), data={"csrf": token}).status_code == 404, (action, bad)
    assert client.get("/tasks/9223372036854775807").status_code == 404  # the largest id: looked up, not found


def cancel_form(html: str, task_id: int) -> bool:
    return f'action="/tasks/{task_id}/cancel"' in html


def test_a_task_is_cancelled_from_its_page_with_csrf_as_the_cli_does(world: World):
    repo, queue = world.sources.repository, world.sources.queue
    client = create_app(world.sources).test_client()
    page = client.get(f"/tasks/{world.waiting}").get_data(as_text=True)
    assert cancel_form(page, world.waiting)  # pending: it can be cancelled
    assert not cancel_form(client.get(f"/tasks/{world.done}").get_data(as_text=True), world.done)
    assert not cancel_form(client.get(f"/tasks/{world.dead}").get_data(as_text=True), world.dead)

    for form in ({}, {"csrf": "forged"}):
        assert client.post(f"/tasks/{world.waiting}/cancel", data=form).status_code == 403
    assert status_of(repo, world.waiting) is TaskStatus.pending and queue.cancel_marks([world.waiting]) == set()

    answer = client.post(f"/tasks/{world.waiting}/cancel", data={"csrf": csrf_of(page)})
    assert answer.status_code == 302 and answer.headers["Location"].endswith(f"/tasks/{world.waiting}")
    shown = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert f"task {world.waiting}: cancelled by operator" in shown and not cancel_form(shown, world.waiting)
    row = repo.get(world.waiting)  # as `docllm cancel` leaves a pending task: failed, fenced, mark cleared
    assert row is not None and (row.status, row.error) == (TaskStatus.failed, "cancelled by operator")
    assert queue.cancel_marks([world.waiting]) == set() and queue.stats().dead == 1  # no dead letter of its own

    answer = client.post(f"/tasks/{world.done}/cancel", data={"csrf": csrf_of(page)}, follow_redirects=True)
    assert f"task {world.done}: already success: nothing to cancel" in answer.get_data(as_text=True)
    assert status_of(repo, world.done) is TaskStatus.success


def test_a_running_task_is_marked_for_its_worker_to_stop(world: World):
    from docllm.domain.tasks.producer import submit

    repo, queue = world.sources.repository, world.sources.queue
    running = submit(repo, queue, "running.md", "# R\n").task_id
    assert repo.start_attempt(running, "tok-r") is not None  # processing; no worker here to stop it
    client = create_app(world.sources).test_client()
    page = client.get(f"/tasks/{running}").get_data(as_text=True)
    assert cancel_form(page, running)
    answer = client.post(f"/tasks/{running}/cancel", data={"csrf": csrf_of(page)}, follow_redirects=True)
    assert "its worker stops it at its next heartbeat" in answer.get_data(as_text=True)
    assert status_of(repo, running) is TaskStatus.processing and queue.cancel_marks([running]) == {running}


def test_the_dashboard_is_served_on_the_worker_http_port(world: World):
    app = create_app(world.sources)
    endpoints = HttpEndpoints("127.0.0.1", 0, CollectorRegistry(), lambda: (True, []), {}, app).start()
    base = f"http://127.0.0.1:{endpoints.port}"
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        assert opener.open(f"{base}/healthz").status == 200  # the port's own pages are untouched
        page = opener.open(f"{base}/dead").read().decode()
        assert f'data-task-id="{world.dead}"' in page
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(f"{base}/dead/{world.dead}/retry", data=b"csrf=forged")
        assert refused.value.code == 403
        done = opener.open(f"{base}/dead/{world.dead}/retry", data=f"csrf={csrf_of(page)}".encode())
        assert done.status == 200 and f"requeued task {world.dead}" in done.read().decode()  # after the redirect
    finally:
        endpoints.stop()


def test_each_deployment_shows_its_breaker_limit_use_and_spend_today(world: World):
    from dependency_injector import providers

    from docllm.domain.llm.breaker import BreakerPolicy
    from docllm.domain.llm.deployments import Deployment
    from tests.support.memory.breaker import InMemoryLlmBreaker
    from tests.support.memory.rate_limiter import InMemoryRateLimiter

    clock = world.container.clock()
    east, west = (Deployment(name=n, base_url=f"http://{n}/v1", model="m", order=i) for i, n in enumerate("ew"))
    down = InMemoryLlmBreaker(clock, BreakerPolicy(min_calls=1))
    down.record(False)  # opens it
    limiter = InMemoryRateLimiter(clock, rpm=60)
    health = [(east, down, None), (west, InMemoryLlmBreaker(clock, BreakerPolicy()), limiter)]
    world.container.deployment_health.override(providers.Object(health))
    world.container.spend_budget().add(1_500_000, {"e": 1_250_000, "w": 250_000})
    try:
        page = create_app(world.sources).test_client().get("/llm").get_data(as_text=True)
    finally:
        world.container.deployment_health.reset_override()
    east_table, west_table = page.split('id="llm-deployment-e"')[1], page.split('id="llm-deployment-w"')[1]
    assert "<th>breaker_state</th><td>open</td>" in east_table.split("</table>")[0]
    assert "<th>breaker_state</th><td>closed</td>" in west_table.split("</table>")[0]
    assert "<th>limit_rpm</th><td>60</td>" in west_table.split("</table>")[0]
    assert "<th>spend_usd_today</th><td>1.25</td>" in east_table.split("</table>")[0]  # today's share of each
    assert "<th>spend_usd_today</th><td>0.25</td>" in west_table.split("</table>")[0]


def test_batches_are_listed_with_their_states_and_a_batch_lists_its_tasks(world: World):
    """Issue 28: the Batches page (as stats --json -> batches), a batch's page with links to its
    member tasks, and the task's page naming its batch; filled through the BatchStore (MariaDB)."""
    client = create_app(world.sources).test_client()
    assert "no batch yet" in client.get("/batches").get_data(as_text=True)
    store, now = world.sources.batches, world.sources.queue.now_ms()
    assert store is not None
    ref, done_ref = "a" * 32, "b" * 32
    store.open(ref, "east", [(world.waiting, 1), (world.dead, 1)], now - 120_000)
    assert store.advance(ref, BatchState.open, BatchState.submitted, now - 60_000, batch_id="batch_abc")
    assert store.advance(ref, BatchState.submitted, BatchState.submitted, now, provider_status="in_progress")
    store.open(done_ref, "east", [(world.done, 1)], now - 300_000)
    assert store.advance(done_ref, BatchState.open, BatchState.submitted, now - 290_000, batch_id="batch_old")
    assert store.advance(done_ref, BatchState.submitted, BatchState.applied, now - 200_000, cost_usd=0.0125)

    page = client.get("/batches").get_data(as_text=True)
    states = _group(r'<table class="list" id="batch-states">(.*?)</table>', page)
    assert "2 task(s) in unfinished batches" in states
    submitted = _group(r'data-state="submitted">(.*?)</tr>', states)
    assert re.findall(r"<td>([^<]*)</td>", submitted) == ["submitted", "1", "2"]  # batches, tasks
    listed = _group(r'<table class="list" id="batches">(.*?)</table>', page)
    assert re.findall(r'data-ref="([^"]*)"', listed) == [ref, done_ref]  # newest first
    row = _group(rf'data-ref="{ref}">(.*?)</tr>', listed)
    assert f'href="/batches/{ref}"' in row and "batch_abc" in row and "in_progress" in row and ">2<" in row
    assert "120 s" in row and "$0.012500" in _group(rf'data-ref="{done_ref}">(.*?)</tr>', listed)

    one = client.get(f"/batches/{ref}").get_data(as_text=True)
    assert 'id="batch-state">submitted<' in one and "batch_abc" in one
    members = _group(r'<table class="list" id="members">(.*?)</table>', one)
    assert re.findall(r'data-task-id="(\d+)"', members) == [str(i) for i in sorted((world.waiting, world.dead))]
    assert f'href="/tasks/{world.waiting}"' in members and "status-failed" in members  # the row's status now
    for unknown in ("c" * 32, "a" * 99):
        assert client.get(f"/batches/{unknown}").status_code == 404, unknown

    task = client.get(f"/tasks/{world.waiting}").get_data(as_text=True)
    assert f'<a href="/batches/{ref}">{ref}</a>' in task and "batch_abc · submitted · attempt 1" in task
    done = client.get(f"/tasks/{world.done}").get_data(as_text=True)
    assert f'href="/batches/{done_ref}"' in done and f'href="/batches/{ref}"' not in done
    unbatched = replace(world.sources, batches=None)
    assert "keeps no batch record" in create_app(unbatched).test_client().get("/batches").get_data(as_text=True)


def _group(pattern: str, text: str) -> str:
    found = re.search(pattern, text, re.S)
    assert found is not None, pattern
    return found.group(1)
