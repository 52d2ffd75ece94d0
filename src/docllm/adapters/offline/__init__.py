"""The reviewer that needs no LLM: deterministic checks of a document (demos, embedded default)."""
