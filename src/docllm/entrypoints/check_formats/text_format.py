"""For people: ``path:line: severity category: message`` per finding, then a one-line total."""

from __future__ import annotations

from collections.abc import Sequence

from docllm.domain.review.checking import Checked, at_or_above, failing
from docllm.entrypoints.check_formats.rules import lines


def render(results: Sequence[Checked], threshold: str) -> str:
    out = []
    for r in results:
        for f in r.findings:
            start, _ = lines(f)
            heading = (f.get("location") or {}).get("heading")
            where = f"{r.path}:{start}" if start else (f"{r.path} ({heading})" if heading else r.path)
            mark = " [fails]" if at_or_above(f, threshold) else ""
            out.append(f"{where}: {f['severity']} {f['category']}{mark}: {f['message']}")
    for r in results:  # judged by a person: shown, never counted (docs/FINDINGS.md)
        for f in r.dismissed:
            start, _ = lines(f)
            where = f"{r.path}:{start}" if start else r.path
            out.append(
                f"{where}: {f['severity']} {f['category']} [dismissed: {f['dismissed']['reason']}]: {f['message']}"
            )
    total = sum(len(r.findings) for r in results)
    dismissed = sum(len(r.dismissed) for r in results)
    known = [r.known for r in results if r.known is not None]
    out.append(
        f"{len(results)} document(s) checked, {total} finding(s), "
        f"{failing(results, threshold)} at or above {threshold}."
        + (f" {dismissed} dismissed." if dismissed else "")
        + (f" {sum(known)} already in the baseline, not shown." if known else "")
    )
    return "\n".join(out) + "\n"
