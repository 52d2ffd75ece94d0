"""The parsed document every offline check reads, and the finding it reports with its location."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from docllm.adapters.offline.checks.bounds import REVIEW_SECONDS, Deadline
from docllm.adapters.offline.checks.markdown import Parsed, parse
from docllm.domain.review.chunking import Outline
from docllm.domain.review.report import finding

_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


@dataclass
class Doc:
    outline: Outline
    code: set[int]  # lines inside fenced or indented code, fences included
    md: Parsed  # the CommonMark reading: links, anchors, prose (checks/markdown.py)
    deadline: Deadline = field(default_factory=lambda: Deadline(REVIEW_SECONDS))  # for the code blocks

    @classmethod
    def parse(cls, text: str) -> Doc:
        md = parse(text)
        return cls(Outline(md.lines, md.headings, md.fences), md.code, md)

    @property
    def lines(self) -> list[str]:
        return self.outline.lines

    @property
    def last_line(self) -> int:
        """The last line an editor shows: a final newline does not start another one."""
        return len(self.lines) - (1 if len(self.lines) > 1 and self.lines[-1] == "" else 0)

    def prose(self) -> Iterator[tuple[int, str]]:
        """Lines outside code, inline code blanked out (a rubric's terms are not matched in commands)."""
        for no, line in enumerate(self.lines, 1):
            if no not in self.code:
                yield no, _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)

    def finding(
        self,
        category: str,
        severity: str,
        message: str,
        start: int,
        end: int | None = None,
        quote: str | None = None,
        suggestion: str = "",
    ) -> dict[str, Any]:
        """A finding at lines ``start``..``end``; the quote defaults to the first line, trimmed."""
        if quote is None:
            quote = self.lines[start - 1].strip()
        quote = quote if len(quote) <= 160 else quote[:157] + "..."
        heading = " > ".join(self.outline.heading_path(start))
        return finding(
            category,
            severity,
            message,
            heading=heading,
            line_start=start,
            line_end=end,
            quote=quote,
            suggestion=suggestion,
        )
