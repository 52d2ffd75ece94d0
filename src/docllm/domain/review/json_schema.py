"""A validator for the small part of JSON Schema that strict structured output allows.

The answer schema (``answer_schema.py``) is sent to the server and checked here, so the two read
the same rule. jsonschema would do this too, at the cost of a dependency for one schema; this
knows only the keywords below and refuses any other, so the schema cannot grow a rule that the
server enforces and this silently skips.
"""

from __future__ import annotations

from typing import Any

_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "minimum", "description"}
_TYPES: dict[str, tuple[str, Any]] = {
    "object": ("an object", dict),
    "array": ("a list", list),
    "string": ("a string", str),
    "integer": ("an integer", int),
    "number": ("a number", (int, float)),
    "boolean": ("true or false", bool),
    "null": ("null", type(None)),
}


def check(schema: dict[str, Any], value: Any, where: str = "") -> None:
    """ValueError naming the first place (``findings[0].severity``) where ``value`` breaks ``schema``;
    TypeError when the schema uses a keyword this does not check."""
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise TypeError(f"the schema at {where} uses keywords this validator does not know: {sorted(unknown)}")
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is(value, name) for name in names):
            wanted = " or ".join(_TYPES[n][0] for n in names)
            raise ValueError(f"{where or 'the answer'} must be {wanted}, got {_name(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError(f"{where} must be one of {', '.join(map(str, schema['enum']))}; got {value!r}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        raise ValueError(f"{where} must be at least {schema['minimum']}, got {value!r}")
    if isinstance(value, dict):
        _check_object(schema, value, where)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(schema["items"], item, f"{where}[{i}]")


def _check_object(schema: dict[str, Any], value: dict[str, Any], where: str) -> None:
    properties = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            raise ValueError(f"{_at(where, key)} is missing")
    if schema.get("additionalProperties", True) is False:
        extra = [key for key in value if key not in properties]
        if extra:
            raise ValueError(f"{_at(where, extra[0])} is not a field of the schema")
    for key, sub in properties.items():
        if key in value:
            check(sub, value[key], _at(where, key))


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):  # True is an int to Python, not to JSON
        return False
    return isinstance(value, _TYPES[name][1])


def _name(value: Any) -> str:
    for name in _TYPES:
        if _is(value, name):
            return "list" if name == "array" else name  # the word the messages use for an array
    return type(value).__name__


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
