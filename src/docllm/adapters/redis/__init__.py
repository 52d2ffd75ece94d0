"""Adapters over Redis: the task queue, the LLM breaker and rate limiter, the worker registry, the
authority clock; Lua scripts in ``lua/``."""
