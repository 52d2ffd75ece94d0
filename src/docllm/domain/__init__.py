"""The pure domain, a sub-package per capability (``tasks``, ``review``, ``llm``, ``lanes``, ``batches``),
each with its model, services and ports; at the top, the vocabulary they share (``errors``, ``events``,
``tracing``, ``backoff``). No infrastructure imports (docs/ARCHITECTURE.md, Layers)."""
