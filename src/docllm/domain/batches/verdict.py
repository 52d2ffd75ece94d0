"""A batch line that did not answer, as the facts the one model of an attempt's end judges
(``verdict.decide``): the same error as a realtime request with that status (``chat.status_error``),
and the batch itself standing in for the LLM gate's judgement.

- A line of a batch that served other lines (``served``): the provider answers, so the failure is
  judged as realtime's when the provider answers its check: a 400 (context too long, an invalid
  request) is the document's and fails it; a 401/403/404 is the document's too (charged); a 5xx or
  429 is handed back, counted towards DOCLLM_MAX_HANDBACKS (I12), charged past it; an invalid answer
  is charged (a batch cannot ask for a repair).
- A batch that served no line: every failure is the provider's or the configuration's, handed back
  uncharged and uncounted, as when this host's own check fails.
- A request the batch's window closed on (``batch_expired``, ``batch_cancelled``), or a chunk with no
  line at all: never the document's, handed back uncharged and uncounted.
- A 400 that refuses the ``response_format`` (the batch cannot step down a rung as realtime does):
  not the document's; handed back counted, so a server that always refuses it still ends bounded.
"""

from __future__ import annotations

from docllm.domain.batches.results import ChunkFailure, State, TaskResult
from docllm.domain.errors import DocllmError, ProviderUnavailable, TransientError
from docllm.domain.review.chat import about_response_format, detail, status_error
from docllm.domain.tasks.verdict import JUDGED, Facts, facts_of

ENDED = frozenset({"batch_expired", "batch_cancelled"})  # the window closed before the request ran
WHERE = "the batch's LLM"


def error_of(failure: ChunkFailure, model: str = "", where: str = WHERE) -> DocllmError:
    """The error a realtime request ending as this line did would raise."""
    said = detail(failure.message)
    if failure.status is None:
        return ProviderUnavailable(f"{where} did not run this request ({failure.code or 'no code'}){said}")
    if failure.status == 200:
        return TransientError(f"{where} answered an invalid report (a batch asks for no repair){said}")
    if failure.status == 400 and about_response_format(failure.param, failure.message):
        return ProviderUnavailable(f"{where} refuses the response_format a batch line asks for (400){said}")
    return status_error(failure.status, failure.code, said, where, model)


def _never_the_documents(failure: ChunkFailure) -> bool:
    return failure.status is None and failure.code in ENDED


def facts_of_failure(
    failure: ChunkFailure, served: bool, handbacks: int = 0, max_handbacks: int = 3, model: str = ""
) -> Facts:
    """The facts of one failed line (``served``: ``BatchResults.served``)."""
    facts = facts_of(error_of(failure, model), handbacks=handbacks, max_handbacks=max_handbacks)
    if facts.happened not in JUDGED:
        return facts
    if not served or _never_the_documents(failure):
        return facts.judged(breaker_open=False, served_since=False, host_ok=False)
    return facts.judged(breaker_open=False, served_since=True, host_ok=True)


def task_facts(result: TaskResult, served: bool, handbacks: int = 0, max_handbacks: int = 3, model: str = "") -> Facts:
    """The facts of a task that was not answered: its first failed chunk in chunk order (as a
    realtime review raises the first failed chunk's error), else its missing chunks."""
    if result.state is State.answered:
        raise ValueError(f"task {result.task_id} was answered: it commits its report")
    if result.failures:
        return facts_of_failure(result.failures[0], served, handbacks, max_handbacks, model)
    chunks = ", ".join(str(c) for c in result.missing)
    lost = ProviderUnavailable(f"{WHERE} returned no line for chunk(s) {chunks} of attempt {result.attempt}")
    facts = facts_of(lost, handbacks=handbacks, max_handbacks=max_handbacks)
    return facts.judged(breaker_open=False, served_since=False, host_ok=False)
