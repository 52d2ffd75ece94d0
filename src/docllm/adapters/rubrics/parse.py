"""A rubric's YAML to a ``Rubric``; every error names the file and the line of the value at fault.

Read with ``adapters.yaml_nodes`` (nodes keep their line numbers). The format is in docs/RUBRICS.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from docllm.adapters.yaml_nodes import Bad, mapping, placed, scalar, text, whole_number
from docllm.domain.errors import RubricError
from docllm.domain.review.rubric import (
    BannedTerms,
    BuiltinCheck,
    Check,
    Instruction,
    NameSpellings,
    PreferredTerms,
    RequiredSections,
    Rubric,
    SentenceLength,
)

MAX_RUBRIC_BYTES = 256 * 1024


def _bool(node: yaml.Node, what: str) -> bool:
    value = scalar(node, what).lower()
    if value not in ("true", "false", "yes", "no", "on", "off"):
        raise Bad(node, f"{what} must be true or false, got {value!r}")
    return value in ("true", "yes", "on")


def _texts(node: yaml.Node, what: str) -> tuple[str, ...]:
    if not isinstance(node, yaml.SequenceNode):
        raise Bad(node, f"{what} must be a list")
    return tuple(text(item, f"an item of {what}") for item in node.value)


def _pairs(node: yaml.Node, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, yaml.MappingNode):
        raise Bad(node, f"{what} must be a mapping of term to preferred term")
    return tuple((text(k, f"a term of {what}"), text(v, f"the preferred term of {what}")) for k, v in node.value)


COMMON = ("id", "kind", "severity")
# kind -> (its own keys, how their values are read, the check class)
KINDS: dict[str, tuple[dict[str, Callable[[yaml.Node, str], Any]], Callable[..., Check]]] = {
    "required-sections": ({"sections": _texts, "applies_to": _texts}, RequiredSections),
    "banned-terms": ({"terms": _texts}, BannedTerms),
    "preferred-terms": ({"replacements": _pairs}, PreferredTerms),
    "name-spellings": ({"names": _texts}, NameSpellings),
    "sentence-length": ({"max_words": whole_number}, SentenceLength),
    "links": ({"enabled": _bool}, lambda **kw: BuiltinCheck(kind="links", **kw)),
    "code-blocks": ({"enabled": _bool, "languages": _texts}, lambda **kw: BuiltinCheck(kind="code-blocks", **kw)),
    "markers": ({"enabled": _bool, "in_code": _bool}, lambda **kw: BuiltinCheck(kind="markers", **kw)),
    "instruction": ({"text": text}, Instruction),
}
REQUIRED = {"required-sections": "sections", "banned-terms": "terms", "preferred-terms": "replacements"}
REQUIRED |= {"name-spellings": "names", "instruction": "text"}


def _check(node: yaml.Node) -> Check:
    if not isinstance(node, yaml.MappingNode):
        raise Bad(node, "each check must be a mapping with id and kind")
    kind_node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "kind"), None)
    if kind_node is None:
        raise Bad(node, f"a check needs a kind ({', '.join(KINDS)})")
    kind = scalar(kind_node, "kind")
    if kind not in KINDS:
        raise Bad(kind_node, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    readers, make = KINDS[kind]
    fields = mapping(node, f"a {kind} check", COMMON + tuple(readers))
    if "id" not in fields:
        raise Bad(node, "a check needs an id")
    if kind in REQUIRED and REQUIRED[kind] not in fields:
        raise Bad(node, f"a {kind} check needs {REQUIRED[kind]}")
    if kind in ("links", "code-blocks", "markers") and "severity" in fields:
        raise Bad(fields["severity"][0], f"a {kind} check keeps the severities of the built-in one")
    values: dict[str, Any] = {"id": text(fields["id"][1], "id")}
    if "severity" in fields:
        values["severity"] = text(fields["severity"][1], "severity").lower()
    for name, read in readers.items():
        if name in fields:
            values[name] = read(fields[name][1], name)
    try:
        return make(**values)
    except ValueError as exc:
        raise Bad(node, str(exc)) from None


def _rubric(root: yaml.Node | None, stem: str) -> Rubric:
    if root is None:
        raise Bad(None, "the file is empty")
    fields = mapping(root, "a rubric", ("name", "version", "description", "checks"))
    if "name" in fields and text(fields["name"][1], "name") != stem:
        raise Bad(fields["name"][1], f"name must be the file's name without .yaml ({stem!r})")
    if "version" not in fields:
        raise Bad(root, "a rubric needs a version")
    if "checks" not in fields or not isinstance(fields["checks"][1], yaml.SequenceNode):
        raise Bad(fields.get("checks", (root, root))[1], "a rubric needs checks: a list")
    checks: list[Check] = []
    for item in fields["checks"][1].value:
        checks.append(_check(item))
        if any(c.id == checks[-1].id for c in checks[:-1]):
            raise Bad(item, f"check id {checks[-1].id!r} is used twice")
    description = scalar(fields["description"][1], "description") if "description" in fields else ""
    try:
        return Rubric(stem, text(fields["version"][1], "version"), tuple(checks), description)
    except ValueError as exc:
        raise Bad(root, str(exc)) from None


def parse_rubric(content: str, path: str, stem: str) -> Rubric:
    """``path`` is what errors name; ``stem`` the rubric's name (its file's, without .yaml)."""
    return placed(content, path, lambda root: _rubric(root, stem), RubricError)
