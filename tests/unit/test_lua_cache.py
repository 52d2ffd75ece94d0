"""sim/lua_cache.py: fakeredis compiles each script once, and a script behaves as it did (the
contract tests run every docllm script on fakeredis and on a real redis-server, with it installed)."""

from __future__ import annotations

import fakeredis
import pytest
import redis

from docllm.adapters.redis.queue.base import script_text
from sim import lua_cache

COUNTER = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def runtime(client: fakeredis.FakeRedis) -> lua_cache.Compiled:
    found = client.connection_pool.connection_kwargs["server"]._docllm_compiled
    assert isinstance(found, lua_cache.Compiled)
    return found


def compiled(client: fakeredis.FakeRedis, part: str) -> int:
    """How many texts containing ``part`` the client's server compiled."""
    texts = [t.decode() if isinstance(t, bytes) else t for t in runtime(client).functions]
    return sum(part in t for t in texts)


def test_installed_for_the_suite_and_twice_is_once():
    assert lua_cache.install() and lua_cache.install()
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    assert client.eval(COUNTER, 1, "n", 2) == 2
    compiles = runtime(client).compiles
    assert [client.eval(COUNTER, 1, "n", 2) for _ in range(3)] == [4, 6, 8]
    assert runtime(client).compiles == compiles and compiled(client, "INCRBY") == 1


def test_a_docllm_script_is_compiled_once_and_runs_each_call_with_its_own_keys_and_args():
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    lease = client.register_script(script_text("batch_lease"))
    assert lease(keys=["lease:a", "clock"], args=["acquire", "t1", 1000, 500, "w1"]) == 1
    assert lease(keys=["lease:a", "clock"], args=["acquire", "t2", 1100, 500, "w2"]) == 0  # held by t1
    assert lease(keys=["lease:b", "clock"], args=["acquire", "t3", 1100, 500, "w2"]) == 1  # another key
    assert lease(keys=["lease:a", "clock"], args=["renew", "t1", 1600, 500]) == 0  # ran out at 1500
    assert compiled(client, "batch_lease.lua") == 1


@pytest.mark.parametrize(
    "script, message",
    [
        ("return redis.call('NOSUCHCOMMAND')", "unknown command"),
        ("return (", "error"),  # a syntax error, at the first call as at every one
        ("leaked = 1 return 1", "global"),  # a script may not set a global
    ],
)
def test_a_bad_script_fails_as_before_at_every_call(script, message):
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    for _ in range(2):
        with pytest.raises(redis.ResponseError, match=f"(?i){message}"):
            client.eval(script, 0)
    assert client.eval("return 7", 0) == 7  # the runtime is left usable
