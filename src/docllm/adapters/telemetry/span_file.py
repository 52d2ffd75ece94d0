"""Spans as JSON lines in a file (DOCLLM_TRACING_FILE): for a look without a collector, and for the
end-to-end test that gathers the spans of several processes (each process its own file)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class JsonLinesSpanExporter(SpanExporter):
    def __init__(self, path: str):
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
        with self._lock, open(self._path, "a", encoding="utf-8") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass
