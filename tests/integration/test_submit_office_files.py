"""``docllm submit`` of PDF and Word files (issue 25): reviewed offline, the findings say the page or
the Word heading path; a file that cannot be extracted is refused in one line and nothing is queued.
Real Redis and SQLite, files made in the test."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from docllm.entrypoints.bootstrap import build_container, load_settings
from tests.support.cli_runner import cli_runner
from tests.support.office_files import docx_bytes, encrypted_pdf, pdf_bytes, with_member


@pytest.fixture
def cli(redis_url, tmp_path, monkeypatch, capsys):  # as in test_cli.py
    monkeypatch.setenv("DOCLLM_REDIS_URL", redis_url)
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'docllm.db'}")
    monkeypatch.setenv("DOCLLM_QUEUE_PREFIX", f"office{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("DOCLLM_LLM_PROVIDER", "offline")

    run = cli_runner(capsys)

    return run


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_findings_in_a_pdf_and_a_docx_say_the_page_and_the_heading_path(cli, tmp_path):
    pdf = write(tmp_path, "manual.pdf", pdf_bytes([["Welcome to AcmeDB."], ["Configure it.", "TODO: the port"]]))
    guide = [("h1", "Install"), ("p", "Get the package."), ("h2", "Linux"), ("List Bullet", "FIXME: the command")]
    docx = write(tmp_path, "guide.docx", docx_bytes(guide))
    assert cli("init-db")[0] == 0
    code, out, err = cli("submit", pdf, docx, "--json")
    assert (code, err) == (0, "") and [t["task_name"] for t in json.loads(out)] == ["manual.pdf", "guide.docx"]

    container = build_container(load_settings(), log=False)
    try:
        processor = container.processor()
        for _ in range(2):
            attempt = processor.begin(processor.claim())
            processor.finish(attempt, asyncio.run(processor.review(attempt)))
    finally:
        container.shutdown_resources()

    [on_page] = json.loads(cli("show", "1", "--json")[1])["result"]["findings"]
    [in_section] = json.loads(cli("show", "2", "--json")[1])["result"]["findings"]
    assert (on_page["location"]["heading"], on_page["quote"]) == ("page 2", "TODO: the port")
    assert (in_section["location"]["heading"], in_section["quote"]) == ("Install > Linux", "- FIXME: the command")
    assert "page 2 · line" in cli("show", "1")[1] and "Install > Linux · line" in cli("show", "2")[1]


BAD = {  # name: (the file, made when the test runs; what its one-line error says)
    "locked.pdf": (lambda: encrypted_pdf(pdf_bytes([["secret"]]), "pw"), "encrypted (it needs a password)"),
    "scan.pdf": (lambda: pdf_bytes([[]]), "has no text layer (scanned pages?); OCR is not supported"),
    "cut.pdf": (lambda: pdf_bytes([["a", "b"]])[:300], "not a readable PDF ("),
    "long.pdf": (lambda: pdf_bytes([["x" * 90] * 30] * 3), "extracted text is over the document limit of 5000"),
    "cut.docx": (lambda: docx_bytes([("p", "text")])[:5000], "not a readable DOCX ("),
    "bomb.docx": (
        lambda: with_member(docx_bytes([("p", "text")]), "word/media/zeros.bin", bytes(40 << 20)),
        "over the bound of 33554432 (a zip bomb?)",
    ),
}


@pytest.mark.parametrize("name", BAD)
def test_a_bad_pdf_or_docx_is_refused_in_one_line_and_nothing_is_queued(cli, tmp_path, monkeypatch, name):
    monkeypatch.setenv("DOCLLM_MAX_DOCUMENT_BYTES", "5000")
    make, reason = BAD[name]
    good = write(tmp_path, "good.pdf", pdf_bytes([["fine"]]))
    code, out, err = cli("submit", good, write(tmp_path, name, make()), "--json")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert name in err and reason in err, err
    stats = json.loads(cli("stats", "--json")[1])
    assert stats["tasks"] == {"pending": 0, "processing": 0, "success": 0, "failed": 0}
    assert stats["queue"] == {"ready": 0, "processing": 0, "delayed": 0, "dead": 0}
