"""Links that cannot work: anchors the document lacks, undefined references, empty or spaced targets.

Other files are out of reach (a task holds one document), so only what the document itself
decides is checked. Anchors are GitHub's (checks/markdown.py); a fragment is compared after
percent-decoding and with its case, as a browser does; ``#top`` and GitHub's line fragments
(``#L12``, ``#L3-L9``) always resolve.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from docllm.adapters.offline.checks.document import Doc
from docllm.adapters.offline.checks.markdown import label

# What CommonMark left as text: a link whose target holds a space, a reference to no definition.
_SPACED = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()<>]*\s[^()<>]*)\)")
_REFERENCE = re.compile(r"!?\[([^\]]+)\]\[([^\]]*)\]")
_LINE_FRAGMENT = re.compile(r"L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?")
_FIX = "Point the link at an existing heading or define its target."


def broken_links(doc: Doc) -> Iterator[dict[str, Any]]:
    known = doc.md.anchors
    lower = {a.lower(): a for a in known}
    found: list[tuple[int, dict[str, Any]]] = []
    by_definition = {d.href for d in doc.md.definitions}  # a reference's fragment is checked at its definition
    for link in [*(x for x in doc.md.links if x.href not in by_definition), *doc.md.definitions]:
        quote = link.text
        if not link.href.strip():
            found.append(
                (
                    link.line,
                    doc.finding(
                        "links", "medium", f"Link {quote!r} has no target.", link.line, quote=quote, suggestion=_FIX
                    ),
                )
            )
            continue
        if not link.href.startswith("#") or len(link.href) < 2:
            continue
        fragment = unquote(link.href[1:])
        if fragment in known or fragment == "top" or _LINE_FRAGMENT.fullmatch(fragment):
            continue
        if fragment.lower() in lower:
            message = (
                f"Anchor '#{fragment}' differs in case from '#{lower[fragment.lower()]}': fragments are case-sensitive."
            )
        else:
            message = f"Anchor '#{fragment}' matches no heading in this document."
        found.append((link.line, doc.finding("links", "medium", message, link.line, quote=quote, suggestion=_FIX)))
    for prose in doc.md.prose:
        for m in _SPACED.finditer(prose.text):
            line = prose.line_of(m.start())
            target = m.group(2).strip()
            if re.search(r"""\s(["'(]).*$""", target) or not target:
                continue  # a title: [x](url "title") would have been a link
            found.append(
                (
                    line,
                    doc.finding(
                        "links",
                        "medium",
                        f"Link target {target!r} contains a space: it will not render.",
                        line,
                        quote=m.group(0),
                        suggestion="Encode spaces as %20 or wrap the target in <>.",
                    ),
                )
            )
        for m in _REFERENCE.finditer(prose.text):
            name = label(m.group(2) or m.group(1))
            if name not in doc.md.references:
                line = prose.line_of(m.start())
                found.append(
                    (
                        line,
                        doc.finding(
                            "links",
                            "medium",
                            f"Reference link [{name}] is never defined.",
                            line,
                            quote=m.group(0),
                            suggestion=_FIX,
                        ),
                    )
                )
    for _, f in sorted(found, key=lambda x: x[0]):
        yield f
