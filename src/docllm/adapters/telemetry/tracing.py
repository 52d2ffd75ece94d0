"""OtelTracer: the domain's tracing port (domain/tracing.py) over the OpenTelemetry API.

Imported only when tracing is on (tracing_setup.py decides), so a worker without it never loads
OpenTelemetry. Spans carry ids, numbers and reasons; never document text, and of an error only its
type (a message may quote what a server echoed).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from docllm.domain.tracing import Attributes, Span

_PROPAGATOR = TraceContextTextMapPropagator()
_KINDS = {"docllm.submit": SpanKind.PRODUCER, "docllm.attempt": SpanKind.CONSUMER}


def _context(traceparent: str | None) -> Context:
    """The context of a traceparent; an empty one (a new trace) for None or a malformed value."""
    return _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else Context()


class OtelSpan:
    recording = True
    __slots__ = ("_span", "_tracer", "_ended")

    def __init__(self, span: trace.Span, tracer: OtelTracer):
        self._span, self._tracer, self._ended = span, tracer, False

    @property
    def traceparent(self) -> str:
        ctx = self._span.get_span_context()
        return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"

    def set(self, attributes: Attributes) -> None:
        self._span.set_attributes(dict(attributes))

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self._span.add_event(name, dict(attributes or {}))

    def child(self, name: str, attributes: Attributes | None = None) -> Span:
        return self._tracer.open(name, trace.set_span_in_context(self._span, Context()), None, attributes, None)

    def end(self, error: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        if error is not None:
            kind = type(error).__name__
            self._span.set_attribute("error.type", kind)
            self._span.set_status(Status(StatusCode.ERROR, kind))
        self._span.end()


class OtelTracer:
    def __init__(self, provider: Any):
        self._tracer = provider.get_tracer("docllm")

    def start(
        self,
        name: str,
        parent: str | None = None,
        link: str | None = None,
        attributes: Attributes | None = None,
        start_ns: int | None = None,
    ) -> Span:
        links = None
        if link:
            linked = trace.get_current_span(_context(link)).get_span_context()
            links = [Link(linked)] if linked.is_valid else None
        return self.open(name, _context(parent), links, attributes, start_ns)

    def open(
        self, name: str, context: Context, links: list[Link] | None, attributes: Attributes | None, start_ns: int | None
    ) -> Span:
        kind = SpanKind.CLIENT if name.startswith("chat ") else _KINDS.get(name, SpanKind.INTERNAL)
        span = self._tracer.start_span(
            name, context, kind, attributes=dict(attributes or {}), links=links, start_time=start_ns
        )
        return OtelSpan(span, self)
