"""Reading a file for ``submit``: Markdown and plain text as they are, HTML turned into text, PDF and
DOCX extracted to Markdown (pdf_text, docx_text) by suffix or magic bytes.

Refused with a DocumentError that names the file: missing or unreadable, empty, over the size limit
(a PDF or DOCX file may be larger than a text file; its extracted text may not: see FileLimits),
binary (NUL bytes), not UTF-8 text, or a PDF or DOCX that cannot be extracted (the reader says why).
"""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

from docllm.adapters.files.extraction import DocumentError, FileLimits, TextBudget

__all__ = ["DEFAULT_MAX_BYTES", "DocumentError", "html_to_text", "read_document"]

DEFAULT_MAX_BYTES = 1_000_000
HTML_START = re.compile(r"\s*(<!doctype\s+html|<html[\s>])", re.I)
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # the container of .doc, .xls, .ppt before 2007
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "nav",
    "aside",
    "table",
    "tr",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "figure",
    "hr",
    "br",
    "title",
}
_SKIP = {"script", "style", "head", "template", "noscript", "svg"}
# The last line of an HTML page's text: its headings' anchors are the page's ids, not GitHub's slugs
# (a browser finds #upgrade-notes only on an element with that id); the offline link check reads it.
FROM_HTML = "<!-- docllm: converted from HTML; anchors are the page's ids -->"


def read_document(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The text to review, at most ``max_bytes`` of UTF-8; DocumentError names the file and the reason."""
    path = Path(path)
    limits = FileLimits.of(max_bytes)
    kind, data = _read(path, limits)
    if kind == "text":
        return _text(path, data)
    from docllm.adapters.files.docx_text import docx_to_text
    from docllm.adapters.files.pdf_text import pdf_to_text

    try:
        if kind == "pdf":
            text = pdf_to_text(data, TextBudget(max_bytes))
        else:
            text = docx_to_text(data, TextBudget(max_bytes), limits)
    except DocumentError as e:
        raise DocumentError(f"{path}: {e}") from None
    if not text.strip():
        raise DocumentError(f"{path}: the document is empty")
    return text


def _read(path: Path, limits: FileLimits) -> tuple[str, bytes]:
    """The file's kind ("text", "pdf" or "docx") and bytes: never more than its limit and one byte."""
    try:
        if path.is_dir():
            raise DocumentError(f"{path}: is a directory, not a document")
        with path.open("rb") as f:
            data = f.read(limits.text_bytes + 1)
            kind = _kind(path, data)
            limit = limits.text_bytes if kind == "text" else limits.file_bytes
            if kind != "text" and len(data) > limits.text_bytes:
                data += f.read(limit + 1 - len(data))
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except OSError as e:
        raise DocumentError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > limit:
        what = "" if kind == "text" else f" for a {kind.upper()} file"
        raise DocumentError(f"{path}: over the limit of {limit} bytes{what}")
    return kind, data


def _kind(path: Path, head: bytes) -> str:
    suffix = path.suffix.lower()
    if suffix == ".pdf" or head.startswith(b"%PDF-"):
        return "pdf"
    if suffix == ".docx" or (head.startswith(b"PK\x03\x04") and b"word/document.xml" in head):
        return "docx"
    if head.startswith(_OLE):
        raise DocumentError(f"{path}: a legacy Office file (.doc); save it as .docx or PDF and submit that")
    return "text"


def _text(path: Path, data: bytes) -> str:
    if b"\x00" in data:
        raise DocumentError(f"{path}: binary file (it contains NUL bytes); submit Markdown, text, HTML, PDF or DOCX")
    try:
        text = data.decode("utf-8-sig")  # plain UTF-8 too; a BOM is dropped
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); convert it to UTF-8 first"
        ) from None
    if path.suffix.lower() in (".html", ".htm") or HTML_START.match(text):
        text = html_to_text(text)
    if not text.strip():
        raise DocumentError(f"{path}: the document is empty")
    return text


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip = 0  # depth inside script/style/...
        self._pre = 0
        self._links: list[str | None] = []  # the open <a> tags' targets (None: no href)

    def _newline(self, blank: bool = False) -> None:
        self.out.append("\n\n" if blank else "\n")

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _SKIP:
            self._skip += 1
        elif m := re.fullmatch(r"h([1-6])", tag):
            self._newline(True)
            self.out.append("#" * int(m.group(1)) + " ")
        elif tag == "li":
            self._newline()
            self.out.append("- ")
        elif tag == "pre":
            self._pre += 1
            self.out.append("\n\n```\n")
        elif tag in _BLOCKS:
            self._newline(tag not in ("br", "tr", "dt", "dd"))
        if self._skip or self._pre:
            return
        # Links and anchors stay, so the link check runs on an HTML page as on Markdown.
        values = dict(attrs)
        anchor = values.get("id") or (values.get("name") if tag == "a" else None)
        if anchor:
            self.out.append(f'<a id="{escape(anchor)}"></a>')
        if tag == "a":
            href = (values.get("href") or "").strip()
            self._links.append(href or None)
            if href:
                self.out.append("[")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in _BLOCKS:
            self._newline(True)
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out[-1] = self.out[-1].rstrip("\n")
            self.out.append("\n```\n\n")
        elif tag == "a" and self._links and not self._skip and not self._pre:
            href = self._links.pop()
            if href is not None:
                target = f"<{href}>" if re.search(r"[\s()<>]", href) else href
                self.out.append(f"]({target})")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.out.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Text of an HTML page; headings become Markdown ``#`` lines, ``<pre>`` a fenced block, links
    ``[text](href)`` and ``id``/``name`` anchors ``<a id="..."></a>``."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines, in_pre = [], False
    for line in "".join(parser.out).split("\n"):
        if line.strip() == "```":
            in_pre = not in_pre
        lines.append(line.rstrip() if in_pre else line.strip())  # indentation only matters in code
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return f"{text}\n\n{FROM_HTML}\n" if text else ""
