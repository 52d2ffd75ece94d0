"""Adapters to an OpenAI-compatible LLM: the reviewer and what the provider's headers say."""
