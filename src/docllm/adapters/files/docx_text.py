"""The text of a Word file (python-docx) as Markdown, so a finding's location is its heading path.

Headings (styles "Heading 1".."Heading 9" and styles based on them) become ``#`` lines by level
(a "Title" stays a paragraph: as a heading it would be an empty section before "Heading 1"), list
paragraphs ``- `` items (indented by level), tables ``| a | b |`` rows, other paragraphs text.
Headers, footers, footnotes, comments and text boxes are left out. The zip is bounded first
(zip_guard); python-docx parses its XML without resolving entities.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

from docllm.adapters.files.extraction import DocumentError, FileLimits, TextBudget, literal, short_reason
from docllm.adapters.files.zip_guard import check_zip

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

_HEADING = re.compile(r"heading ([1-9])")
_LIST_LEVEL = re.compile(r"list \w+(?: (\d))?")  # "List Bullet", "List Number 2", "List Paragraph"


def docx_to_text(data: bytes, budget: TextBudget, limits: FileLimits) -> str:
    check_zip(data, limits.unzipped_bytes)
    from docx import Document  # imported here: only a Word file pays for it
    from docx.text.paragraph import Paragraph

    try:
        in_list = False
        for block in Document(io.BytesIO(data)).iter_inner_content():
            if not isinstance(block, Paragraph):
                if rows := _table(block):
                    budget.add(rows)
                in_list = False
                continue
            text, is_item = _paragraph(block)
            if text:
                budget.add(text, tight=is_item and in_list)
                in_list = is_item
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes the parser raise, it is a damaged file
        raise DocumentError(f"not a readable DOCX ({short_reason(exc)})") from None
    return budget.text()


def _paragraph(p: Paragraph) -> tuple[str, bool]:
    """The Markdown of one paragraph, and whether it is a list item."""
    level = _heading_level(p)
    if level:
        title = " ".join(p.text.split())
        return (f"{'#' * min(level, 6)} {title}" if title else ""), False
    lines = [literal(line.rstrip()) for line in p.text.strip().split("\n")]
    depth = _list_depth(p)
    if depth is None:
        return "\n".join(lines).strip(), False
    indent = "  " * depth
    return "\n".join([f"{indent}- {lines[0]}", *(f"{indent}  {line}" for line in lines[1:])]).rstrip(), True


def _heading_level(p: Paragraph) -> int:
    style = p.style
    for _ in range(5):  # a custom style based on "Heading 2" is a heading 2
        if style is None:
            return 0
        name = (style.name or "").lower()
        if m := _HEADING.fullmatch(name):
            return int(m.group(1))
        style = style.base_style
    return 0


def _list_depth(p: Paragraph) -> int | None:
    """0 for a top-level item, more when nested; None when the paragraph is not a list item."""
    ppr = p._p.pPr  # numbering is not in python-docx's public API
    num: Any = ppr.numPr if ppr is not None else None  # CT_NumPr; its stubs type the child as ZeroOrOne
    if num is not None and num.ilvl is not None:
        return int(num.ilvl.val)
    m = _LIST_LEVEL.fullmatch((p.style.name or "").lower()) if p.style is not None else None
    if m:
        return int(m.group(1)) - 1 if m.group(1) else 0
    return 0 if num is not None else None


def _table(table: Table) -> str:
    rows: list[list[str]] = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell is listed once per grid column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()).replace("|", "\\|"))
        if any(cells):
            rows.append(cells)
    if len(rows) > 1:  # the first row as a header, so that the table reads as a Markdown table
        rows.insert(1, ["---"] * len(rows[0]))
    return "\n".join("| " + " | ".join(cells) + " |" for cells in rows)
