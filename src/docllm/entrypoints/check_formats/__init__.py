"""``docllm check``'s output formats, one module each: ``render(results, threshold) -> str``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from docllm.domain.review.checking import Checked

Render = Callable[[Sequence[Checked], str], str]
FORMATS = ("text", "json", "sarif", "junit", "github", "rdjson")


def writer(name: str) -> Render:
    from importlib import import_module

    return import_module(f"docllm.entrypoints.check_formats.{name}_format").render
