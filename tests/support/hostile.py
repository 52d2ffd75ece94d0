"""Documents whose code blocks are built to break a parser (issue 48): each must end as a finding."""

from __future__ import annotations

FENCE = "```"
DEEP = 100_000

HOSTILE = {
    "deep-json": f"# Deep JSON\n\nThe payload:\n\n{FENCE}json\n{'[' * DEEP}{']' * DEEP}\n{FENCE}\n\nAfter it.\n",
    "deep-yaml": f"# Deep YAML\n\nThe config:\n\n{FENCE}yaml\nkey: {'[' * DEEP}{']' * DEEP}\n{FENCE}\n\nAfter it.\n",
    "minus-python": f"# Minus signs\n\nThe code:\n\n{FENCE}python\nx = {'-' * DEEP}1\n{FENCE}\n\nAfter it.\n",
}
NEEDLE = "too deeply nested to check"
