"""``docllm check``'s results with the judgements applied (marks, by document name) and, with
``--baseline``, only the findings an earlier SARIF run did not have."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from docllm.domain.marks.model import Mark, fingerprint
from docllm.domain.marks.service import judge
from docllm.domain.review.checking import Checked, Source


def shared_names(results: Sequence[Checked]) -> dict[str, list[str]]:
    """Names two or more files of this check share (``docs/api/index.md``, ``docs/guide/index.md``):
    a mark kept by such a name cannot tell which file a person judged."""
    paths: dict[str, list[str]] = {}
    for r in results:
        paths.setdefault(r.source.name, []).append(r.source.path)
    return {name: found for name, found in paths.items() if len(found) > 1}


def with_marks(results: Sequence[Checked], marks: Mapping[str, Sequence[Mark]]) -> list[Checked]:
    """Each result's dismissed findings moved apart: they no longer gate (``failing``). A file's
    marks are those kept by its path (a task named so: ``submit --name docs/api/index.md``) and, when
    no other file of the check has its name, those kept by its name; a name two files share judges
    neither (a finding nobody looked at must not pass as judged)."""
    shared = shared_names(results)
    out = []
    for r in results:
        own = [*marks.get(r.source.path, ())]
        if r.source.name not in shared and r.source.name != r.source.path:
            own += marks.get(r.source.name, ())
        judged = judge(r.findings, own)
        out.append(replace(r, findings=judged.active, dismissed=[*r.dismissed, *judged.dismissed]))
    return out


def against_baseline(
    results: Sequence[Checked],
    seen: Counter[tuple[str, str]],
    where: Callable[[Source], str],
    every: Counter[tuple[str, str]] | None = None,
) -> list[Checked]:
    """Only the findings that are new: ``seen`` counts (file, fingerprint) in the earlier run, and
    each of its findings answers for one of this run (two alike where there was one: one is new).
    ``where``: a source's file as the baseline names files. Dismissed findings stay, each told
    ``baseline_state`` new or unchanged against ``every`` (the earlier run's results, suppressed ones too)."""
    left, all_left = Counter(seen), Counter(every if every is not None else seen)
    out = []
    for r in results:
        path, new, known = where(r.source), [], 0
        judged = []
        for f in r.dismissed:
            key = (path, fingerprint(f))
            judged.append({**f, "baseline_state": "unchanged" if all_left[key] > 0 else "new"})
            all_left[key] -= 1 if all_left[key] > 0 else 0
        for f in r.findings:
            key = (path, fingerprint(f))
            if left[key] > 0:
                left[key] -= 1
                known += 1
            else:
                new.append(f)
        out.append(replace(r, findings=new, dismissed=judged, known=known))
    return out
