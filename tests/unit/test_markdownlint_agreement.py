"""The heading-increment, sibling-duplicate and link-fragment checks against markdownlint's MD001,
MD024 (siblings_only) and MD051 on a corpus of every CommonMark shape those rules meet
(tests/fixtures/markdownlint/). markdownlint's verdicts are recorded (verdicts.json, by
scripts/markdownlint_agreement.py --record), so this test needs no Node."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("markdownlint_agreement", ROOT / "scripts" / "markdownlint_agreement.py")
assert _spec is not None and _spec.loader is not None
agreement = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agreement)

# The one deliberate difference: a third "a" after "a" and "a-1" is "a-2" on GitHub (github-slugger
# skips a taken suffix); markdownlint 0.40 gives it no anchor and reports the link to it.
DELIBERATE = {"md051-slug-collision.md MD051: markdownlint [9, 9], docllm [9]"}


def test_every_document_of_the_corpus_has_its_recorded_verdicts():
    saved = json.loads(agreement.VERDICTS.read_text())
    assert set(saved["verdicts"]) == {p.name for p in agreement.CORPUS.glob("*.md")}
    assert len(saved["verdicts"]) >= 90 and "markdownlint v0.40" in saved["markdownlint"]


def test_the_checks_agree_with_markdownlint_but_for_the_deliberate_difference():
    saved = json.loads(agreement.VERDICTS.read_text())["verdicts"]
    figures, differ = agreement.compare(saved, agreement.docllm_verdicts())
    assert set(differ) == DELIBERATE
    assert all(f["both"] > 10 for f in figures.values())  # each rule fires on the corpus, not only passes
