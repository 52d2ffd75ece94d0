"""``docllm eval export --dismissed DIR``: judged documents written as a golden set that ``docllm
eval DIR`` reads (docs/EVAL.md): ``NAME.md`` and ``NAME.expected.yaml`` per document. Everything is
rendered before anything is written, into a directory that is new or empty: an export never mixes
with, or overwrites, a set that is there."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from docllm.domain.errors import EvaluationError
from docllm.domain.marks.golden import GoldenDocument

SUFFIX = ".expected.yaml"


def expectations_yaml(doc: GoldenDocument) -> str:
    head = (
        f"# From task {doc.task_id}'s report and the judgements on it (docllm eval export --dismissed).\n"
        "# findings: what the reviewer should find; false_alarms: findings a person dismissed as false\n"
        "# alarms, no finding there (a reviewer that reports one again is counted for it).\n"
    )
    body: dict[str, object] = {"rubric": doc.rubric} if doc.rubric else {}
    body |= {"findings": doc.findings, "false_alarms": doc.false_alarms}
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)


def write_golden_set(directory: str, docs: Sequence[GoldenDocument]) -> None:
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise EvaluationError(f"{directory}: exists and is not an empty directory (an export writes a new set)")
    files = {}
    for doc in docs:
        stem = doc.file_name.rsplit(".", 1)[0]
        files[doc.file_name] = doc.document  # as the reviewer saw it: its lines are the expectations' lines
        files[stem + SUFFIX] = expectations_yaml(doc)
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        with open(root / name, "x", encoding="utf-8", newline="") as f:  # x: never over a file
            f.write(content)
