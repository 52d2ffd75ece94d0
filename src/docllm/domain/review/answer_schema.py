"""The one definition of a reviewer's answer: ``{"findings": [...], "summary": "..."}`` as JSON Schema.

The LLM reviewer sends it as its strict ``response_format`` and ``report.validate_answer`` checks
every answer against it, whichever way the server was asked. It keeps to what strict structured
output accepts: every object closes its properties (``additionalProperties: false``) and requires
all of them; a field that may be absent is nullable (``["integer", "null"]``), never optional.

Bump ``SCHEMA_VERSION`` with any change to the schema: reports record the version they were
checked against (tests/unit/test_answer_schema.py holds the digest of each version).
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1
SCHEMA_NAME = "docllm_findings"  # the name a server shows for the schema: [a-zA-Z0-9_-], at most 64

CATEGORIES = (
    "correctness",
    "consistency",
    "completeness",
    "clarity",
    "formatting",
    "links",
    "code",
    "style",
    "security",
    "other",
)
SEVERITIES = ("low", "medium", "high", "critical")


def _closed(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object of exactly these properties, all required (strict mode's rule)."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_LINE = {"type": ["integer", "null"], "minimum": 1}

LOCATION_SCHEMA = _closed(heading={"type": "string"}, line_start=_LINE, line_end=_LINE)

FINDING_SCHEMA = _closed(
    category={"type": "string", "enum": list(CATEGORIES)},
    severity={"type": "string", "enum": list(SEVERITIES)},
    location=LOCATION_SCHEMA,
    quote={"type": "string"},
    message={"type": "string"},
    suggestion={"type": "string"},
    # Which check produced it ("rubric:install-guide/banned-terms"); null when none named one.
    check={"type": ["string", "null"]},
)

ANSWER_SCHEMA = _closed(findings={"type": "array", "items": FINDING_SCHEMA}, summary={"type": "string"})
