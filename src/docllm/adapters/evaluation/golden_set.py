"""A golden set directory to eval cases: each ``NAME.expected.yaml`` beside its document
``NAME.<ext>``, read by the same reader as ``docllm submit``; files without expectations are left out."""

from __future__ import annotations

import os
from pathlib import Path

from docllm.adapters.evaluation.expectations import Expectations, read_expectations
from docllm.adapters.files.documents import DocumentError, read_document
from docllm.adapters.rubrics.catalog import YamlRubricCatalog
from docllm.domain.errors import EvaluationError, RubricError
from docllm.domain.review.eval_run import Case
from docllm.domain.review.ports import RubricCatalog
from docllm.domain.review.rubric import Rubric

SUFFIX = ".expected.yaml"


def load_cases(directory: str, max_bytes: int, rubrics: RubricCatalog) -> list[Case]:
    """Every case of ``directory``, in name order; EvaluationError on the first file that is wrong.
    ``rubrics``: where an expectations file's rubric name is looked up (DOCLLM_RUBRICS_DIR)."""
    root = Path(directory)
    if not root.is_dir():
        raise EvaluationError(f"{directory}: not a directory")
    names = sorted(p.name for p in root.iterdir() if p.is_file())
    specs = [n for n in names if n.endswith(SUFFIX)]
    if not specs:
        raise EvaluationError(f"{directory}: no *{SUFFIX} file (the expected findings of a document)")
    return [_case(root, spec, names, max_bytes, rubrics) for spec in specs]


def _case(root: Path, spec: str, names: list[str], max_bytes: int, rubrics: RubricCatalog) -> Case:
    spec_path = str(root / spec)
    stem = spec.removesuffix(SUFFIX)
    docs = [n for n in names if n.startswith(stem + ".") and not n.endswith(SUFFIX)]
    if len(docs) != 1:
        found = ", ".join(docs) or "none"
        raise EvaluationError(f"{spec_path}:1: needs exactly one document named {stem}.<ext> beside it; found {found}")
    expectations = read_expectations(spec_path)
    rubric = _rubric(expectations, spec_path, rubrics)
    try:
        document = read_document(root / docs[0], max_bytes)
    except DocumentError as exc:
        raise EvaluationError(str(exc)) from None
    return Case(str(root / docs[0]), docs[0], document, expectations.findings, rubric, expectations.false_alarms)


def _rubric(expectations: Expectations, spec_path: str, rubrics: RubricCatalog) -> Rubric | None:
    """A rubric named as ``--rubric`` names one, or a path to its file relative to the expectations
    file (``../rubrics/install-guide.yaml``), so a golden set can carry its rubric beside it."""
    ref = expectations.rubric
    if ref is None:
        return None
    try:
        if "/" in ref or ref.endswith(".yaml"):
            path = os.path.join(os.path.dirname(spec_path), ref)
            return YamlRubricCatalog(os.path.dirname(path)).get(os.path.basename(path).removesuffix(".yaml"))
        return rubrics.get(ref)
    except RubricError as exc:
        raise EvaluationError(f"{spec_path}:{expectations.rubric_line}: {exc}") from None
