"""Checks of the text itself: unfinished-work markers and sentences too long to follow.

Both read the prose of the CommonMark reading (paragraphs, headings, table cells): code blocks,
code spans and HTML are not prose, so a ``# TODO`` in a shell snippet is the snippet's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from docllm.adapters.offline.checks.document import Doc

MAX_SENTENCE_WORDS = 40
_MARKER = re.compile(r"\b(TODO|FIXME|TBD)\b")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[`*])")
# A marker word used as a term, not left as a marker: quoted, named ("the TBD label", "marked TBD"),
# defined ("TBD means"), or asked about ("what does TBD mean").
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
_NAMED_BEFORE = re.compile(
    r"(?:\b(?:the|a|an|word|term|words|terms|label|labelled|labeled|value|status|marker|tag|tagged|keyword|"
    r"marked|mark|called|named|does|says|reads|like|as|or|and|of|(?:start|starts|begin|begins)\s+with)\s+)$",
    re.I,
)
_NAMED_AFTER = re.compile(
    r"^\s*(?:,\s*)?(?:means|mean|stands\s+for|is\s+short\s+for|is\s+used|markers?|labels?|values?|tags?|"
    r"status(?:es)?|columns?|entries|entry|items?|rows?|comments?|placeholders?|keywords?|or|and|\()",
    re.I,
)


def is_term(text: str, start: int, end: int) -> bool:
    before, after = text[max(0, start - 40) : start], text[end : end + 40]  # the words around, not the paragraph
    if before[-1:] in _QUOTES and after[:1] == _QUOTES[before[-1]]:
        return True
    return bool(_NAMED_BEFORE.search(before) or _NAMED_AFTER.match(after))


def markers(doc: Doc, in_code: bool = False) -> Iterator[dict[str, Any]]:
    """``in_code`` (a rubric's choice): markers in code blocks and code spans count too."""
    found: dict[int, str] = {}
    for prose in doc.md.prose:
        for m in _MARKER.finditer(prose.text):
            line = prose.line_of(m.start())
            if line not in found and not is_term(prose.text, m.start(), m.end()):
                found[line] = m.group(1)
    if in_code:
        for no, line_text in enumerate(doc.lines, 1):
            code = line_text if no in doc.code else " ".join(c.group(2) for c in _CODE_SPAN.finditer(line_text))
            if no not in found and (hit := _MARKER.search(code)):
                found[no] = hit.group(1)
    for line in sorted(found):
        yield doc.finding(
            "completeness",
            "medium",
            f"{found[line]} marker: this part is unfinished.",
            line,
            suggestion="Finish the text, or track the work elsewhere and remove the marker.",
        )


def long_sentences(doc: Doc, max_words: int = MAX_SENTENCE_WORDS) -> Iterator[dict[str, Any]]:
    for prose in doc.md.prose:
        if prose.kind != "paragraph":
            continue
        text = prose.text + " "
        at = 0
        for sentence in _SENTENCE_END.split(text):
            at = text.index(sentence, at)
            words = len(sentence.split())
            if words > max_words:
                first = prose.line_of(at)
                last = prose.line_of(at + len(sentence.rstrip()) - 1)
                yield doc.finding(
                    "clarity",
                    "low",
                    f"This sentence has {words} words.",
                    first,
                    last,
                    quote=" ".join(sentence.split()),
                    suggestion="Split it into shorter sentences.",
                )
            at += len(sentence)
