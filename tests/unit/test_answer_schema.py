"""The answer schema is one strict-mode schema, and its version and the prompt's move with their text."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from docllm.domain.review import prompt
from docllm.domain.review.answer_schema import ANSWER_SCHEMA, SCHEMA_VERSION

# The digest of each version's text. A change to the schema or the prompt fails here until its
# version is bumped and the new digest added: reports name the version, so it must name one text.
SCHEMA_DIGESTS = {1: "b8b6b1e684b3e4db"}  # v1 gained `check` (rubrics) before any release
PROMPT_DIGESTS = {1: "ddaa7dbf66d71f96"}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    found = [schema] if schema.get("type") == "object" else []
    for sub in [*schema.get("properties", {}).values(), *([schema["items"]] if "items" in schema else [])]:
        found += objects(sub)
    return found


def test_every_object_is_closed_and_requires_all_its_properties():
    assert len(objects(ANSWER_SCHEMA)) == 3  # the answer, a finding, a location
    for obj in objects(ANSWER_SCHEMA):
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])


def test_the_schema_version_names_this_schema():
    assert SCHEMA_DIGESTS[SCHEMA_VERSION] == digest(ANSWER_SCHEMA)


def test_the_prompt_version_names_this_prompt():
    words = [
        prompt.SYSTEM_PROMPT,
        prompt.build_messages("name", "# Title\ntext", "A > B", 2, 3),
        prompt.repair_messages([], "answer", "problem"),
    ]
    assert PROMPT_DIGESTS[prompt.PROMPT_VERSION] == digest(words)
