"""What the PDF and DOCX readers share: the error they raise, the text budget, Markdown-safe lines."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_STRUCTURE = re.compile(r"^( {0,3})(#|```|~~~)")  # what parse_outline reads as a heading or a fence


class DocumentError(ValueError):
    """A file that cannot be submitted; the message says which and why."""


@dataclass(frozen=True)
class FileLimits:
    """How much of a file is read, unpacked and kept. ``text_bytes`` is the document limit the worker
    enforces (UTF-8 of the text it reviews). A PDF or DOCX file carries fonts, images and markup, so
    the file itself may be ten times larger (1 MiB at least), and a DOCX's zip parts may unpack to
    twice that (32 MiB at least: Word's own styles and theme are about 1 MB for a one-line document)."""

    text_bytes: int
    file_bytes: int
    unzipped_bytes: int

    @classmethod
    def of(cls, text_bytes: int) -> FileLimits:
        file_bytes = max(10 * text_bytes, 1 << 20)
        return cls(text_bytes, file_bytes, max(2 * file_bytes, 32 << 20))


def literal(line: str) -> str:
    """A line of extracted text that Markdown does not read as a heading or a code fence: those are
    the extractor's own structure (page markers, Word headings), so a ``# comment`` printed in a PDF
    must not move the location of the findings after it."""
    return _STRUCTURE.sub(r"\1\\\2", line)


def short_reason(exc: BaseException) -> str:
    """A parser's exception as a few words for a one-line error."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


class TextBudget:
    """Blocks of extracted text joined by blank lines, refused as soon as they pass the document
    limit, so that a huge file stops being extracted early instead of being read whole."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._parts: list[str] = []
        self._size = 1  # the final newline

    def add(self, block: str, tight: bool = False) -> None:
        """Append a block; ``tight`` joins it with one newline (the next item of a list)."""
        sep = ("\n" if tight else "\n\n") if self._parts else ""
        self._size += len(sep.encode()) + len(block.encode())
        if self._size > self.max_bytes:
            raise DocumentError(f"its extracted text is over the document limit of {self.max_bytes} bytes")
        self._parts += [sep, block]

    def text(self) -> str:
        return "".join(self._parts).strip() + "\n"


@contextmanager
def quiet(logger: str) -> Iterator[None]:
    """Silence a parser's log of the damage it repairs (pypdf logs "EOF marker not found" and the
    like as warnings): the user gets the text, or the one-line error, and nothing more."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        log.setLevel(level)
