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
    total = sum(len(r.findings) for r in results)
    out.append(
        f"{len(results)} document(s) checked, {total} finding(s), "
        f"{failing(results, threshold)} at or above {threshold}."
    )
    return "\n".join(out) + "\n"
