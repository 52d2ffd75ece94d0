"""Waits measured on the authority's clock, which can step back (ARCHITECTURE.md, Clocks)."""


def waited(now_ms: int, since_ms: int, wait_ms: int) -> bool:
    """``wait_ms`` has passed since ``since_ms``, or the clock stepped back past ``since_ms`` (it lies
    "in the future"): waiting for the clock to catch up would hold back whatever waits for as long as
    the step (an hour, after a failover to a primary an hour behind)."""
    return not 0 <= now_ms - since_ms < wait_ms
