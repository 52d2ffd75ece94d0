"""Hostile review of branch `marks` (issue 46): a mark's key (tenant, document, fingerprint) must
compare as docllm compares it, exactly. Tenants are case-sensitive names in docllm (lanes/model.py),
and document names are file names; MariaDB's default utf8mb4 collation is case- (and, from 11.x,
accent-) insensitive, so its primary key and WHERE clauses merge keys docllm keeps apart."""

from __future__ import annotations

from docllm.domain.marks.model import Mark
from tests.contract.test_mark_store_contract import store  # noqa: F401 - the contract's three stores

A = "a" * 64


def test_review_a_tenant_differing_in_case_never_sees_anothers_marks(store):  # noqa: F811
    # tenants "Acme" and "acme" are two customers (tenant ids such as base62 keys differ by case)
    store.put(Mark("guide.md", A, "false-alarm", tenant="Acme"))
    assert store.for_documents(["guide.md"], "acme") == {}


def test_review_a_dismissal_of_readme_md_is_not_swallowed_by_README_md(store):  # noqa: F811
    store.put(Mark("README.md", A, "accepted", note="the other repo's"))
    store.put(Mark("readme.md", A, "false-alarm", note="this one"))
    found = store.for_documents(["readme.md", "README.md"])
    assert [(m.reason, m.note) for m in found.get("readme.md", [])] == [("false-alarm", "this one")]
    assert [(m.reason, m.note) for m in found.get("README.md", [])] == [("accepted", "the other repo's")]


def test_review_resume_md_and_accented_resume_md_are_two_documents(store):  # noqa: F811
    store.put(Mark("résumé.md", A, "accepted"))
    store.put(Mark("resume.md", A, "false-alarm"))
    found = store.for_documents(["résumé.md", "resume.md"])
    assert [m.reason for m in found.get("résumé.md", [])] == ["accepted"]
    assert [m.reason for m in found.get("resume.md", [])] == ["false-alarm"]


def test_review_people_dismissing_different_findings_of_one_document_at_once_all_land(store):  # noqa: F811
    # Two people on one report, each dismissing other findings at the same moment (each put is an
    # UPDATE that finds nothing, then an INSERT: on InnoDB both take the same gap lock).
    import threading

    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def put(who: int) -> None:
        try:
            for i in range(15):
                barrier.wait(timeout=30)
                store.put(Mark("guide.md", f"{who:02d}{i:062d}", "false-alarm", marked_by=str(who)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.for_documents(["guide.md"])["guide.md"]) == 60


def test_review_the_same_judgement_twice_in_one_second_is_no_error(store):  # noqa: F811
    # A double click on Dismiss: the second UPDATE changes nothing (same values, same second).
    first = store.put(Mark("guide.md", A, "accepted", note="same"))
    again = store.put(Mark("guide.md", A, "accepted", note="same"))
    assert (first.reason, again.reason) == ("accepted", "accepted")
    assert len(store.for_documents(["guide.md"])["guide.md"]) == 1
