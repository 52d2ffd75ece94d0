"""LLM spend and limits: usage, prices, the budget and the spend ledger, rate limits and their gate,
the circuit breaker, deployments."""
