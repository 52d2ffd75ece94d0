"""Whether this process traces, and its OpenTelemetry SDK set up from the standard ``OTEL_*``
variables (docs/DEPLOY.md, Tracing). Imports OpenTelemetry only when tracing is on.

On when ``DOCLLM_TRACING=on``, or (``auto``, the default) when the SDK is installed
(``docllm[otel]``) and an exporter is configured: ``OTEL_TRACES_EXPORTER`` (other than ``none``),
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``DOCLLM_TRACING_FILE``. ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from docllm.domain.errors import ConfigurationError
from docllm.domain.tracing import NullTracer

EXPORTERS = ("otlp", "console", "none")
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def sdk_installed() -> bool:
    return importlib.util.find_spec("opentelemetry.sdk") is not None


def exporter_names(environ: Mapping[str, str], mode: str, file: str) -> list[str]:
    """The exporters OTEL_TRACES_EXPORTER names; by default ``otlp`` when an OTLP endpoint is set
    or tracing is forced on without a file."""
    named = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    for name in named:
        if name not in EXPORTERS:
            raise ConfigurationError(f"OTEL_TRACES_EXPORTER: {name!r} is not one of {', '.join(EXPORTERS)}")
    if not named and (any(environ.get(k) for k in _ENDPOINTS) or (mode == "on" and not file)):
        named = ["otlp"]
    return [n for n in named if n != "none"]


def tracing_on(mode: str, file: str, environ: Mapping[str, str]) -> bool:
    if mode == "off" or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if mode == "on":
        if not sdk_installed():
            raise ConfigurationError("DOCLLM_TRACING=on needs the OpenTelemetry SDK: pip install 'docllm[otel]'")
        return True
    return bool(file or exporter_names(environ, mode, file)) and sdk_installed()


def make_tracer(mode: str, file: str, environ: Mapping[str, str]) -> Any:
    """An OtelTracer over a TracerProvider of its own, or NullTracer (nothing imported) when off."""
    if not tracing_on(mode, file, environ):
        return NullTracer()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from docllm.adapters.telemetry.tracing import OtelTracer

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create; the name defaults to ours.
    resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "docllm"})
    provider = TracerProvider(resource=resource, shutdown_on_exit=True)  # flushed at exit
    for name in exporter_names(environ, mode, file):
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))  # OTEL_BSP_* apply
    if file:
        from docllm.adapters.telemetry.span_file import JsonLinesSpanExporter

        # Written as each span ends: a file is for looking, and a process may be killed any time.
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(file)))
    return OtelTracer(provider)


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigurationError(
            "OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http: pip install 'docllm[otel]'"
        ) from None
    return OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout) apply
