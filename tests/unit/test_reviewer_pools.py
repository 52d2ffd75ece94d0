"""The reviewer's HTTP pools (``OpenAIReviewer``): at most ``POOL_CONNECTIONS`` connections each,
and one TLS context for all of them (each costs ~30 ms of CPU to load the trusted certificates:
a second of start-up at C = 1,024 when every pool made its own)."""

from __future__ import annotations

from typing import Any

import pytest

from docllm.adapters.llm.openai_reviewer import POOL_CONNECTIONS, OpenAIReviewer


@pytest.mark.parametrize("connections", [1, 100, 1024])
def test_pools_of_at_most_32_share_one_tls_context(connections: int) -> None:
    reviewer = OpenAIReviewer("http://127.0.0.1:9/v1", "key", "model", max_connections=connections)
    transports: list[Any] = [client._client._transport for client in reviewer._clients]  # the aiohttp transport
    assert len(transports) == -(-connections // POOL_CONNECTIONS)
    assert all(t.limits.max_connections <= POOL_CONNECTIONS for t in transports)
    assert len({id(t.ssl_context) for t in transports}) == 1
