"""What an LLM provider's response headers say about its rate limits (OpenAI's names, which most
compatible servers copy): ``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*`` and
``x-ratelimit-reset-*`` for requests and tokens (resets as durations such as ``1s``, ``6m0s``,
``20ms`` or plain seconds), ``retry-after-ms`` and ``Retry-After`` (seconds or an HTTP date). A
value that does not parse is ignored, never an error: headers are advice."""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

from docllm.domain.rate_limits import ProviderHints

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(raw: str | None) -> float | None:
    """``1s`` -> 1.0, ``6m0s`` -> 360.0, ``20ms`` -> 0.02, ``1.5`` -> 1.5; None when unreadable."""
    text = (raw or "").strip().lower()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _PART.findall(text)
    if not parts or "".join(n + unit for n, unit in parts) != text:
        return None
    return sum(float(n) * _SCALE[unit] for n, unit in parts)


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), when given."""
    date = headers.get("retry-after")
    for raw, scale in ((headers.get("retry-after-ms"), 0.001), (date, 1.0)):
        try:
            if raw:
                return max(0.0, float(raw) * scale)
        except ValueError:
            pass
    try:
        when = email.utils.parsedate_to_datetime(date).timestamp() if date else None
    except (TypeError, ValueError):
        return None
    return None if when is None else max(0.0, when - (time.time() if now is None else now))


def _count(raw: str | None) -> int | None:
    try:
        return max(0, int(float(raw))) if raw else None
    except ValueError:
        return None


def hints_from_headers(headers: Any) -> ProviderHints:
    """The hints in one response's headers (any mapping with case-insensitive ``get``)."""
    if headers is None:
        return ProviderHints()
    return ProviderHints(
        remaining_requests=_count(headers.get("x-ratelimit-remaining-requests")),
        remaining_tokens=_count(headers.get("x-ratelimit-remaining-tokens")),
        reset_requests_s=duration_seconds(headers.get("x-ratelimit-reset-requests")),
        reset_tokens_s=duration_seconds(headers.get("x-ratelimit-reset-tokens")),
        retry_after_s=retry_after_seconds(headers),
        limit_requests=_count(headers.get("x-ratelimit-limit-requests")),
        limit_tokens=_count(headers.get("x-ratelimit-limit-tokens")),
    )
