"""JUnit XML, what Jenkins and GitLab show as tests: a testcase per document, a failure per finding
at or above the threshold (findings below it are listed in the case's output, not failed)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from xml.etree import ElementTree as ET

from docllm.domain.review.checking import Checked, at_or_above
from docllm.entrypoints.check_formats.rules import lines, rule_id

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    """Text XML 1.0 may hold: a document's control characters (a quote of it) would make the file unreadable."""
    return _NOT_XML.sub("\ufffd", text)


def render(results: Sequence[Checked], threshold: str) -> str:
    suites = ET.Element("testsuites", name="docllm check")
    suite = ET.SubElement(suites, "testsuite", name="docllm check", tests=str(len(results)))
    failures = 0
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="docllm.check", name=_x(r.path), file=_x(r.path))
        below = []
        for f in r.findings:
            start, _ = lines(f)
            where = f"{r.path}:{start}" if start else r.path
            line = f"{where}: {f['severity']} {f['category']}: {f['message']}"
            if at_or_above(f, threshold):
                failures += 1
                failure = ET.SubElement(case, "failure", message=_x(f["message"]), type=rule_id(f))
                failure.text = _x(line) + _x(f"\n{f['suggestion']}" if f.get("suggestion") else "")
            else:
                below.append(line)
        below += [
            f"{r.path}: {f['severity']} {f['category']} [dismissed: {f['dismissed']['reason']}]: {f['message']}"
            for f in r.dismissed
        ]
        if below:
            ET.SubElement(case, "system-out").text = _x("\n".join(below))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suites.set("tests", str(len(results)))
    suites.set("failures", str(failures))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
