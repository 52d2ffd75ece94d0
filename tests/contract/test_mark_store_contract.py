"""One contract for every MarkStore: in memory, SQLite (a file) and a real MariaDB (issue 46).

A mark is one per (document, fingerprint), the latest judgement replacing the earlier one, also
when two people dismiss the same finding at once; a database that was never upgraded to 0012 has
no marks to read and refuses to write one, naming the fix."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from docllm.domain.errors import ConfigurationError
from docllm.domain.marks.model import Mark
from docllm.domain.marks.ports import MarkStore
from tests.support.memory.marks import InMemoryMarkStore

A, B = "a" * 64, "b" * 64


@pytest.fixture(params=["memory", "sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def store(request, tmp_path) -> Iterator[MarkStore]:
    if request.param == "memory":
        yield InMemoryMarkStore()
        return
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.marks import SqlAlchemyMarkStore
    from docllm.adapters.sql.migrations import upgrade_schema

    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield SqlAlchemyMarkStore(engine)
    engine.dispose()


def mark(document: str = "guide.md", fp: str = A, reason: str = "false-alarm", **more) -> Mark:
    return Mark(document, fp, reason, **more)


def test_adapter_has_every_method_of_the_port(store):
    wanted = {name for name in vars(MarkStore) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(store, name, None))} == set()


def test_a_mark_round_trips_with_every_field(store):
    given = mark(
        note="a quoted label, not a TODO",
        quote_print="c" * 64,
        rule="completeness",
        category="completeness",
        severity="medium",
        quote="Ünïcode « TODO » 🚧",
        heading="Guide > Install",
        message="Unfinished.",
        task_id=2**40,
        number=3,
        marked_by="dashboard",
    )
    stored = store.put(given)
    assert stored.marked_at is not None and stored.marked_at.tzinfo is not None
    assert stored == given.__class__(**{**given.__dict__, "marked_at": stored.marked_at})
    assert store.for_documents(["guide.md"]) == {"guide.md": [stored]}
    assert store.listed() == [stored] and store.listed("guide.md") == [stored] and store.listed("other.md") == []


def test_one_mark_per_document_and_fingerprint_the_latest_wins(store):
    store.put(mark(reason="accepted", note="first"))
    store.put(mark(reason="wont-fix", note="second"))
    store.put(mark(fp=B))
    store.put(mark(document="other.md"))
    found = store.for_documents(["guide.md", "nothing.md"])
    assert sorted((m.fingerprint, m.reason, m.note) for m in found["guide.md"]) == [
        (A, "wont-fix", "second"),
        (B, "false-alarm", ""),
    ]
    assert set(found) == {"guide.md"}
    assert [m.document for m in store.listed()][0] == "other.md"  # newest first
    assert store.for_documents([]) == {}


def test_a_tenants_marks_never_touch_another_tenants_documents(store):
    store.put(mark(tenant="acme", reason="accepted"))
    store.put(mark(tenant="globex", reason="wont-fix"))
    assert store.for_documents(["guide.md"]) == {}  # no tenant: neither
    assert [m.reason for m in store.for_documents(["guide.md"], "acme")["guide.md"]] == ["accepted"]
    assert [m.reason for m in store.for_documents(["guide.md"], "globex")["guide.md"]] == ["wont-fix"]
    assert store.remove("", "guide.md", A) is False and store.remove("acme", "guide.md", A) is True
    assert [m.tenant for m in store.listed()] == ["globex"]


def test_remove_forgets_one_mark(store):
    store.put(mark())
    store.put(mark(fp=B))
    assert store.remove("", "guide.md", A) is True
    assert store.remove("", "guide.md", A) is False
    assert [m.fingerprint for m in store.for_documents(["guide.md"])["guide.md"]] == [B]


def test_many_documents_are_read_in_one_call(store):
    for i in range(510):  # more than one IN list's worth
        store.put(mark(document=f"doc-{i}.md"))
    found = store.for_documents([f"doc-{i}.md" for i in range(510)])
    assert len(found) == 510 and all(len(v) == 1 for v in found.values())


def test_two_people_dismissing_the_same_finding_at_once_leave_one_mark(store):
    errors: list[BaseException] = []

    def put(reason: str) -> None:
        try:
            for _ in range(10):
                store.put(mark(reason=reason))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(r,)) for r in ("accepted", "wont-fix")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [only] = store.for_documents(["guide.md"])["guide.md"]
    assert only.reason in ("accepted", "wont-fix")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def test_a_database_before_0012_has_no_marks_and_refuses_to_write_one(backend, request, tmp_path):
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.marks import SqlAlchemyMarkStore
    from docllm.adapters.sql.migrations import upgrade_schema

    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine, "0010")
    old = SqlAlchemyMarkStore(engine)
    assert old.for_documents(["guide.md"]) == {} and old.listed() == [] and old.remove("", "guide.md", A) is False
    with pytest.raises(ConfigurationError, match="no finding_marks table: run `docllm init-db` first"):
        old.put(mark())
    upgrade_schema(engine)
    assert SqlAlchemyMarkStore(engine).put(mark()).reason == "false-alarm"
    engine.dispose()
