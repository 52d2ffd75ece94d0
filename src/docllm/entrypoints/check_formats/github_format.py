"""GitHub Actions workflow commands: one ``::error file=...,line=...,title=...::message`` per finding,
shown as an annotation on the line in the pull request's diff."""

from __future__ import annotations

from collections.abc import Sequence

from docllm.domain.review.checking import Checked
from docllm.entrypoints.check_formats.rules import GITHUB_LEVEL, lines, title


def _data(text: str) -> str:
    # The escapes of @actions/core's issueCommand: a message may span lines, a property may not hold , or :
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(results: Sequence[Checked], threshold: str) -> str:
    out = []
    for r in results:
        for f in r.findings:
            start, end = lines(f)
            props = [f"file={_prop(r.path)}"]
            if start:
                props += [f"line={start}", f"endLine={end or start}"]
            props.append(f"title={_prop('docllm: ' + title(f))}")
            message = f["message"] + (f"\n{f['suggestion']}" if f.get("suggestion") else "")
            out.append(f"::{GITHUB_LEVEL[f['severity']]} {','.join(props)}::{_data(message)}")
    return "".join(line + "\n" for line in out)
