"""How far the offline checks agree with markdownlint on the rules they share: heading-increment
(MD001), no-duplicate-heading with siblings_only (MD024) and link-fragments (MD051), on the corpus
of tests/fixtures/markdownlint/ (one document per CommonMark shape those rules meet).

    # record markdownlint's verdicts (needs Node and markdownlint-cli2: npm install markdownlint-cli2 in DIR)
    PYTHONPATH=src:. python scripts/markdownlint_agreement.py --record DIR/node_modules/.bin/markdownlint-cli2
    # compare docllm's verdicts with the recorded ones (no Node needed; the unit test does the same)
    PYTHONPATH=src:. python scripts/markdownlint_agreement.py

The recorded verdicts are tests/fixtures/markdownlint/verdicts.json; docs/EVAL.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from docllm.adapters.offline.checks import Doc
from docllm.adapters.offline.checks.links import broken_links
from docllm.adapters.offline.checks.structure import duplicate_headings, heading_levels

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "markdownlint"
VERDICTS = CORPUS / "verdicts.json"
RULES = ("MD001", "MD024", "MD051")
CONFIG = {"config": {"default": False, "MD001": True, "MD024": {"siblings_only": True}, "MD051": True}}
_LINE = re.compile(r"^(?P<file>[^:\s]+\.md):(?P<line>\d+)(?::\d+)? (?:error )?(?P<rule>MD\d{3})/")

Verdicts = dict[str, dict[str, list[int]]]  # document -> rule -> the lines it reports


def record(markdownlint: str) -> Verdicts:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / ".markdownlint-cli2.jsonc").write_text(json.dumps(CONFIG))
        for doc in sorted(CORPUS.glob("*.md")):
            (Path(tmp) / doc.name).write_text(doc.read_text())
        done = subprocess.run([markdownlint, "*.md"], cwd=tmp, capture_output=True, text=True, check=False)
        version = done.stdout.splitlines()[0] if done.stdout else ""
    verdicts: Verdicts = {doc.name: {rule: [] for rule in RULES} for doc in sorted(CORPUS.glob("*.md"))}
    for line in (done.stdout + done.stderr).splitlines():
        if m := _LINE.match(line):
            verdicts[m.group("file")][m.group("rule")].append(int(m.group("line")))
    VERDICTS.write_text(json.dumps({"markdownlint": version, "verdicts": verdicts}, indent=1, sort_keys=True) + "\n")
    return verdicts


def docllm_verdicts() -> Verdicts:
    out: Verdicts = {}
    for path in sorted(CORPUS.glob("*.md")):
        doc = Doc.parse(path.read_text())
        fragments = [f for f in broken_links(doc) if "Anchor" in f["message"]]
        out[path.name] = {
            "MD001": sorted(f["location"]["line_start"] for f in heading_levels(doc)),
            "MD024": sorted(f["location"]["line_start"] for f in duplicate_headings(doc)),
            "MD051": sorted(f["location"]["line_start"] for f in fragments),
        }
    return out


def compare(expected: Verdicts, actual: Verdicts) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Per rule: documents where the verdicts are equal, all documents, findings both report, only
    markdownlint reports, only docllm reports; and each disagreement."""
    keys = ("equal", "documents", "both", "markdownlint_only", "docllm_only")
    figures = {rule: dict.fromkeys(keys, 0) for rule in RULES}
    differ = []
    for name in sorted(expected):
        for rule in RULES:
            theirs, ours = expected[name][rule], actual[name][rule]
            f = figures[rule]
            f["documents"] += 1
            f["equal"] += theirs == ours
            f["both"] += (Counter(theirs) & Counter(ours)).total()  # two findings on one line count two
            f["markdownlint_only"] += (Counter(theirs) - Counter(ours)).total()
            f["docllm_only"] += (Counter(ours) - Counter(theirs)).total()
            if theirs != ours:
                differ.append(f"{name} {rule}: markdownlint {theirs}, docllm {ours}")
    return figures, differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", metavar="MARKDOWNLINT_CLI2", help="run markdownlint-cli2 and record its verdicts")
    args = parser.parse_args()
    if args.record:
        record(args.record)
    saved = json.loads(VERDICTS.read_text())
    figures, differ = compare(saved["verdicts"], docllm_verdicts())
    print(f"against {saved['markdownlint']}, {len(saved['verdicts'])} documents")
    print("| rule | documents agreeing | findings both report | markdownlint only | docllm only |")
    print("|---|---|---|---|---|")
    for rule, f in figures.items():
        counts = f"{f['both']} | {f['markdownlint_only']} | {f['docllm_only']}"
        print(f"| {rule} | {f['equal']}/{f['documents']} | {counts} |")
    for line in differ:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
