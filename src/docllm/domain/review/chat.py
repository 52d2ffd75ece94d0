"""A Chat Completions request and answer as plain dicts: the one place that builds a request's body,
reads an answer's text and usage, and says what an error status means. Pure, so the realtime
reviewer (adapters/llm/openai_reviewer.py) and the Batch API lines (domain/batches/lines.py,
domain/batches/results.py) send and read the very same shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from docllm.domain.errors import ConfigurationError, DocllmError, PermanentError, ProviderUnavailable
from docllm.domain.llm.rate_limits import MAX_COUNT, believed
from docllm.domain.review.answer_schema import ANSWER_SCHEMA, SCHEMA_NAME
from docllm.domain.review.chunking import Chunk, place_finding
from docllm.domain.review.prompt import PROMPT_VERSION
from docllm.domain.review.report import assembled

JSON_MODE = {"type": "json_object"}
STRICT_SCHEMA = {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": ANSWER_SCHEMA}}
# How the answer's form is asked for, strictest first: the answer schema enforced by the server,
# any JSON object, then the prompt's words alone (None: no response_format). A server that refuses
# a rung (a 400 about response_format) is asked with the next one from then on.
RUNGS: tuple[dict[str, Any] | None, ...] = (STRICT_SCHEMA, JSON_MODE, None)

# (name, raw, value, high) -> value when believed, else None. The adapter's also warns (provider_hints.bounded).
Bound = Callable[[str, object, float, float], float | None]


def _believed(name: str, raw: object, value: float, high: float) -> float | None:
    return believed(value, high)


def chat_body(model: str, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> dict[str, Any]:
    """The body of one chat completion request: what the realtime reviewer posts and a batch line carries."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if response_format is not None:
        body["response_format"] = response_format
    return body


def content(body: dict[str, Any]) -> str:
    """The first choice's message text; "" when there is none (the report's parse then asks for a repair)."""
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def reported_tokens(body: dict[str, Any] | None, bound: Bound = _believed) -> tuple[int, int, int] | None:
    """The answer's (prompt, completion, cached prompt) tokens; None when it reports none, or a
    prompt or completion count beyond belief (then none is kept: the request's estimate stays
    charged). A cached count beyond belief, or above the prompt's, counts as 0: full price."""
    usage = body.get("usage") if body is not None else None
    if not usage or not isinstance(usage, dict):
        return None
    counts = []
    for field in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = _count(f"usage.{field}", usage.get(field), bound)
        if value is None:
            return None
        counts.append(value)
    cached = _count(*cached_field(usage), bound) or 0
    return counts[0], counts[1], cached if cached <= counts[0] else 0


def cached_field(usage: dict[str, Any]) -> tuple[str, object]:
    """Where the server said how many prompt tokens its cache served: OpenAI's
    ``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``, Anthropic's
    ``cache_read_input_tokens`` (its OpenAI-compatible layer and proxies pass it on)."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return "usage.prompt_tokens_details.cached_tokens", details.get("cached_tokens")
    for field in ("prompt_cache_hit_tokens", "cache_read_input_tokens"):
        if usage.get(field) is not None:
            return f"usage.{field}", usage.get(field)
    return "usage.cached_tokens", 0


def _count(name: str, raw: object, bound: Bound) -> int | None:
    """A token count the server sent (nothing validated it), or None when beyond belief."""
    raw = raw or 0
    try:
        value = float(raw)  # type: ignore[arg-type]  # whatever it is: float() says
    except (TypeError, ValueError):
        value = math.nan
    return None if bound(name, raw, value, MAX_COUNT) is None else int(value)


def chunk_report(
    answer: dict[str, Any], chunk: Chunk, model: str, usage: dict[str, int], deployment: str | None = None
) -> dict[str, Any]:
    """One chunk's report from its parsed answer (``report.parse_answer``): findings placed in the
    whole document; ``merge_reports`` makes the document's report of these. Not checked again: the
    answer was, and a placed finding's location is ``report.location``'s (a second pass over every
    finding was 3 % of a worker's loop at C = 1,024)."""
    return assembled(
        [place_finding(f, chunk) for f in answer["findings"]],
        answer["summary"],
        "openai",
        model,
        chunks=1,
        usage=usage,
        prompt_version=PROMPT_VERSION,
        rubric_version=None,
        deployments=None if deployment is None else [deployment],
    )


def about_response_format(param: object, text: str) -> bool:
    """Whether a 400 refuses the ``response_format`` asked for (then the next rung is asked)."""
    return param == "response_format" or "response_format" in text or "json_schema" in text


def detail(message: object, secret: str = "") -> str:
    """An error message the server sent, one line, at most 300 characters, never the key: ": ..." or ""."""
    text = " ".join(str(message or "").split())[:300]
    if secret:
        text = text.replace(secret, "***")
    return f": {text}" if text else ""


def status_error(
    status: int,
    code: object,
    said: str,
    where: str,
    model: str,
    retry_after: float | None = None,
    no_key_hint: str = "",
) -> DocllmError:
    """What an HTTP error status of a chat completion means, as the domain's error (``said``: ``detail``'s).
    ``no_key_hint`` is added to a 401/403 when no key was set."""
    if status in (401, 403):
        return ConfigurationError(f"the LLM at {where} refused the credentials ({status}){no_key_hint}")
    if status == 429 and code == "insufficient_quota":  # billing, not load: waiting will not help
        return ConfigurationError(f"the LLM account at {where} has no quota left (429 insufficient_quota)")
    if status == 404:
        return ConfigurationError(f"the LLM at {where} does not serve model {model!r} (404){said}")
    if status in (408, 409, 429) or status >= 500:
        return ProviderUnavailable(f"the LLM answered {status}{said}", retry_after=retry_after)
    return PermanentError(f"the LLM refused the request ({status}){said}")
