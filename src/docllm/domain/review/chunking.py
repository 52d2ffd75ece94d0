"""A Markdown outline (ATX headings, code fences) and the split of a document into chunks along it.

Sizes are characters, not tokens: no tokenizer is downloaded (about 4 characters make a token).
Lines are 1-based and counted on ``\\n`` so that they match what an editor shows.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docllm.domain.review.report import location

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int
    path: tuple[str, ...]  # the texts of its ancestors, then its own


@dataclass(frozen=True)
class Fence:
    info: str  # the info string after the opening fence ("json", "python title=x", ...)
    start: int  # line of the opening fence
    end: int | None  # line of the closing fence; None when the fence is never closed
    body: str

    @property
    def language(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""


@dataclass(frozen=True)
class Outline:
    lines: list[str]
    headings: list[Heading]
    fences: list[Fence]

    def heading_path(self, line: int) -> tuple[str, ...]:
        """Path of the last heading at or above ``line`` (empty before the first heading)."""
        i = bisect.bisect_right([h.line for h in self.headings], line)
        return self.headings[i - 1].path if i else ()

    def code_lines(self) -> set[int]:
        return {n for f in self.fences for n in range(f.start, (f.end or len(self.lines)) + 1)}


def parse_outline(text: str) -> Outline:
    lines = text.split("\n")
    headings: list[Heading] = []
    fences: list[Fence] = []
    stack: list[Heading] = []
    fence: tuple[str, str, int, list[str]] | None = None  # marker, info, start, body
    for no, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if fence:
            marker, info, start, body = fence
            if m and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker) and not m.group(2).strip():
                fences.append(Fence(info, start, no, "\n".join(body)))
                fence = None
            else:
                body.append(line)
        elif m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1), m.group(2).strip(), no, [])
        elif h := _ATX.match(line):
            level, title = len(h.group(1)), _title(h)
            while stack and stack[-1].level >= level:
                stack.pop()
            stack.append(Heading(level, title, no, tuple(s.text for s in stack) + (title,)))
            headings.append(stack[-1])
    if fence:
        fences.append(Fence(fence[1], fence[2], None, "\n".join(fence[3])))
    return Outline(lines, headings, fences)


def _title(heading: re.Match[str]) -> str:
    """An ATX heading's text, without its closing hashes."""
    return re.sub(r"(^|[ \t]+)#+$", "", heading.group(2) or "").strip()


@dataclass(frozen=True)
class Chunk:
    text: str
    first_line: int  # where ``text`` starts in the whole document
    heading_path: tuple[str, ...]

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + 1


Unit = tuple[int, list[str]]  # first line, lines
Breaker = Callable[[Unit], list[Unit]]


def _cut(unit: Unit, starts_group: Callable[[int, str], bool]) -> list[Unit]:
    first, lines = unit
    groups: list[Unit] = []
    for offset, line in enumerate(lines):
        if not groups or starts_group(first + offset, line):
            groups.append((first + offset, []))
        groups[-1][1].append(line)
    return groups


def _split(unit: Unit, max_chars: int, breakers: list[Breaker]) -> list[tuple[int, str]]:
    first, lines = unit
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return [(first, text)]
    if not breakers:  # one line longer than a chunk: cut it, every piece keeps its line number
        return [(first, text[i : i + max_chars]) for i in range(0, len(text), max_chars)]
    return [piece for sub in breakers[0](unit) for piece in _split(sub, max_chars, breakers[1:])]


def split_markdown(text: str, max_chars: int) -> list[Chunk]:
    """Chunks of at most ``max_chars``, cut before headings first, then between paragraphs, then lines.

    Consecutive small sections share a chunk. Each chunk knows its first line in the whole document
    and the heading path it starts under, so line numbers found in a chunk can be shifted back.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if len(text) <= max_chars:  # one chunk (most documents): the outline's only use would be line 1's heading
        heading = _ATX.match(text.split("\n", 1)[0])  # a heading line is never a fence's
        return [Chunk(text, 1, (_title(heading),) if heading else ())]
    outline = parse_outline(text)
    heading_lines = {h.line for h in outline.headings}
    breakers: list[Breaker] = [
        lambda u: _cut(u, lambda no, _: no in heading_lines),
        lambda u: _cut(u, lambda no, line: bool(line.strip()) and no > 1 and not outline.lines[no - 2].strip()),
        lambda u: _cut(u, lambda no, line: True),
    ]
    chunks: list[Chunk] = []
    batch: list[tuple[int, str]] = []

    def flush() -> None:
        first = batch[0][0]
        chunks.append(Chunk("\n".join(t for _, t in batch), first, outline.heading_path(first)))
        batch.clear()

    size = 0
    for first, piece in _split((1, outline.lines), max_chars, breakers):
        if batch and size + 1 + len(piece) > max_chars:
            flush()
        size = len(piece) if not batch else size + 1 + len(piece)
        batch.append((first, piece))
    flush()
    return chunks


def place_finding(finding: dict[str, Any], chunk: Chunk) -> dict[str, Any]:
    """A finding about ``chunk`` (lines counted from 1 in it) placed in the whole document.

    A line the chunk does not have is a guess and is dropped; without lines, an exact quote places it.
    An empty heading becomes the chunk's heading path.
    """
    loc = finding["location"]
    start, end = loc["line_start"], loc["line_end"]
    if start is None or end > chunk.line_count:
        start = end = None
        quote = finding["quote"].strip()
        if quote and quote in chunk.text:  # a model quotes better than it counts
            at = chunk.text.index(quote)
            start = chunk.text.count("\n", 0, at) + 1
            end = start + quote.count("\n")
    shift = chunk.first_line - 1
    heading = loc["heading"] or chunk.heading
    return {**finding, "location": location(heading, start and start + shift, end and end + shift)}
