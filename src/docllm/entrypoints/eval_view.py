"""How ``docllm eval`` looks: its JSON (a contract, docs/EVAL.md) and its table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from docllm.domain.review.eval_run import CaseResult, total
from docllm.domain.review.evaluation import Expected, Score


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _cost(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def score_json(score: Score) -> dict[str, Any]:
    return {
        "expected": score.expected,
        "produced": score.produced,
        "matched": score.matched,
        "precision": _ratio(score.precision),
        "recall": _ratio(score.recall),
        "cost_usd": _cost(score.cost_usd),
    }


def expected_json(e: Expected) -> dict[str, Any]:
    where = {"lines": list(e.lines) if e.lines else None, "section": e.section}
    return {"line": e.line, "check": e.check, "category": e.category, "severity": e.severity, **where}


def _unexpected_json(f: dict[str, Any]) -> dict[str, Any]:
    keys = ("check", "category", "severity", "location", "message")
    return {k: f.get(k) for k in keys}


def eval_json(results: Sequence[CaseResult], reviewer: str, model: str | None) -> dict[str, Any]:
    documents = [
        {
            "document": r.case.name,
            "rubric": r.case.rubric.ref if r.case.rubric else None,
            **score_json(r.score),
            "calls": r.usage.calls,
            "prompt_tokens": r.usage.prompt_tokens,
            "completion_tokens": r.usage.completion_tokens,
            "missed": [expected_json(e) for e in r.comparison.missed],
            "unexpected": [_unexpected_json(f) for f in r.comparison.unexpected],
            "false_alarms": len(r.comparison.false_alarms),  # of the unexpected: dismissed before, back
        }
        for r in results
    ]
    return {"reviewer": reviewer, "model": model, "documents": documents, "total": score_json(total(results))}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _usd(value: float | None) -> str:
    return "no price" if value is None else f"{value:.4g}"


def _row(score: Score) -> list[str]:
    counts = [str(score.expected), str(score.produced), str(score.matched)]
    return [*counts, _pct(score.precision), _pct(score.recall), _usd(score.cost_usd)]


def _where(e: Expected) -> str:
    if e.lines:
        return f"lines {e.lines[0]}-{e.lines[1]}" if e.lines[0] != e.lines[1] else f"line {e.lines[0]}"
    return f"in {e.section!r}" if e.section else "anywhere"


def eval_table(results: Sequence[CaseResult], reviewer: str, model: str | None) -> Group:
    """The table, then what each document missed and what nothing expected (a person's next step)."""
    table = Table(title=f"docllm eval: {reviewer} ({model or '-'})", box=box.SIMPLE_HEAD)
    table.add_column("document", overflow="fold", min_width=12)
    table.add_column("rubric", overflow="fold", min_width=8)
    # short headers, so that an 80-column terminal shows every figure
    for col in ("expected", "found", "matched", "prec.", "recall", "USD"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in results:
        table.add_row(escape(r.case.name), escape(r.case.rubric.ref if r.case.rubric else "-"), *_row(r.score))
    table.add_section()
    table.add_row("total (micro)", "", *_row(total(results)))
    notes = []
    for r in results:
        for e in r.comparison.missed:
            what = " ".join(x for x in (e.check, e.category) if x)
            notes.append(f"{r.case.name}: missed {what} ({e.severity}+) {_where(e)}, expectations line {e.line}")
        for f in r.comparison.unexpected:
            loc = f["location"]
            where = f"line {loc['line_start']}" if loc["line_start"] else repr(loc["heading"] or "document")
            again = " (a false alarm a person dismissed)" if any(f is a for a in r.comparison.false_alarms) else ""
            notes.append(
                f"{r.case.name}: unexpected{again} {f['category']} ({f['severity']}) at {where}: {f['message']}"
            )
    return Group(table, *(Text(n, style="dim") for n in notes))
