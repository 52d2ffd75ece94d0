"""What an LLM provider's response headers say about its rate limits (OpenAI's names, which most
compatible servers copy): ``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*`` and
``x-ratelimit-reset-*`` for requests and tokens (resets as durations such as ``1s``, ``6m0s``,
``20ms`` or plain seconds), ``retry-after-ms`` and ``Retry-After`` (seconds or an HTTP date). A
value that does not parse is ignored, never an error: headers are advice. So is a number beyond
the bounds of ``domain.llm.rate_limits`` (NaN, inf, negative, absurdly large), with a warning once per
process and name: a broken header must not stop or unleash the fleet."""

from __future__ import annotations

import email.utils
import logging
import re
import time
from typing import Any

from docllm.domain.llm.rate_limits import MAX_COUNT, MAX_RESET_S, MAX_RETRY_AFTER_S, ProviderHints, believed

log = logging.getLogger(__name__)

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_warned: set[str] = set()  # the names already warned about


def bounded(name: str, raw: object, value: float | None, high: float) -> float | None:
    """``value`` (read from ``raw``) when from 0 to ``high``, else None and a warning (once per ``name``)."""
    if value is None or believed(value, high) is not None:
        return value
    if name not in _warned:
        _warned.add(name)
        log.warning("ignoring the LLM's %s of %r: beyond the range believed, 0 to %g (said once)", name, raw, high)
    return None


def duration_seconds(raw: str | None, name: str = "reset") -> float | None:
    """``1s`` -> 1.0, ``6m0s`` -> 360.0, ``20ms`` -> 0.02, ``1.5`` -> 1.5; None when unreadable
    or longer than ``MAX_RESET_S``."""
    text = (raw or "").strip().lower()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        parts = _PART.findall(text)
        if not parts or "".join(n + unit for n, unit in parts) != text:
            return None
        seconds = sum(float(n) * _SCALE[unit] for n, unit in parts)
    return bounded(name, raw, seconds, MAX_RESET_S)


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), the first
    given and at most ``MAX_RETRY_AFTER_S``."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        try:
            seconds = float(raw) * scale if raw else None
        except ValueError:
            seconds = _seconds_until(raw, now) if name == "retry-after" else None
        if (seconds := bounded(name, raw, seconds, MAX_RETRY_AFTER_S)) is not None:
            return seconds
    return None


def _seconds_until(date: str, now: float | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _count(headers: Any, name: str) -> int | None:
    raw = headers.get(name)
    try:
        value = bounded(name, raw, float(raw), MAX_COUNT) if raw else None
    except ValueError:
        return None
    return None if value is None else int(value)


def hints_from_headers(headers: Any) -> ProviderHints:
    """The hints in one response's headers (any mapping with case-insensitive ``get``)."""
    if headers is None:
        return ProviderHints()
    reset = "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"
    return ProviderHints(
        remaining_requests=_count(headers, "x-ratelimit-remaining-requests"),
        remaining_tokens=_count(headers, "x-ratelimit-remaining-tokens"),
        reset_requests_s=duration_seconds(headers.get(reset[0]), reset[0]),
        reset_tokens_s=duration_seconds(headers.get(reset[1]), reset[1]),
        retry_after_s=retry_after_seconds(headers),
        limit_requests=_count(headers, "x-ratelimit-limit-requests"),
        limit_tokens=_count(headers, "x-ratelimit-limit-tokens"),
    )
