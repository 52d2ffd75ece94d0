"""The domain's error tree. Adapters translate client errors into these."""

from __future__ import annotations


class DocllmError(Exception):
    """Base of every error docllm raises on purpose."""


class BadPayload(DocllmError):
    """A queue payload that cannot be turned into a task reference."""


class TransientError(DocllmError):
    """Worth retrying: a timeout, a dropped connection, a 429 or 5xx.

    ``retry_after`` is the server's hint in seconds, when it gave one.
    """

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(TransientError):
    """A backing service (Redis, the database) cannot be reached right now."""


class ProviderUnavailable(TransientError):
    """The LLM provider did not serve the request (no connection, a timeout, a 429 or 5xx): the
    provider's failure unless the fleet's breaker finds it serving others (ARCHITECTURE.md, LLM boundary)."""


class PermanentError(DocllmError):
    """Retrying cannot help this task: it ends ``failed`` with this message."""


class OverCostCap(PermanentError):
    """The document's estimated cost alone is over the per-task cap (DOCLLM_TASK_MAX_COST_USD):
    it fails before any LLM call, like a document over the size limit."""


class SpendCapReached(DocllmError):
    """The spend ledger refused a reservation: what it would hold does not fit under the fleet's
    daily cap or the deployment's (I16). Nothing was sent; not the document's doing, so its attempt
    is handed back uncharged and uncounted, after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ConfigurationError(DocllmError):
    """The deployment is wrong (bad setting, 401/403, unknown model): no task is to blame."""


class RubricError(PermanentError):
    """A rubric that cannot be used: unknown, or invalid (the message names its file and line).
    At submit nothing is queued; on a worker the task fails with this message, its row kept."""


class EvaluationError(DocllmError):
    """``docllm eval`` cannot go on: a golden set or expectations file that is wrong (the message
    names the file and line), or a review that failed (it names the document)."""


class BatchFileLost(ProviderUnavailable):
    """A batch's file the provider no longer has (404 on its content): its members' results are
    gone, through no fault of theirs; they are handed back uncharged (issue 28)."""
