"""Links that cannot work: anchors the document lacks, undefined references, empty or spaced targets.

Other files are out of reach (a task holds one document), so only what the document itself
decides is checked. Anchors are GitHub's: lowercase, punctuation dropped, spaces to dashes,
``-1``, ``-2`` for repeats; ``{#id}`` on a heading and HTML ``id``/``name`` attributes count too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from docllm.adapters.offline.checks.document import Doc

_INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)]*)\)")
_REFERENCE = re.compile(r"!?\[([^\]]+)\]\[([^\]]*)\]")
_DEFINITION = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*\S")
_HTML_ID = re.compile(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""")
_CUSTOM_ID = re.compile(r"\s*\{#([^}]+)\}\s*$")


def slug(text: str) -> str:
    text = re.sub(r"[^\w\- ]", "", _CUSTOM_ID.sub("", text).strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Doc) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for h in doc.outline.headings:
        custom = _CUSTOM_ID.search(h.text)
        base = custom.group(1) if custom else slug(h.text)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found | {m.group(1) for _, line in doc.prose() for m in _HTML_ID.finditer(line)}


def _label(text: str) -> str:
    return " ".join(text.lower().split())


def broken_links(doc: Doc) -> Iterator[dict[str, Any]]:
    known = anchors(doc)
    defined = {_label(m.group(1)) for _, line in doc.prose() if (m := _DEFINITION.match(line))}
    fix = "Point the link at an existing heading or define its target."
    for no, line in doc.prose():
        for m in _INLINE.finditer(line):
            target = m.group(2).strip()
            if target.startswith("<") and target.endswith(">"):
                continue  # <...> allows spaces; anything there is the author's choice
            target = re.sub(r"""\s+(["'(]).*$""", "", target)  # drop a title: [x](url "title")
            if not target:
                yield doc.finding(
                    "links", "medium", f"Link {m.group(0)!r} has no target.", no, quote=m.group(0), suggestion=fix
                )
            elif " " in target:
                yield doc.finding(
                    "links",
                    "medium",
                    f"Link target {target!r} contains a space: it will not render.",
                    no,
                    quote=m.group(0),
                    suggestion="Encode spaces as %20 or wrap the target in <>.",
                )
            elif target.startswith("#") and target[1:].lower() not in known and target[1:] not in known:
                yield doc.finding(
                    "links",
                    "medium",
                    f"Anchor {target!r} matches no heading in this document.",
                    no,
                    quote=m.group(0),
                    suggestion=fix,
                )
        for m in _REFERENCE.finditer(line):
            label = _label(m.group(2) or m.group(1))
            if label not in defined:
                yield doc.finding(
                    "links",
                    "medium",
                    f"Reference link [{label}] is never defined.",
                    no,
                    quote=m.group(0),
                    suggestion=fix,
                )
