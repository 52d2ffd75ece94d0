"""OpenAIBatchApi: the BatchApi port over the openai client's Files and Batch APIs (issue 28).

Blocking on purpose: a batch costs a handful of calls per poll, made by the batch lane's loops in
their port threads like every other port call (and inline on virtual time in the simulation).
The client is built and its errors translated as the realtime reviewer's (``clients.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import openai

from docllm.adapters.llm.clients import sync_client, translate, where_of
from docllm.domain.batches.lines import ENDPOINT
from docllm.domain.batches.model import ProviderBatch
from docllm.domain.errors import BatchFileLost, DocllmError

WINDOW: Literal["24h"] = "24h"
REF_KEY = "docllm_ref"
LIST_PAGE = 100
LIST_PAGES = 20  # adoption looks at the newest 2,000 batches: a batch to adopt is minutes old


class OpenAIBatchApi:
    def __init__(self, base_url: str | None, api_key: str | None, model: str, timeout_seconds: float = 60.0):
        self.model = model
        self._key, self._where, self._timeout = api_key or "", where_of(base_url), timeout_seconds
        self._client = sync_client(base_url, api_key, timeout_seconds)

    def close(self) -> None:
        self._client.close()

    def _error(self, e: openai.OpenAIError) -> DocllmError:
        return translate(e, self._where, self._timeout, self._key, self.model)

    def upload(self, jsonl: bytes, name: str) -> str:
        try:
            return str(self._client.files.create(file=(name, jsonl), purpose="batch").id)
        except openai.OpenAIError as e:
            raise self._error(e) from None

    def create(self, input_file_id: str, ref: str) -> ProviderBatch:
        try:
            made = self._client.batches.create(
                input_file_id=input_file_id,
                endpoint=ENDPOINT,  # type: ignore[arg-type]  # the SDK's Literal of endpoints
                completion_window=WINDOW,
                metadata={REF_KEY: ref},
            )
        except openai.OpenAIError as e:
            raise self._error(e) from None
        return _batch(made)

    def retrieve(self, batch_id: str) -> ProviderBatch:
        try:
            return _batch(self._client.batches.retrieve(batch_id))
        except openai.OpenAIError as e:
            raise self._error(e) from None

    def find(self, ref: str) -> ProviderBatch | None:
        try:
            page = self._client.batches.list(limit=LIST_PAGE)
            for _ in range(LIST_PAGES):
                for found in page.data:
                    if (found.metadata or {}).get(REF_KEY) == ref:
                        return _batch(found)
                if not page.has_next_page():
                    return None
                page = page.get_next_page()
        except openai.OpenAIError as e:
            raise self._error(e) from None
        return None

    def cancel(self, batch_id: str) -> None:
        try:
            self._client.batches.cancel(batch_id)
        except (openai.NotFoundError, openai.ConflictError, openai.BadRequestError):
            return  # gone, or already ended (a cancel is only ever to stop paying for it)
        except openai.OpenAIError as e:
            raise self._error(e) from None

    def content(self, file_id: str) -> list[str]:
        try:
            text = self._client.files.content(file_id).text
        except openai.NotFoundError:
            raise BatchFileLost(f"the batch file {file_id} is gone from the LLM at {self._where} (404)") from None
        except openai.OpenAIError as e:
            raise self._error(e) from None
        return text.splitlines()


def _batch(raw: Any) -> ProviderBatch:
    metadata = raw.metadata or {}
    return ProviderBatch(
        id=str(raw.id),
        status=str(raw.status),
        input_file_id=raw.input_file_id,
        output_file_id=raw.output_file_id,
        error_file_id=raw.error_file_id,
        ref=metadata.get(REF_KEY),
        error=_first_error(raw),
    )


def _first_error(raw: Any) -> str | None:
    """The first of a failed batch's errors (``token_limit_exceeded``: over the enqueued-token limit)."""
    data = getattr(getattr(raw, "errors", None), "data", None) or []
    first = data[0] if data else None
    if first is None:
        return None
    said = ": ".join(str(x) for x in (getattr(first, "code", None), getattr(first, "message", None)) if x)
    return said[:300] or None
