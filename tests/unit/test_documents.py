"""Reading files for submit: text accepted, HTML turned into text, everything else refused by name."""

from __future__ import annotations

import pytest

from docllm.adapters.files.documents import DocumentError, html_to_text, read_document


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_markdown_and_plain_text_are_read_as_they_are(tmp_path):
    md = "# Guide\n\nÜbersicht: café ✓\n"
    assert read_document(write(tmp_path, "g.md", md.encode()), 1000) == md
    assert read_document(write(tmp_path, "n.txt", b"plain\n"), 1000) == "plain\n"


def test_a_utf8_bom_is_dropped(tmp_path):
    assert read_document(write(tmp_path, "b.md", b"\xef\xbb\xbf# Title\n"), 1000) == "# Title\n"


@pytest.mark.parametrize(
    "name, data, reason",
    [
        ("big.md", b"x" * 101, "over the limit of 100 bytes"),
        ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        ("latin1.md", "café".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 3)"),
        ("blank.md", b" \n\n", "empty"),
        ("empty.html", b"<html><script>x()</script></html>", "empty"),
    ],
)
def test_a_file_that_cannot_be_a_document_is_refused_by_name(tmp_path, name, data, reason):
    path = write(tmp_path, name, data)
    with pytest.raises(DocumentError) as caught:
        read_document(path, 100)
    assert str(path) in str(caught.value) and reason in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_missing_file_or_a_directory_is_refused(tmp_path):
    with pytest.raises(DocumentError, match="no such file"):
        read_document(tmp_path / "nope.md", 100)
    with pytest.raises(DocumentError, match="directory"):
        read_document(tmp_path, 100)


HTML = """<!DOCTYPE html><html><head><title>Guide</title><style>h1 {color: red}</style></head>
<body><h1>Install &amp; run</h1><p>Some   text
 with <b>bold</b> words.</p><ul><li>one</li><li>two</li></ul>
<h2>Code</h2><pre>def f():
    return 1
</pre><script>alert("no")</script><p>End<br>here</p></body></html>"""


def test_html_becomes_text_with_markdown_headings_and_code():
    assert html_to_text(HTML) == (
        "# Install & run\n\nSome text with bold words.\n\n- one\n- two\n\n## Code\n\n"
        "```\ndef f():\n    return 1\n```\n\nEnd\nhere\n\n"
        "<!-- docllm: converted from HTML; anchors are the page's ids -->\n"  # the link check reads it
    )


def test_html_is_recognised_by_extension_or_by_content(tmp_path):
    by_name = read_document(write(tmp_path, "page.htm", b"<h2>Title</h2><p>x</p>"), 10_000)
    sniffed = read_document(write(tmp_path, "page.txt", HTML.encode()), 10_000)
    assert by_name.startswith("## Title\n") and sniffed.startswith("# Install & run\n")
    markdown = read_document(write(tmp_path, "note.md", b"<!-- lint: off -->\n# Note\n"), 10_000)
    assert markdown == "<!-- lint: off -->\n# Note\n"
