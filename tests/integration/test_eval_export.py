"""``docllm eval export --dismissed DIR`` read back by ``docllm eval DIR`` (issue 46): a team's
judgements become a golden set. Reviewed by the offline reviewer and stored in SQLite as a worker
stores them, judged with ``docllm findings``, exported, and scored again: the findings people left
are expected (recall 1), the false alarm is "no finding here" and is counted when it comes back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from docllm.adapters.files.documents import read_document
from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from tests.support.cli_runner import cli_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval"


@pytest.fixture
def db(monkeypatch, tmp_path):
    for name in [n for n in os.environ if n.startswith("DOCLLM_")]:
        monkeypatch.delenv(name)
    url = f"sqlite:///{tmp_path / 'docllm.db'}"
    monkeypatch.setenv("DOCLLM_DATABASE_URL", url)
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing here needs Redis
    engine = make_engine(url)
    upgrade_schema(engine)
    yield SqlAlchemyTaskRepository(engine)
    engine.dispose()


def reviewed(repo, path: Path) -> tuple[int, list[dict]]:
    """What a worker leaves: the task's row, its text as submit read it, the report committed."""
    text = read_document(path, 10_000_000)
    report = OfflineReviewer().review_now(path.name, text, None)
    task = repo.create(path.name, text)
    repo.start_attempt(task.task_id, "tok")
    assert repo.commit(task.task_id, 1, report)
    return task.task_id, report["findings"]


def test_exported_judgements_are_read_back_by_eval(db, tmp_path, capsys):
    cli = cli_runner(capsys)
    faq, faq_findings = reviewed(db, EXAMPLES / "operations-faq.md")
    pdf, pdf_findings = reviewed(db, EXAMPLES / "quickstart.pdf")
    assert len(faq_findings) >= 3 and pdf_findings
    for argv in (
        ("findings", "dismiss", str(faq), "1", "--reason", "false-alarm", "--note", "the team's term"),
        ("findings", "dismiss", str(faq), "2", "--reason", "accepted"),
        ("findings", "dismiss", str(pdf), "1", "--reason", "wont-fix"),
    ):
        code, _, err = cli(*argv)
        assert code == 0, err

    out_dir = tmp_path / "golden"
    code, out, err = cli("eval", "export", "--dismissed", str(out_dir), "--json")
    assert code == 0, err
    written = {d["file"]: d for d in json.loads(out)["documents"]}
    assert set(written) == {"operations-faq.md", "quickstart-pdf.md"}  # a PDF's text is Markdown
    assert written["operations-faq.md"] | {"file": 0} == {
        "file": 0,
        "task_id": faq,
        "expected": len(faq_findings) - 1,
        "false_alarms": 1,
    }
    spec = yaml.safe_load((out_dir / "operations-faq.expected.yaml").read_text())
    [alarm] = spec["false_alarms"]
    first = faq_findings[0]
    assert alarm["category"] == first["category"] and "severity" not in alarm
    assert (out_dir / "quickstart-pdf.md").read_text() == db.get(pdf).document

    code, out, err = cli("eval", str(out_dir), "--json")
    assert code == 0, err
    scored = {d["document"]: d for d in json.loads(out)["documents"]}
    doc = scored["operations-faq.md"]
    # The same reviewer on the same text: every finding people kept is found again, and the one
    # dismissed as a false alarm is reported again, counted against precision and named.
    assert (doc["expected"], doc["produced"], doc["matched"]) == (
        len(faq_findings) - 1,
        len(faq_findings),
        len(faq_findings) - 1,
    )
    assert doc["recall"] == 1.0 and doc["false_alarms"] == 1
    assert [u["message"] for u in doc["unexpected"]] == [first["message"]]
    pdf_doc = scored["quickstart-pdf.md"]
    assert (pdf_doc["recall"], pdf_doc["precision"], pdf_doc["false_alarms"]) == (1.0, 1.0, 0)


def test_an_export_refuses_a_set_that_is_there_and_an_empty_store(db, tmp_path, capsys):
    cli = cli_runner(capsys)
    code, out, err = cli("eval", "export", "--dismissed", str(tmp_path / "none"))
    assert code == 1 and "no judged finding to export" in err and not (tmp_path / "none").exists()

    task, _ = reviewed(db, EXAMPLES / "operations-faq.md")
    assert cli("findings", "dismiss", str(task), "1", "--reason", "false-alarm")[0] == 0
    there = tmp_path / "there"
    there.mkdir()
    (there / "guide.md").write_text("# Mine\n")
    code, out, err = cli("eval", "export", "--dismissed", str(there))
    assert code == 1 and "exists and is not an empty directory" in err
    assert sorted(p.name for p in there.iterdir()) == ["guide.md"]  # nothing written beside it
