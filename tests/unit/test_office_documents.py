"""PDF and DOCX at submit: their text as Markdown whose headings carry the page or the Word heading
path, and every file that cannot be extracted refused by name in one line (issue 25)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from docllm.adapters.files.documents import DocumentError, read_document
from docllm.adapters.files.extraction import FileLimits
from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.domain.review.chunking import parse_outline
from tests.support.office_files import declare_size, docx_bytes, encrypted_pdf, pdf_bytes, plain_zip, with_member

GUIDE = [
    ("Title", "AcmeDB guide"),
    ("h1", "Install"),
    ("p", "Download the package."),
    ("h2", "Linux"),
    ("List Bullet", "Unpack it."),
    ("List Bullet 2", "Keep the key."),
    ("List Number", "Run the installer."),
    ("p", "# not a heading\nsecond line"),
    ("table", "Option;Meaning/--port;the port | number/Both merged;<"),
    ("h3", "  "),  # an empty heading is no heading
    ("h1", "Use"),
    ("p", "TODO: write this."),
]


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_pdf_becomes_one_page_heading_per_page_and_its_text(tmp_path):
    path = write(tmp_path, "manual.pdf", pdf_bytes([["Intro (1)", "# comment"], [], ["TODO: the end"]]))
    text = read_document(path, 10_000)
    assert text == "# page 1\n\nIntro (1)\n\\# comment\n\n# page 2\n\n# page 3\n\nTODO: the end\n"
    assert [h.text for h in parse_outline(text).headings] == ["page 1", "page 2", "page 3"]


def test_a_docx_becomes_markdown_with_its_headings_lists_and_tables(tmp_path):
    text = read_document(write(tmp_path, "guide.docx", docx_bytes(GUIDE)), 10_000)
    assert text == (
        "AcmeDB guide\n\n# Install\n\nDownload the package.\n\n## Linux\n\n"
        "- Unpack it.\n  - Keep the key.\n- Run the installer.\n\n"
        "\\# not a heading\nsecond line\n\n"
        "| Option | Meaning |\n| --- | --- |\n| --port | the port \\| number |\n| Both merged |\n\n"
        "# Use\n\nTODO: write this.\n"
    )
    assert [h.path for h in parse_outline(text).headings] == [("Install",), ("Install", "Linux"), ("Use",)]


def test_a_custom_style_based_on_a_heading_is_that_heading(tmp_path):
    import io

    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.add_heading("Install", 1)
    step = document.styles.add_style("Step title", WD_STYLE_TYPE.PARAGRAPH)
    step.base_style = document.styles["Heading 2"]
    document.add_paragraph("Linux", style="Step title")
    document.add_paragraph("Run it.")
    out = io.BytesIO()
    document.save(out)
    assert read_document(write(tmp_path, "s.docx", out.getvalue()), 10_000) == "# Install\n\n## Linux\n\nRun it.\n"


def test_word_numbering_on_a_paragraph_makes_a_list_item_at_its_level(tmp_path):
    import io

    import docx

    document = docx.Document()
    for text, level in (("first", 0), ("nested", 1), ("no level", None)):
        num_pr = document.add_paragraph(text)._p.get_or_add_pPr().get_or_add_numPr()  # as Word writes lists
        num_pr.get_or_add_numId().val = 1
        if level is not None:
            num_pr.get_or_add_ilvl().val = level
    out = io.BytesIO()
    document.save(out)
    assert read_document(write(tmp_path, "n.docx", out.getvalue()), 10_000) == "- first\n  - nested\n- no level\n"


def test_the_offline_reviewer_places_findings_on_the_page_and_under_the_word_heading(tmp_path):
    pdf = read_document(write(tmp_path, "m.pdf", pdf_bytes([["All good."], ["TODO: page two"]])), 10_000)
    docx = read_document(write(tmp_path, "g.docx", docx_bytes([*GUIDE[:5], ("p", "FIXME: Linux")])), 10_000)
    reviewer = OfflineReviewer()
    [on_page] = asyncio.run(reviewer.review("m.pdf", pdf))["findings"]
    [in_section] = asyncio.run(reviewer.review("g.docx", docx))["findings"]
    assert on_page["location"]["heading"] == "page 2" and "TODO" in on_page["quote"]
    assert in_section["location"]["heading"] == "Install > Linux" and "FIXME" in in_section["quote"]


def test_kinds_are_known_by_magic_bytes_as_well_as_by_suffix(tmp_path):
    assert read_document(write(tmp_path, "scan.bin", pdf_bytes([["hello"]])), 10_000) == "# page 1\n\nhello\n"
    assert read_document(write(tmp_path, "guide.zip", docx_bytes([("h1", "A"), ("p", "b")])), 10_000) == "# A\n\nb\n"


def test_a_pdf_encrypted_with_an_empty_password_is_read(tmp_path):  # as for print restrictions
    open_one = write(tmp_path, "open.pdf", encrypted_pdf(pdf_bytes([["readable"]]), user_password=""))
    assert read_document(open_one, 10_000) == "# page 1\n\nreadable\n"


def test_a_pdf_or_docx_file_may_be_larger_than_the_text_limit_but_not_its_text(tmp_path):
    docx = docx_bytes([("p", "short")])
    assert len(docx) > 2_000 and read_document(write(tmp_path, "s.docx", docx), 2_000) == "short\n"
    assert FileLimits.of(5_000_000) == FileLimits(5_000_000, 50_000_000, 100_000_000)


def text_pdf() -> bytes:
    return pdf_bytes([["a" * 80] * 40] * 3)  # 3 pages of 3.2 kB


def small_docx() -> bytes:
    return docx_bytes([("h1", "Guide"), ("p", "text")])


ZEROS = "word/media/zeros.bin"
REFUSALS = {  # name: (the file, made when the test runs; what its one-line error says)
    "locked.pdf": (lambda: encrypted_pdf(text_pdf(), "secret"), "the PDF is encrypted (it needs a password)"),
    "scan.pdf": (lambda: pdf_bytes([[], []]), "has no text layer (scanned pages?); OCR is not supported"),
    "cut.pdf": (lambda: text_pdf()[:400], "not a readable PDF ("),
    "fake.pdf": (lambda: b"just text named .pdf\n", "not a readable PDF ("),
    "long.pdf": (text_pdf, "its extracted text is over the document limit of 5000 bytes"),
    "huge.pdf": (lambda: text_pdf() + b"%" * 1_100_000, "over the limit of 1048576 bytes for a PDF file"),
    "cut.docx": (lambda: small_docx()[:3000], "not a readable DOCX ("),
    "long.docx": (lambda: docx_bytes([("p", "word " * 1100)]), "its extracted text is over the document limit"),
    "bomb.docx": (  # 33 MiB of zeros in a 70 kB file, over the 32 MiB bound
        lambda: with_member(small_docx(), ZEROS, bytes(33 << 20)),
        "the DOCX's parts unpack to 3",
    ),
    "lies.docx": (  # 100 kB of zeros that the zip says are 10 bytes
        lambda: declare_size(with_member(small_docx(), ZEROS, bytes(100_000)), ZEROS, 10),
        f"not a readable DOCX (Bad CRC-32 for file '{ZEROS}')",
    ),
    "notword.docx": (lambda: plain_zip(3), "not a readable DOCX ("),  # a zip, not a Word package
    "parts.docx": (lambda: plain_zip(10_001), "the DOCX has 10001 zip parts, over the bound of 10000"),
    "old.doc": (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), "a legacy Office file (.doc); save it as"),
}


@pytest.mark.parametrize("name", REFUSALS)
def test_a_file_that_cannot_be_extracted_is_refused_by_name_in_one_line(tmp_path, name):
    make, reason = REFUSALS[name]
    path = write(tmp_path, name, make())
    with pytest.raises(DocumentError) as caught:
        read_document(path, 5_000)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and reason in message, message
    assert "\n" not in message and len(message) < 300


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("quickstart.pdf", [("page 2", "TODO marker"), ("page 2", "This sentence has 52 words")]),
        (
            "admin-guide.docx",
            [
                ("Install > Linux", "FIXME marker"),
                ("Install > Windows", "Section 'Windows' is empty"),
                ("Backup > Schedule", "Heading level jumps from H1 to H3"),
                ("Backup > Schedule", "This sentence has 52 words"),
            ],
        ),
    ],
)
def test_the_example_pdf_and_docx_give_their_known_findings(name, expected):
    # made by scripts/make_office_examples.py
    findings = OfflineReviewer().review_now(name, read_document(EXAMPLES / name))["findings"]
    assert len(findings) == len(expected)
    for f, (heading, message) in zip(findings, expected, strict=True):
        assert (f["location"]["heading"], f["message"][: len(message)]) == (heading, message)
