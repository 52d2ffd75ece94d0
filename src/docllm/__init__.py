"""docllm: a reliable worker that reviews documents with an LLM."""

__version__ = "0.12.0"
