"""``docllm check``'s results with the judgements applied (marks, by document name) and, with
``--baseline``, only the findings an earlier SARIF run did not have."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from docllm.domain.marks.model import Mark, fingerprint
from docllm.domain.marks.service import judge
from docllm.domain.review.checking import Checked, Source


def with_marks(results: Sequence[Checked], marks: Mapping[str, Sequence[Mark]]) -> list[Checked]:
    """Each result's dismissed findings moved apart: they no longer gate (``failing``)."""
    out = []
    for r in results:
        judged = judge(r.findings, marks.get(r.source.name, ()))
        out.append(replace(r, findings=judged.active, dismissed=[*r.dismissed, *judged.dismissed]))
    return out


def against_baseline(
    results: Sequence[Checked], seen: Counter[tuple[str, str]], where: Callable[[Source], str]
) -> list[Checked]:
    """Only the findings that are new: ``seen`` counts (file, fingerprint) in the earlier run, and
    each of its findings answers for one of this run (two alike where there was one: one is new).
    ``where``: a source's file as the baseline names files."""
    left = Counter(seen)
    out = []
    for r in results:
        path, new, known = where(r.source), [], 0
        for f in r.findings:
            key = (path, fingerprint(f))
            if left[key] > 0:
                left[key] -= 1
                known += 1
            else:
                new.append(f)
        out.append(replace(r, findings=new, known=known))
    return out
