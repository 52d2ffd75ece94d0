"""The task page's dismiss button (issue 46) on real Redis and MariaDB, in process (Flask's test
client): a dismissal is a write, so it passes the dashboard's guards as every action does (CSRF,
the token, the loopback rule), goes through the CLI's service, refuses bad input with a 400
naming why and writes nothing then; the page shows dismissed findings apart."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from docllm.container import Container
from docllm.domain.review.report import finding, make_report
from docllm.entrypoints.bootstrap import build_container
from docllm.entrypoints.dashboard.app import Sources, create_app
from docllm.entrypoints.snapshot import stats_of
from docllm.settings import Settings

TOKEN = "9c1e7a4f0b2d86e35f4a1c0b7e9d2a3f6b8c"
QUOTE = "Run `make instal` to set it up."


@dataclass
class World:
    container: Container
    sources: Sources
    done: int


@pytest.fixture
def world(redis_url: str, mysql_url: str) -> Iterator[World]:
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.domain.tasks.producer import submit

    settings = replace(
        Settings.from_env({}), redis_url=redis_url, database_url=mysql_url, queue_prefix=f"m{uuid.uuid4().hex[:6]}"
    )
    c = build_container(settings, log=False)
    upgrade_schema(c.engine())
    repo, queue = c.repository(), c.queue()
    task = submit(repo, queue, "guide.md", "# Guide\n\ntext\n")
    delivery = queue.claim("w1", 30_000)
    assert delivery is not None
    row = repo.start_attempt(task.task_id, delivery.token).task
    assert row is not None
    report = make_report(
        [
            finding("correctness", "high", "The target is misspelt.", heading="Guide", line_start=3, quote=QUOTE),
            finding("style", "low", "Passive voice.", heading="Guide", line_start=4, quote="it is done"),
        ],
        "Two findings.",
        "offline",
        "rules",
    )
    assert repo.commit(task.task_id, row.attempt, report) and queue.ack(delivery.token)
    sources = Sources(
        repo, queue, lambda: stats_of(c), None, c.events(), sessions=c.dashboard_sessions(), marks=c.marks()
    )
    yield World(c, sources, task.task_id)
    c.shutdown_resources()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def marks(world: World) -> list:
    return world.container.marks().listed()


def test_a_finding_is_dismissed_from_its_page_and_shown_apart(world: World):
    client = create_app(world.sources).test_client()
    page = client.get(f"/tasks/{world.done}").get_data(as_text=True)
    assert f'action="/tasks/{world.done}/findings/1/dismiss"' in page and 'id="dismissed"' not in page
    assert "data-refresh-ms" not in page  # a finished review: the page does not swap a note being typed

    answer = client.post(
        f"/tasks/{world.done}/findings/1/dismiss",
        data={"csrf": csrf_of(page), "reason": "false-alarm", "note": "the target is spelt so on purpose"},
    )
    assert answer.status_code == 302 and answer.headers["Location"].endswith(f"/tasks/{world.done}")
    [mark] = marks(world)
    assert (mark.document, mark.reason, mark.note, mark.task_id, mark.number) == (
        "guide.md",
        "false-alarm",
        "the target is spelt so on purpose",
        world.done,
        1,
    )
    assert mark.marked_by.startswith("dashboard:")
    shown = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert "finding 1 dismissed as false-alarm" in shown
    dismissed = shown.split('id="dismissed"')[1]
    assert QUOTE.replace("`", "") in dismissed.replace("`", "") and "the target is spelt so on purpose" in dismissed
    assert shown.split('id="dismissed"')[0].count('class="dismiss"') == 1  # only finding 2 left to dismiss
    assert "<td>2 (1 dismissed)</td>" in client.get("/tasks").get_data(as_text=True)  # the list says so too

    answer = client.post(f"/tasks/{world.done}/findings/1/restore", data={"csrf": csrf_of(shown)})
    assert answer.status_code == 302 and marks(world) == []
    assert 'id="dismissed"' not in client.get(f"/tasks/{world.done}").get_data(as_text=True)
    assert "<td>2</td>" in client.get("/tasks").get_data(as_text=True)


def test_a_dismissal_without_the_csrf_token_or_from_a_foreign_host_writes_nothing(world: World):
    client = create_app(world.sources).test_client()
    for form in ({"reason": "accepted"}, {"reason": "accepted", "csrf": "forged"}):
        assert client.post(f"/tasks/{world.done}/findings/1/dismiss", data=form).status_code == 403
    token = csrf_of(client.get(f"/tasks/{world.done}").get_data(as_text=True))
    rebound = client.post(
        f"/tasks/{world.done}/findings/1/dismiss",
        data={"csrf": token, "reason": "accepted"},
        headers={"Host": "evil.example:8765"},
    )
    assert rebound.status_code == 403
    assert client.get(f"/tasks/{world.done}/findings/1/dismiss").status_code == 405  # never a GET
    assert marks(world) == []


def test_with_a_token_a_dismissal_needs_a_login_or_the_bearer_token(world: World):
    client = create_app(world.sources, token=TOKEN).test_client()
    assert client.post(f"/tasks/{world.done}/findings/1/dismiss", data={"reason": "accepted"}).status_code == 401
    assert marks(world) == []
    answer = client.post(
        f"/tasks/{world.done}/findings/2/dismiss",
        data={"reason": "wont-fix"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert answer.status_code == 302 and [m.reason for m in marks(world)] == ["wont-fix"]


@pytest.mark.parametrize(
    ("number", "form", "says"),
    [
        (1, {"reason": "fine"}, "reason must be one of false-alarm, accepted, wont-fix"),
        (1, {}, "reason must be one of"),
        (3, {"reason": "accepted"}, "give a number from 1 to 2"),
        (0, {"reason": "accepted"}, "give a number from 1 to 2"),
        (1, {"reason": "accepted", "note": "x" * 1001}, "a note is at most 1000 characters"),
    ],
)
def test_bad_input_is_a_400_naming_why_and_writes_nothing(world: World, number, form, says):
    client = create_app(world.sources).test_client()
    token = csrf_of(client.get(f"/tasks/{world.done}").get_data(as_text=True))
    answer = client.post(f"/tasks/{world.done}/findings/{number}/dismiss", data={"csrf": token, **form})
    assert answer.status_code == 400 and says in answer.get_data(as_text=True)
    assert marks(world) == []


def test_an_unknown_task_is_refused(world: World):
    client = create_app(world.sources).test_client()
    token = csrf_of(client.get(f"/tasks/{world.done}").get_data(as_text=True))
    answer = client.post(f"/tasks/{world.done + 1000}/findings/1/dismiss", data={"csrf": token, "reason": "accepted"})
    assert answer.status_code == 400 and f"no task with id {world.done + 1000}" in answer.get_data(as_text=True)
    assert marks(world) == []
