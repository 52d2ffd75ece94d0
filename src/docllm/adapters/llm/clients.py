"""The openai client as docllm builds it, and its errors in the domain's terms: one place for the
realtime reviewer (``OpenAIReviewer``) and the Batch API (``OpenAIBatchApi``).

The client never retries (``max_retries=0``): docllm owns retries, bounded and with backoff.
"""

from __future__ import annotations

import re
from typing import Any

import openai

from docllm.adapters.llm.provider_hints import retry_after_seconds
from docllm.domain.errors import DocllmError, ProviderUnavailable, TransientError
from docllm.domain.review.chat import detail, status_error


def where_of(base_url: str | None) -> str:
    """The server as messages name it: no user or password."""
    return re.sub(r"//[^/@]*@", "//", base_url) if base_url else "the OpenAI API"


def client_options(base_url: str | None, api_key: str | None, timeout_seconds: float, max_retries: int = 0) -> dict:
    """What every docllm client is built with. Servers on a laptop often need no key, but the client
    insists on one."""
    return {
        "base_url": base_url or None,
        "api_key": api_key or "unset",
        "timeout": timeout_seconds,
        "max_retries": max_retries,
    }


def sync_client(base_url: str | None, api_key: str | None, timeout_seconds: float) -> openai.OpenAI:
    """A blocking client (the Batch API's few calls run in the loops' port threads)."""
    return openai.OpenAI(**client_options(base_url, api_key, timeout_seconds))


def translate(
    e: openai.OpenAIError,
    where: str,
    timeout_seconds: float,
    key: str,
    model: str,
    timed_out: bool = True,
) -> DocllmError:
    """The domain's error for a client error. ``timed_out``: an ``APITimeoutError`` really timed
    out (the aiohttp transport reports a refused connection as one; the reviewer knows which)."""
    if isinstance(e, openai.APITimeoutError) and timed_out:
        return ProviderUnavailable(f"the LLM at {where} did not answer within {timeout_seconds:g} s")
    if isinstance(e, openai.APIConnectionError):  # APITimeoutError's base: so a refused one lands here
        return ProviderUnavailable(f"cannot reach the LLM at {where}")
    if not isinstance(e, openai.APIStatusError):
        return TransientError(f"LLM client error: {type(e).__name__}")
    body: Any = e.body
    said = detail(body.get("message") if isinstance(body, dict) else body, key)
    hint = "" if key else "; no API key is set (DOCLLM_LLM_API_KEY or OPENAI_API_KEY)"
    retry_after = (
        retry_after_seconds(e.response.headers) if e.status_code in (408, 409, 429) or e.status_code >= 500 else None
    )
    return status_error(e.status_code, e.code, said, where, model, retry_after, hint)
