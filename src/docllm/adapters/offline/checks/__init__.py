"""Deterministic document checks that need no model; each is ``check(doc) -> findings``."""

from docllm.adapters.offline.checks.code_blocks import unparsable_code
from docllm.adapters.offline.checks.document import Doc
from docllm.adapters.offline.checks.links import broken_links
from docllm.adapters.offline.checks.prose import long_sentences, markers
from docllm.adapters.offline.checks.structure import (
    duplicate_headings,
    empty_sections,
    heading_levels,
    unclosed_fences,
    unreadable,
)

CHECKS = (
    unreadable,
    markers,
    empty_sections,
    heading_levels,
    duplicate_headings,
    unclosed_fences,
    unparsable_code,
    broken_links,
    long_sentences,
)

__all__ = ["CHECKS", "Doc"]
