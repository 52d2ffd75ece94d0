"""A rubric's YAML to a ``Rubric``; every error names the file and the line of the value at fault.

The file is composed to nodes (``yaml.compose``), not loaded to plain values, because only nodes
keep their marks (line numbers). The format is in docs/RUBRICS.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from docllm.domain.errors import RubricError
from docllm.domain.rubric import (
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


class _Bad(Exception):
    def __init__(self, node: yaml.Node | None, why: str):
        super().__init__(why)
        self.line = node.start_mark.line + 1 if node is not None else 1


def _scalar(node: yaml.Node, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise _Bad(
            node, f"{what} must be a single value, not a {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}"
        )
    return str(node.value)


def _text(node: yaml.Node, what: str) -> str:
    value = _scalar(node, what)
    if not value.strip():
        raise _Bad(node, f"{what} must not be empty")
    return value


def _int(node: yaml.Node, what: str) -> int:
    value = _scalar(node, what)
    if not value.strip().isdigit():
        raise _Bad(node, f"{what} must be a whole number, got {value!r}")
    return int(value)


def _bool(node: yaml.Node, what: str) -> bool:
    value = _scalar(node, what).lower()
    if value not in ("true", "false", "yes", "no", "on", "off"):
        raise _Bad(node, f"{what} must be true or false, got {value!r}")
    return value in ("true", "yes", "on")


def _texts(node: yaml.Node, what: str) -> tuple[str, ...]:
    if not isinstance(node, yaml.SequenceNode):
        raise _Bad(node, f"{what} must be a list")
    return tuple(_text(item, f"an item of {what}") for item in node.value)


def _pairs(node: yaml.Node, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, yaml.MappingNode):
        raise _Bad(node, f"{what} must be a mapping of term to preferred term")
    return tuple((_text(k, f"a term of {what}"), _text(v, f"the preferred term of {what}")) for k, v in node.value)


def _mapping(node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """Keys to (key node, value node); an unknown or repeated key is an error at its line."""
    if not isinstance(node, yaml.MappingNode):
        raise _Bad(node, f"{what} must be a mapping")
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key, value in node.value:
        name = _scalar(key, "a key")
        if name not in allowed:
            raise _Bad(key, f"unknown key {name!r} in {what} (known: {', '.join(allowed)})")
        if name in out:
            raise _Bad(key, f"key {name!r} appears twice in {what}")
        out[name] = (key, value)
    return out


COMMON = ("id", "kind", "severity")
# kind -> (its own keys, how their values are read, the check class)
KINDS: dict[str, tuple[dict[str, Callable[[yaml.Node, str], Any]], Callable[..., Check]]] = {
    "required-sections": ({"sections": _texts, "applies_to": _texts}, RequiredSections),
    "banned-terms": ({"terms": _texts}, BannedTerms),
    "preferred-terms": ({"replacements": _pairs}, PreferredTerms),
    "name-spellings": ({"names": _texts}, NameSpellings),
    "sentence-length": ({"max_words": _int}, SentenceLength),
    "links": ({"enabled": _bool}, lambda **kw: BuiltinCheck(kind="links", **kw)),
    "code-blocks": ({"enabled": _bool, "languages": _texts}, lambda **kw: BuiltinCheck(kind="code-blocks", **kw)),
    "instruction": ({"text": _text}, Instruction),
}
REQUIRED = {"required-sections": "sections", "banned-terms": "terms", "preferred-terms": "replacements"}
REQUIRED |= {"name-spellings": "names", "instruction": "text"}


def _check(node: yaml.Node) -> Check:
    if not isinstance(node, yaml.MappingNode):
        raise _Bad(node, "each check must be a mapping with id and kind")
    kind_node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "kind"), None)
    if kind_node is None:
        raise _Bad(node, f"a check needs a kind ({', '.join(KINDS)})")
    kind = _scalar(kind_node, "kind")
    if kind not in KINDS:
        raise _Bad(kind_node, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    readers, make = KINDS[kind]
    fields = _mapping(node, f"a {kind} check", COMMON + tuple(readers))
    if "id" not in fields:
        raise _Bad(node, "a check needs an id")
    if kind in REQUIRED and REQUIRED[kind] not in fields:
        raise _Bad(node, f"a {kind} check needs {REQUIRED[kind]}")
    if kind in ("links", "code-blocks") and "severity" in fields:
        raise _Bad(fields["severity"][0], f"a {kind} check keeps the severities of the built-in one")
    values: dict[str, Any] = {"id": _text(fields["id"][1], "id")}
    if "severity" in fields:
        values["severity"] = _text(fields["severity"][1], "severity").lower()
    for name, read in readers.items():
        if name in fields:
            values[name] = read(fields[name][1], name)
    try:
        return make(**values)
    except ValueError as exc:
        raise _Bad(node, str(exc)) from None


def _rubric(root: yaml.Node | None, stem: str) -> Rubric:
    if root is None:
        raise _Bad(None, "the file is empty")
    fields = _mapping(root, "a rubric", ("name", "version", "description", "checks"))
    if "name" in fields and _text(fields["name"][1], "name") != stem:
        raise _Bad(fields["name"][1], f"name must be the file's name without .yaml ({stem!r})")
    if "version" not in fields:
        raise _Bad(root, "a rubric needs a version")
    if "checks" not in fields or not isinstance(fields["checks"][1], yaml.SequenceNode):
        raise _Bad(fields.get("checks", (root, root))[1], "a rubric needs checks: a list")
    checks: list[Check] = []
    for item in fields["checks"][1].value:
        checks.append(_check(item))
        if any(c.id == checks[-1].id for c in checks[:-1]):
            raise _Bad(item, f"check id {checks[-1].id!r} is used twice")
    description = _scalar(fields["description"][1], "description") if "description" in fields else ""
    try:
        return Rubric(stem, _text(fields["version"][1], "version"), tuple(checks), description)
    except ValueError as exc:
        raise _Bad(root, str(exc)) from None


def parse_rubric(text: str, path: str, stem: str) -> Rubric:
    """``path`` is what errors name; ``stem`` the rubric's name (its file's, without .yaml)."""
    try:
        return _rubric(yaml.compose(text, Loader=yaml.SafeLoader), stem)
    except _Bad as bad:
        raise RubricError(f"{path}:{bad.line}: {bad}") from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise RubricError(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RubricError(f"{path}:1: not valid YAML: {exc}") from None
