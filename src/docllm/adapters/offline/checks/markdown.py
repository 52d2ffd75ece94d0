"""A document read as CommonMark (markdown-it-py, GFM tables) into what the offline checks look at:
headings, code fences, links, anchors and the prose between, each with the source's line numbers
(the parser's token maps).

Anchors are GitHub's (and markdownlint's MD051): the heading's text (code spans and link texts in,
images and HTML out) lowercased, every character that is not a letter, mark, number, ``_``, ``-`` or
space dropped, spaces to ``-``; a repeat gets ``-1``, ``-2``. ``{#id}`` in a heading and HTML ``id``
(any tag) or ``name`` (``<a>``) attributes add anchors. Front matter is blanked, not parsed.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from docllm.adapters.files.documents import FROM_HTML
from docllm.adapters.offline.checks.bounds import MARKDOWN_SECONDS, Deadline, TooComplex
from docllm.domain.review.chunking import Fence, Heading

# markdown-it stops nesting blocks and inlines at this depth (its CommonMark preset's own bound),
# so a hostile document of 100,000 '>' or '[' is read flat instead of recursing.
MAX_NESTING = 20
_FRONT_MATTER = re.compile(r"\A(?:---|\+\+\+)[ \t]*\n.*?\n(?:---|\.\.\.|\+\+\+)[ \t]*(?:\n|\Z)", re.S)
_TITLE = re.compile(r'^\s*"?title"?\s*[:=]', re.M | re.I)
_HTML_ANCHOR = re.compile(
    r"""<([a-zA-Z][a-zA-Z0-9-]*)\b([^<>]*?)\s(id|name)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""", re.S
)
_CUSTOM_ID = re.compile(r"\{(#[a-z\d]+(?:[-_][a-z\d]+)*)\}")
_KEEP = {"-", " ", "_"}


_DEADLINE: ContextVar[Deadline | None] = ContextVar("markdown_deadline", default=None)


def _check_clock(*_: object) -> bool:
    """A rule that matches nothing and is tried first at every inline position and block line: the
    parse's time bound (a line of 100,000 '[' costs markdown-it minutes, quadratically)."""
    deadline = _DEADLINE.get()
    if deadline is not None and deadline.passed():
        raise TooComplex(f"its Markdown took over {deadline.seconds:.0f} s to read: too complex to check")
    return False


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING}).enable("table")
    md.inline.ruler.before("text", "docllm_clock", _check_clock)
    md.block.ruler.before("table", "docllm_clock", _check_clock)
    skip = md.inline.skipToken  # a link label's scan calls it at every position, rules or not

    def skip_token(state: Any) -> None:
        _check_clock()
        skip(state)

    md.inline.skipToken = skip_token  # type: ignore[method-assign]  # this parser's instance only
    return md


@dataclass(frozen=True)
class Link:
    line: int
    href: str  # as written, entities and escapes resolved by the parser
    text: str  # the source of the link, for the finding's quote


@dataclass(frozen=True)
class Prose:
    """Text of a paragraph, heading or table cell, code spans blanked: ``starts[i]`` is the offset in
    ``text`` where source line ``first + i`` begins."""

    first: int
    text: str
    starts: tuple[int, ...]
    kind: str  # "paragraph", "heading" or "cell"

    def line_of(self, offset: int) -> int:
        return self.first + bisect.bisect_right(self.starts, offset) - 1  # a 20,000-line paragraph stays cheap


@dataclass
class Parsed:
    lines: list[str]
    headings: list[Heading] = field(default_factory=list)
    heading_ends: dict[int, int] = field(default_factory=dict)  # heading line -> its last source line
    raw_titles: dict[int, str] = field(default_factory=dict)  # heading line -> its source text (MD024's)
    slug_texts: dict[int, str] = field(default_factory=dict)  # heading line -> the text its anchor is made of
    fences: list[Fence] = field(default_factory=list)
    code: set[int] = field(default_factory=set)  # lines of fenced and indented code
    links: list[Link] = field(default_factory=list)
    references: set[str] = field(default_factory=set)  # defined labels, normalised
    definitions: list[Link] = field(default_factory=list)  # in-page definitions ([a]: #x), at their line
    anchors: set[str] = field(default_factory=set)
    prose: list[Prose] = field(default_factory=list)
    html_lines: set[int] = field(default_factory=set)
    front_matter_title: bool = False
    ids_only: bool = False  # an HTML page's text: headings have no GitHub anchors, only their ids
    unreadable: str = ""  # why the Markdown was not read (a bound was reached): its checks are skipped


def slug(text: str) -> str:
    """GitHub's anchor of a heading's text (github-slugger; markdownlint's MD051 the same)."""
    kept = [c for c in text.lower() if c in _KEEP or unicodedata.category(c)[0] in "LMN"]
    return "".join(kept).replace(" ", "-")


def label(text: str) -> str:
    """A reference label as CommonMark matches it: case-folded, inner whitespace collapsed."""
    return " ".join(text.split()).casefold()


def parse(text: str, seconds: float = MARKDOWN_SECONDS) -> Parsed:
    lines = text.split("\n")
    source = text
    front = _FRONT_MATTER.match(text)
    title = False
    if front:  # blanked: the parser sees empty lines, the line numbers stay
        title = bool(_TITLE.search(front.group(0)))
        source = "\n" * front.group(0).count("\n") + text[front.end() :]
    env: dict = {}
    token = _DEADLINE.set(Deadline(seconds))
    try:
        tokens = _parser().parse(source, env)
    except TooComplex as exc:
        return Parsed(lines, unreadable=str(exc))
    except RecursionError:
        return Parsed(lines, unreadable="its Markdown is too deeply nested to check")
    finally:
        _DEADLINE.reset(token)
    out = Parsed(lines, front_matter_title=title)
    refs = env.get("references", {})
    out.references = {label(k) for k in refs}
    _walk(tokens, out)
    _definitions(refs, out)
    _add_anchors(out)
    return out


def _walk(tokens: list[Token], out: Parsed) -> None:
    stack: list[Heading] = []
    pending: Token | None = None  # the heading_open before its inline
    cell = False
    for tok in tokens:
        if tok.type == "heading_open":
            pending = tok
        elif tok.type in ("th_open", "td_open"):
            cell = True
        elif tok.type in ("th_close", "td_close"):
            cell = False
        elif tok.type == "inline" and tok.map:
            first = tok.map[0] + 1
            if pending is not None and pending.map:
                level = int(pending.tag[1])
                shown = _shown(tok)
                while stack and stack[-1].level >= level:
                    stack.pop()
                stack.append(Heading(level, shown, first, tuple(s.text for s in stack) + (shown,)))
                out.headings.append(stack[-1])
                out.heading_ends[first] = pending.map[1]
                out.raw_titles[first] = _raw_title(tok)
                out.slug_texts[first] = _heading_text(tok)
                _inline(tok, first, out, "heading")
                pending = None
            else:
                _inline(tok, first, out, "cell" if cell else "paragraph")
        elif tok.type == "fence" and tok.map:
            _fence(tok, out)
        elif tok.type == "code_block" and tok.map:
            out.code.update(range(tok.map[0] + 1, tok.map[1] + 1))
        elif tok.type == "html_block" and tok.map:
            out.html_lines.update(range(tok.map[0] + 1, tok.map[1] + 1))
            out.ids_only = out.ids_only or tok.content.strip() == FROM_HTML
            _html_anchors(tok.content, out)


def _shown(tok: Token) -> str:
    """A heading's text as the findings quote it: its source without inline HTML (an anchor tag)."""
    content = tok.content
    for c in tok.children or []:
        if c.type == "html_inline":
            content = content.replace(c.content, "", 1)
    return " ".join(content.split())


_DEFINITION = re.compile(r"^[ >]{0,6}\[((?:[^\[\]\\]|\\.)+)\]:\s*(\S+)?")


def _definitions(refs: dict, out: Parsed) -> None:
    """Reference definitions whose target is a fragment, at their own line (MD051 checks them there,
    once, however many links use them)."""
    wanted = {label(k): str(v.get("href", "")) for k, v in refs.items() if str(v.get("href", "")).startswith("#")}
    for no, line in enumerate(out.lines, 1):
        if no in out.code or not wanted:
            continue
        m = _DEFINITION.match(line)
        if m and (name := label(m.group(1))) in wanted:
            out.definitions.append(Link(no, wanted.pop(name), line.strip()))


def _fence(tok: Token, out: Parsed) -> None:
    start, stop = tok.map[0] + 1, tok.map[1]  # type: ignore[index]
    last = out.lines[stop - 1] if stop - 1 < len(out.lines) else ""
    marker = re.escape(tok.markup[0])
    closed = stop > start and re.fullmatch(rf"[ \t>]*{marker}{{{len(tok.markup)},}}[ \t]*", last) is not None
    reaches_end = stop >= _last_line(out.lines)
    end = stop if closed or not reaches_end else None  # closed by its container: not "never closed"
    out.fences.append(Fence(tok.info.strip(), start, end, tok.content.rstrip("\n")))
    out.code.update(range(start, stop + 1))


def _last_line(lines: list[str]) -> int:
    return len(lines) - (1 if len(lines) > 1 and lines[-1] == "" else 0)


def _raw_title(tok: Token) -> str:
    """markdownlint's MD024 text: the heading's source (entities and link targets as written), inline
    HTML left out, lines joined by spaces; untrimmed ("Notes <a id=x></a>" is "Notes ", as there)."""
    content = tok.content
    for c in tok.children or []:
        if c.type == "html_inline":
            content = content.replace(c.content, "", 1)
    return content.replace("\n", " ")


def _inline(tok: Token, first: int, out: Parsed, kind: str) -> None:
    line = first
    text: list[str] = []
    starts = [0]
    size = 0
    link: tuple[int, str, list[str]] | None = None
    for c in tok.children or []:
        piece = ""
        if c.type == "text":
            piece = c.content
        elif c.type == "code_inline":
            piece = " " * (len(c.content) + 2 * len(c.markup))  # blanked: words in code are not prose
        elif c.type in ("softbreak", "hardbreak"):
            line += 1
            piece = "\n"
        elif c.type == "link_open":
            link = (line, str(c.attrGet("href") or ""), [])
        elif c.type == "link_close" and link is not None:
            out.links.append(Link(link[0], link[1], f"[{''.join(link[2])}]({link[1]})"))
            link = None
        elif c.type == "html_inline":
            _html_anchors(c.content, out)
        elif c.type == "image":
            piece = c.content  # its alt text reads as prose
        if link is not None and c.type in ("text", "code_inline"):
            link[2].append(c.content)
        if piece == "\n":
            text.append(" ")
            size += 1
            starts.append(size)
        else:
            text.append(piece)
            size += len(piece)
    out.prose.append(Prose(first, "".join(text), tuple(starts), kind))


def _heading_text(tok: Token) -> str:
    """The text GitHub and MD051 make an anchor of: text, code spans and link texts; no image, no HTML."""
    return "".join(c.content for c in tok.children or [] if c.type in ("text", "code_inline"))


def _html_anchors(html: str, out: Parsed) -> None:
    for m in _HTML_ANCHOR.finditer(html):
        tag, attr = m.group(1).lower(), m.group(3).lower()
        if attr == "id" or tag == "a":
            value = next(v for v in (m.group(4), m.group(5), m.group(6)) if v is not None)
            out.anchors.add(value)


def _add_anchors(out: Parsed) -> None:
    """Each heading's GitHub anchor (repeats suffixed as github-slugger does), and its ``{#id}``."""
    seen: dict[str, int] = {}
    for h in out.headings:
        base = slug(out.slug_texts.get(h.line, h.text))
        if base and not out.ids_only:  # an image-only heading has no anchor
            result = base
            while result in seen:
                seen[base] += 1
                result = f"{base}-{seen[base]}"
            seen[result] = 0
            out.anchors.add(result)
        for m in _CUSTOM_ID.finditer(h.text):
            out.anchors.add(m.group(1)[1:])
