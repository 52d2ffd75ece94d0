"""A golden document's ``NAME.expected.yaml`` to its expected findings; every error names the
file and the line (``path:line: why``). The format is in docs/EVAL.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from docllm.adapters.yaml_nodes import Bad, mapping, placed, scalar, text, whole_number
from docllm.domain.errors import EvaluationError
from docllm.domain.review.evaluation import Expected

MAX_EXPECTATIONS_BYTES = 256 * 1024
_RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
FINDING_KEYS = ("check", "category", "severity", "lines", "page", "section", "quote")


@dataclass(frozen=True)
class Expectations:
    findings: tuple[Expected, ...]
    rubric: str | None = None  # a rubric's name, or a path to its file (relative to this file)
    rubric_line: int = 1
    false_alarms: tuple[Expected, ...] = ()  # "no finding here": what a person dismissed (docs/FINDINGS.md)


def _lines(node: yaml.Node) -> tuple[int, int]:
    value = scalar(node, "lines")
    m = _RANGE.fullmatch(value)
    if not m:
        raise Bad(node, f"lines must be N or N-M (line numbers of the document), got {value!r}")
    start, end = int(m.group(1)), int(m.group(2) or m.group(1))
    if not 1 <= start <= end:
        raise Bad(node, f"lines must be N or N-M with 1 <= N <= M; got {value!r}")
    return start, end


def _expected(node: yaml.Node) -> Expected:
    fields = mapping(node, "an expected finding", FINDING_KEYS)
    values: dict[str, object] = {"line": node.start_mark.line + 1}
    for key in ("check", "category", "severity", "section", "quote"):
        if key in fields:
            values[key] = text(fields[key][1], key).strip()
    for key in ("category", "severity"):
        if key in values:
            values[key] = str(values[key]).lower()
    if "lines" in fields:
        values["lines"] = _lines(fields["lines"][1])
    if "page" in fields:
        if "section" in fields:
            raise Bad(fields["page"][0], "give page or section, not both (page N is the section 'page N')")
        page = whole_number(fields["page"][1], "page")
        if page < 1:
            raise Bad(fields["page"][1], "page must be 1 or more")
        values["section"] = f"page {page}"  # the PDF reader's heading for the page
    try:
        return Expected(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise Bad(node, str(exc)) from None


def _expectations(root: yaml.Node | None) -> Expectations:
    if root is None:
        raise Bad(None, "the file is empty: it needs findings (a list, [] for none)")
    fields = mapping(root, "an expectations file", ("rubric", "findings", "false_alarms"))
    if "findings" not in fields:
        raise Bad(root, "an expectations file needs findings: a list ([] for a document with no problem)")
    findings = _list(fields["findings"][1], "findings")
    alarms = _list(fields["false_alarms"][1], "false_alarms") if "false_alarms" in fields else ()
    if "rubric" not in fields:
        return Expectations(findings, false_alarms=alarms)
    rubric = fields["rubric"][1]
    return Expectations(findings, text(rubric, "rubric").strip(), rubric.start_mark.line + 1, alarms)


def _list(items: yaml.Node, key: str) -> tuple[Expected, ...]:
    if not isinstance(items, yaml.SequenceNode):
        raise Bad(items, f"{key} must be a list")
    return tuple(_expected(item) for item in items.value)


def parse_expectations(content: str, path: str) -> Expectations:
    """``path`` is what errors name."""
    return placed(content, path, _expectations, EvaluationError)


def read_expectations(path: str) -> Expectations:
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read(MAX_EXPECTATIONS_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"{path}:1: cannot be read: {exc}") from None
    if len(content) > MAX_EXPECTATIONS_BYTES:
        raise EvaluationError(f"{path}:1: an expectations file is at most {MAX_EXPECTATIONS_BYTES} characters")
    return parse_expectations(content, path)
