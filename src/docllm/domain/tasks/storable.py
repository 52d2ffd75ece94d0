"""Values in a form every supported database stores (issue 44).

A model's answer may hold a lone surrogate: ``"\\ud800"`` is valid JSON, ``json.loads`` makes it a
code point that no UTF-8 column accepts (SQLite and PyMySQL refuse the whole statement, so one
answer would roll back every commit grouped with it). A report is stored with each such code point
replaced by U+FFFD, and says how many were (``REPLACED_KEY``); an error text is stored replaced and
cut to a length every ``TEXT`` column holds.
"""

from __future__ import annotations

import re
from typing import Any

# A Python str never holds a surrogate pair (json.loads joins a valid pair into one code point):
# any code point in this range is a lone surrogate.
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
# The report's count of the characters replaced for storage (absent when none was).
REPLACED_KEY = "replaced_characters"
# MySQL's TEXT holds 65,535 bytes; 4 bytes a character at most in utf8mb4.
MAX_ERROR_CHARS = 16_000


def storable_text(text: str) -> tuple[str, int]:
    """``text`` with its lone surrogates replaced, and how many were."""
    if text.isascii():
        return text, 0
    return _SURROGATE.subn(REPLACEMENT, text)


def lone_surrogate_at(text: str) -> int | None:
    """Where ``text``'s first lone surrogate is (None: it has none)."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def _storable(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        out, n = {}, 0
        for key, item in value.items():
            key, k = storable_text(key) if isinstance(key, str) else (key, 0)
            out[key], i = _storable(item)
            n += k + i
        return (out, n) if n else (value, 0)
    if isinstance(value, list):
        pairs = [_storable(item) for item in value]
        n = sum(i for _, i in pairs)
        return ([item for item, _ in pairs], n) if n else (value, 0)
    return value, 0


def storable_report(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` as every supported database stores it: unchanged (the same object) when it
    already is, else with its lone surrogates replaced and their count under ``REPLACED_KEY``."""
    stored, replaced = _storable(report)
    if not replaced:
        return report
    return {**stored, REPLACED_KEY: replaced}


def storable_error(error: str) -> str:
    """An error text as every supported database stores it: lone surrogates replaced, cut to
    ``MAX_ERROR_CHARS``."""
    error = storable_text(error)[0]
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"
