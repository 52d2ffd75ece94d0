"""Adapters: the ports of ``docllm.domain.ports`` implemented over Redis, SQL, LLMs and memory."""
