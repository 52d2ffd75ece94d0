"""The tracing port: the spans of one task's trace, with no OpenTelemetry in the domain.

Services open spans through a ``Tracer`` (adapters/telemetry/tracing.py maps it to OpenTelemetry)
and hand them down through ``current()``, so an adapter (the LLM reviewer) adds its children
without being told. A trace crosses processes in the payload's W3C ``traceparent``, which the row
keeps too. Off (the default), every span is ``NULL_SPAN``: a method call that does nothing.
Attributes never carry document text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

Attributes = Mapping[str, str | int | float | bool | tuple[str, ...]]

# W3C Trace Context, version 00: trace id and parent id in lower-case hex, neither all zeros.
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
TRACEPARENT_LENGTH = 55  # the row's column holds 64


def valid_traceparent(value: Any) -> str | None:
    """``value`` when it is a W3C traceparent we can continue, else None (never an error: a
    malformed one only loses the trace, not the task)."""
    return value if isinstance(value, str) and _TRACEPARENT.fullmatch(value) else None


class Span(Protocol):
    recording: bool  # False for NULL_SPAN: callers skip building attributes nobody keeps

    @property
    def traceparent(self) -> str | None: ...
    def set(self, attributes: Attributes) -> None: ...
    def event(self, name: str, attributes: Attributes | None = None) -> None: ...
    def child(self, name: str, attributes: Attributes | None = None) -> Span: ...
    def end(self, error: BaseException | None = None) -> None:
        """Idempotent: a second end (a write retried after an outage) changes nothing."""


class Tracer(Protocol):
    def start(
        self,
        name: str,
        parent: str | None = None,
        link: str | None = None,
        attributes: Attributes | None = None,
        start_ns: int | None = None,
    ) -> Span:
        """A span in the trace of ``parent`` (a traceparent; None: a new trace), or in a trace of
        its own that links to ``link``'s (the reaper's and reconciler's actions)."""
        ...


class _NullSpan:
    recording = False
    traceparent = None

    def set(self, attributes: Attributes) -> None:
        pass

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        pass

    def child(self, name: str, attributes: Attributes | None = None) -> Span:
        return self

    def end(self, error: BaseException | None = None) -> None:
        pass


NULL_SPAN: Span = _NullSpan()


class NullTracer:
    def start(
        self,
        name: str,
        parent: str | None = None,
        link: str | None = None,
        attributes: Attributes | None = None,
        start_ns: int | None = None,
    ) -> Span:
        return NULL_SPAN


_current: ContextVar[Span] = ContextVar("docllm_span", default=NULL_SPAN)


def current() -> Span:
    """The span code running now belongs to (NULL_SPAN outside any)."""
    return _current.get()


@contextmanager
def within(span: Span) -> Iterator[Span]:
    """``span`` is current inside (and in tasks created inside); it is not ended here."""
    token = _current.set(span)
    try:
        yield span
    finally:
        _current.reset(token)


@contextmanager
def running(span: Span) -> Iterator[Span]:
    """``span`` is current inside, and ended on the way out with the error that ended it."""
    token = _current.set(span)
    try:
        yield span
    except BaseException as exc:
        span.end(exc)
        raise
    finally:
        _current.reset(token)
        span.end()  # after an error: already ended, a no-op


@contextmanager
def traced(name: str, attributes: Attributes | None = None, parent: Span | None = None) -> Iterator[Span]:
    """A child of ``parent`` (the current span by default), ``running`` inside. Nothing at all
    when tracing is off."""
    parent = parent or _current.get()
    if not parent.recording:
        yield NULL_SPAN
        return
    with running(parent.child(name, attributes)) as span:
        yield span
