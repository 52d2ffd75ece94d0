"""In-memory twins of the Redis and SQL adapters, for unit tests and benchmarks; held to the same
contract tests as the real adapters (tests/contract)."""
