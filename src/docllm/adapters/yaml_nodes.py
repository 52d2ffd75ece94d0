"""Reading small YAML files whose every error names the file and the line of the value at fault
(rubrics, eval expectations).

A file is composed to nodes (``yaml.compose``), not loaded to plain values, because only nodes
keep their marks (line numbers). A reader raises ``Bad(node, why)``; ``compose_located`` and
``placed`` turn that, or a YAML syntax error, into the caller's error type as ``path:line: why``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import yaml

T = TypeVar("T")


class Bad(Exception):
    def __init__(self, node: yaml.Node | None, why: str):
        super().__init__(why)
        self.line = node.start_mark.line + 1 if node is not None else 1


def scalar(node: yaml.Node, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise Bad(
            node, f"{what} must be a single value, not a {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}"
        )
    return str(node.value)


def text(node: yaml.Node, what: str) -> str:
    value = scalar(node, what)
    if not value.strip():
        raise Bad(node, f"{what} must not be empty")
    return value


def whole_number(node: yaml.Node, what: str) -> int:
    value = scalar(node, what)
    if not value.strip().isdigit():
        raise Bad(node, f"{what} must be a whole number, got {value!r}")
    return int(value)


def mapping(node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """Keys to (key node, value node); an unknown or repeated key is an error at its line."""
    if not isinstance(node, yaml.MappingNode):
        raise Bad(node, f"{what} must be a mapping")
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key, value in node.value:
        name = scalar(key, "a key")
        if name not in allowed:
            raise Bad(key, f"unknown key {name!r} in {what} (known: {', '.join(allowed)})")
        if name in out:
            raise Bad(key, f"key {name!r} appears twice in {what}")
        out[name] = (key, value)
    return out


def placed(content: str, path: str, read: Callable[[yaml.Node | None], T], error: type[Exception]) -> T:
    """``read`` of the composed ``content``; any error raised as ``error("path:line: why")``."""
    try:
        return read(yaml.compose(content, Loader=yaml.SafeLoader))
    except Bad as bad:
        raise error(f"{path}:{bad.line}: {bad}") from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise error(f"{path}:{line}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}:1: not valid YAML: {exc}") from None
