"""One payload rule, written twice: ``domain/tasks/payload.py`` and ``task_id_of`` in ``lib.lua`` (which
the claim scripts use for processing_ts stamps, lease data and cancel marks) must give the same
verdict on every payload: the same task id, or both malformed (issue 23).

The Lua runs as the adapter runs it: lib.lua prepended (``with_lib``), on fakeredis (lupa, whose
cjson is Python's json) and on a real redis-server (Lua 5.1 with the real cjson, which took
``0x10``, ``01`` and bytes that are not UTF-8), once through a one-line script and once through
the real claim script, whose processing_ts stamp and cancel mark follow the Lua verdict.
Before the rule was one, ``{"task_id": 3.0}`` and ``{"task_id": 1e2}`` were tasks 3 and 100 to
the scripts and malformed to the parser; ``{"task_id": 5, "x": 0x1f}`` was task 5 to a real
Redis only; ``{"task_id": 5, "x": NaN}`` was task 5 to both, though NaN is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from hypothesis import example, given, settings
from hypothesis import strategies as st

from docllm.adapters.redis.queue import RedisTaskQueue, with_lib
from docllm.domain.errors import BadPayload
from docllm.domain.tasks.payload import parse_payload, task_id_of
from sim.manual_clock import ManualClock
from tests.servers import RedisServer

LUA_TASK_ID = with_lib("return task_id_of(ARGV[1]) or false")

# -- payloads -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
).map(json.dumps)  # json.dumps writes NaN and Infinity: not JSON

number_tokens = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from([2**53 - 1, 2**53, 2**53 + 1, 2**63, 2**64 + 1]).map(str),
    st.floats().map(repr),  # 3.0, 1e+100, nan, inf
    st.from_regex(r"-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,2})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.from_regex(r"[-+]?(0[xX])?[0-9a-fA-F.eE+-]{1,5}", fullmatch=True),  # what strtod also reads
    st.sampled_from(["true", "false", "null", "NaN", "Infinity", "-Infinity", "[]", "{}", "[7]", '{"task_id": 7}']),
)
string_parts = st.sampled_from(
    ["7", "0", "12", "٣", "²", "７", " ", "\\t", "\\n", "\\r", "\\f", "\\u000b", "\\u0037", "\\\\", '\\"', "\t"]
    + ["\\ud800", "\\udc00", "\\ud83d\\ude00", "\\ud83d", "\\x", "+", "-", "_", "1" * 17, "é"]
)
string_tokens = st.lists(string_parts, max_size=5).map(lambda parts: '"' + "".join(parts) + '"')
tokens = number_tokens | string_tokens | json_values
spaces = st.sampled_from(["", " ", "  ", "\n", "\t", "\r\n", "\x0b", "\x0c", "\xa0"])
keys = st.sampled_from(
    ['"task_id"', '"task_id"', '"task_name"', '"task\\u005fid"', '"task_id "', '"x"', "task_id", '""']
)


@st.composite
def objects(draw: Any) -> bytes:
    """An object whose members are drawn token by token: a task_id (maybe twice, maybe none), a
    task_name and others, each spelled as the grammar allows or just past what it allows."""
    members = draw(st.lists(st.tuples(keys, tokens), max_size=4))
    members.insert(draw(st.integers(0, len(members))), ('"task_id"', draw(tokens)))
    w = [draw(spaces) for _ in range(4)]
    body = ",".join(f"{w[0]}{key}{w[1]}:{w[2]}{value}{w[3]}" for key, value in members)
    text = (
        draw(st.sampled_from(["{", " {", "[{", "{{"])) + body + draw(st.sampled_from(["}", "} ", "}}", "},", "}x", ""]))
    )
    return text.encode("utf-8")


@st.composite
def mutated(draw: Any) -> bytes:
    """A well-formed payload with one byte replaced, inserted or removed."""
    raw = bytearray(draw(objects()))
    at = draw(st.integers(0, len(raw)))
    byte = draw(st.sampled_from(b'{}[],:"\\0123456789.eE+-xnu \t\n\x00\x1f\x7f\x80\xbf\xc0\xc3\xe0\xed\xf4\xf5\xff'))
    op = draw(st.sampled_from(["replace", "insert", "delete"]))
    if op == "insert" or at == len(raw):
        raw.insert(at, byte)
    elif op == "replace":
        raw[at] = byte
    else:
        del raw[at]
    return bytes(raw)


odd_values = st.sampled_from(
    [
        b'"\xff"',
        b'"a\tb"',
        b'"\xed\xa0\x80"',
        b'"\xc0\xaf"',
        b'"\xf4\x90\x80\x80"',
        b'"\xe2\x82"',
        b'"\xf0\x9f\x98\x80"',
    ]
    + [
        b'"\\ud800"',
        b'"\\udc00"',
        b'"\\ud83d\\ude00"',
        b'"\\ud83d\\u0041"',
        b"0x1f",
        b"01",
        b"1.",
        b"-.5",
        b"inf",
        b"nan",
    ]
    + [b"[" * 1100 + b"]" * 1100, b'{"a":' * 1100 + b"1" + b"}" * 1100, b"1e400", b"-1e-400", b'"\x7f"']
)
with_odd_member = st.tuples(st.integers(1, 2**53 - 1), odd_values, st.booleans()).map(
    lambda t: b'{"task_id": %d, "x": %s}' % (t[0], t[1]) if t[2] else b'{"x": %s, "task_id": %d}' % (t[1], t[0])
)
payloads = st.one_of(
    st.fixed_dictionaries({"task_id": st.integers(1, 2**53 - 1)}, optional={"task_name": st.text()}).map(json.dumps),
    objects(),
    mutated(),
    with_odd_member,
    json_values.map(str.encode),
    st.binary(max_size=40),
    st.text(max_size=40).map(str.encode),
)
payloads = payloads.map(lambda raw: raw if isinstance(raw, bytes) else raw.encode("utf-8"))

# Every payload named above, and what the rule makes of it.
NAMED = {
    b'{"task_id": 3}': 3,
    b'{"task_id": 3.0}': None,  # was task 3 to the scripts
    b'{"task_id": 1e2}': None,  # was task 100 to the scripts
    b'{"task_id": 1E0}': None,  # was task 1 to the scripts
    b'{"task_id": 0x10}': None,  # was task 16 to a real Redis
    b'{"task_id": 5, "x": 0x1f}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": 01}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": 1.}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": -.5}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": inf}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": "\xff"}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": "a\tb"}': None,  # was task 5 to a real Redis
    b'{"task_id": 5, "x": NaN}': None,  # was task 5 to all: NaN is not JSON
    b'{"task_id": 5, "x": Infinity}': None,  # was task 5 to all
    b'{"task_id": 5, "x": "\\ud800"}': None,  # was task 5 to the parser only
    b'{"task\\u005fid": 5}': None,  # was task 5 to all: keys are compared as written
    b'{"task_id": 5, "x":' + b"[" * 1100 + b"]" * 1100 + b"}": 5,  # was malformed to all: too deep
    b'{"task_id": 5, "x": 1e400}': 5,
    b'{"task_id": 5, "x": "\\ud83d\\ude00", "y": "\xf0\x9f\x98\x80"}': 5,
    b'{"task_id": 9007199254740991}': 2**53 - 1,
    b'{"task_id": 9007199254740992}': None,
    b'{"task_id": 18446744073709551617}': None,
    b'{"task_id": "7"}': 7,
    b'{"task_id": " 007\\n"}': 7,
    b'{"task_id": "\\u0037"}': None,
    b'{"task_id": "\\u000b7"}': None,
    b'{"task_id": true}': None,
    b'{"task_id": -0}': None,
    b'{"task_id": 0}': None,
    b'{"task_id": "0"}': None,
    b'{"task_id": -5}': None,
    b'{"task_id": 1, "task_id": 2}': 2,
    b'{"task_id": 5}x': None,
    b'{"task_id": 5,}': None,
    b'[{"task_id": 5}]': None,
    b'{"task_id": 5, "task_name": 7, "more": {"task_id": 9}}': 5,
}

# -- where the Lua runs ---------------------------------------------------------------------------


def lua_verdict(client: Any, raw: bytes) -> int | None:
    found = client.eval(LUA_TASK_ID, 0, raw)
    return None if found is None else int(found)


def python_verdict(raw: bytes) -> int | None:
    found = task_id_of(raw)
    if len(raw) <= 64 * 1024:  # parse_payload is task_id_of plus the size limit
        try:
            parsed: int | None = parse_payload(raw, 64 * 1024).task_id
        except BadPayload:
            parsed = None
        assert parsed == found
    return found


@pytest.fixture(scope="module")
def fake() -> Iterator[fakeredis.FakeRedis]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


@pytest.fixture(scope="module")
def real(redis_server: RedisServer) -> Iterator[redis.Redis]:
    redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


# -- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", list(NAMED), ids=lambda raw: raw[:40].decode("utf-8", "replace"))
def test_the_named_payloads_follow_the_rule(raw: bytes, fake: fakeredis.FakeRedis) -> None:
    assert python_verdict(raw) == NAMED[raw]
    assert lua_verdict(fake, raw) == NAMED[raw]


@pytest.mark.parametrize("raw", list(NAMED), ids=lambda raw: raw[:40].decode("utf-8", "replace"))
def test_the_named_payloads_follow_the_rule_on_a_real_redis(raw: bytes, real: redis.Redis) -> None:
    assert lua_verdict(real, raw) == NAMED[raw]


@settings(max_examples=500)
@given(payloads)
@example(b'{"task_id": 3.0}')
def test_python_and_lua_agree_on_fakeredis(fake: fakeredis.FakeRedis, raw: bytes) -> None:
    assert lua_verdict(fake, raw) == python_verdict(raw), raw


@settings(max_examples=300)
@given(payloads)
def test_python_and_lua_agree_on_a_real_redis(real: redis.Redis, raw: bytes) -> None:
    assert lua_verdict(real, raw) == python_verdict(raw), raw


def _claimed(client: Any, raw: bytes) -> tuple[set[int], bool]:
    """Through the adapter's claim script, as a worker claims: which task processing_ts stamps and
    whether the claim carried a cancel mark, with the parser's task id (if any) marked cancelled."""
    client.flushall()
    queue = RedisTaskQueue(client, "docllm", clock=ManualClock())
    expected = task_id_of(raw)
    queue.mark_cancelled({expected} if expected is not None else set())
    queue.push(raw.decode("utf-8", "surrogateescape"))
    delivery = queue.claim("agreement", 30_000)
    assert delivery is not None
    stamped = {int(field) for field in client.hkeys(queue.keys.processing_ts)}
    return stamped, delivery.cancelled


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# fakeredis's cjson.encode is Python's json, which cannot write the lease data of a payload that
# is not UTF-8 (a real Redis can: the test below).
@settings(max_examples=100)
@given(payloads.filter(_utf8))
def test_the_claim_script_stamps_and_cancels_the_parsers_task(fake: fakeredis.FakeRedis, raw: bytes) -> None:
    expected = task_id_of(raw)
    assert _claimed(fake, raw) == ({expected} if expected else set(), expected is not None)


@settings(max_examples=100)
@given(payloads)
@example(b'{"task_id": 3.0}')
@example(b'{"task_id": 5, "x": "\xff"}')
@example(b'{"task_id": 5, "x": 0x1f}')
def test_the_claim_script_stamps_and_cancels_the_parsers_task_on_a_real_redis(real: redis.Redis, raw: bytes) -> None:
    expected = task_id_of(raw)
    assert _claimed(real, raw) == ({expected} if expected else set(), expected is not None)
