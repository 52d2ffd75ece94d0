"""Parsing queue payloads. Kept strict: anything odd goes to the dead-letter list with a reason.

The rule, one for every reader of a payload (this module, and ``task_id_of`` in the queue's
``adapters/redis/lua/lib.lua``, which the scripts use for processing_ts stamps, lease data and cancel
marks; ``tests/property/test_payload_agreement.py`` proves the two agree on generated payloads,
on fakeredis and on a real redis-server):

- The payload is UTF-8 and strict JSON (RFC 8259): no NaN or Infinity, no hex numbers, no
  leading zeros, no ``1.`` or ``.5``, no raw control characters in strings, no lone surrogate
  in a ``\\u`` escape, nothing after the value. Any depth of nesting.
- Its value is an object with a member written ``"task_id"``. Keys are compared as written
  (``"task\\u005fid"`` is another key); of duplicates the last counts, as in json.loads.
- That member's value is a JSON integer token, ``[1-9][0-9]*``: no fraction, exponent or sign
  (``3.0``, ``1e2`` and ``-0`` are malformed, though a double holds them as 3, 100 and 0), not
  true/false/null; or a string of ASCII digits that some producers send (``"7"``), padded with
  spaces and the escapes ``\\t \\n \\r`` at most, leading zeros ignored.
- Its value is from 1 to ``MAX_TASK_ID`` (2**53 - 1): every id a double holds exactly.
- Other members are free; ``task_name`` is read when it is a string and ignored otherwise;
  ``traceparent`` (W3C Trace Context, domain/tracing.py) when it is a valid one, and ignored
  otherwise: a malformed trace context loses the trace, never the task.
- ``priority`` and ``tenant`` (issue 26) are optional; absent or ``null`` mean the default lane
  and no tenant. When present they are plain JSON strings (no escapes): ``priority`` one of
  ``domain.lanes.model.LANES``, ``tenant`` as ``domain.lanes.model.TENANT``; anything else is malformed here.
  The scripts (``lane_of``/``tenant_of`` in lanes.lua) route such a payload to the default lane
  with no tenant, where its claimer dead-letters it with this module's reason.
- ``parse_payload`` also caps the payload's size (``max_bytes``, a setting the scripts do not
  know); ``task_id_of`` does not, like the scripts.

Why so narrow. The original note's producers send ``json.dumps({"task_id": <row id>, ...})``:
integer tokens, or strings of digits; a float or an exponent means a producer computes ids in
floating point, where large ids collide, so such a payload is shown in the dead-letter list
rather than guessed at. The scripts cannot use cjson for the rule: it reads every number as a
double and, in Redis, takes hex, leading zeros, ``inf`` and invalid UTF-8 that json.loads
refuses; so both sides read the raw text by the same grammar, written alike in both languages.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

from docllm.domain.errors import BadLabel, BadPayload
from docllm.domain.lanes.model import DEFAULT_LANE, lane_error, tenant_error
from docllm.domain.tasks.model import Task, TaskRef
from docllm.domain.tracing import valid_traceparent

MAX_TASK_ID = 2**53 - 1  # the queue's Lua scripts keep task ids in doubles (lib.lua, lease data)

# The grammar's tokens, on bytes: the same classes as the patterns of lib.lua.
_WS = re.compile(rb"[ \t\n\r]*")
_STRING_STOP = re.compile(rb'[\x00-\x1f"\\]')
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}")
_LOW_SURROGATE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = (b"true", b"false", b"null")
_INTEGER = re.compile(rb"-?[0-9]+")  # a token that is an integer, for the reason given
_PADDING = re.compile(rb"\\[tnr]")
_DIGITS = re.compile(rb" *0*([0-9]+) *")
_PLAIN_STRING = re.compile(rb'"[^"\\]*"')  # no escapes: lane and tenant names are plain


def parse_payload(raw: str | bytes, max_bytes: int) -> TaskRef:
    """Turn ``{"task_id": 1, "task_name": "..."}`` into a TaskRef or raise BadPayload naming why."""
    try:  # adapters carry bytes that are not UTF-8 as surrogate escapes: those are malformed too
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        data.decode("utf-8")
    except UnicodeError:
        raise BadPayload("payload is not valid UTF-8") from None
    if len(data) > max_bytes:
        raise BadPayload(f"payload of {len(data)} bytes is over the limit of {max_bytes}")
    members = _members(data)
    if b'"task_id"' not in members:
        raise BadPayload("payload has no task_id")
    name = members.get(b'"task_name"', b"")
    trace = members.get(b'"traceparent"', b"")
    return TaskRef(
        task_id=_task_id(members[b'"task_id"']),
        task_name=json.loads(name) if name.startswith(b'"') else None,
        priority=_label(members.get(b'"priority"'), "priority", lane_error),
        tenant=_label(members.get(b'"tenant"'), "tenant", tenant_error),
        traceparent=valid_traceparent(json.loads(trace)) if trace.startswith(b'"') else None,
    )


def named_task_id(raw: str | bytes) -> int | None:
    """The task id a payload names by the rule above, whatever its other members hold (None when
    it names none): the row of a payload whose lane or tenant no claim takes is failed with the
    reason, not left pending for the reconciler to push again (issue 44)."""
    try:
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        data.decode("utf-8")
        token = _members(data).get(b'"task_id"')
        return None if token is None else _task_id(token)
    except (UnicodeError, BadPayload):
        return None


def task_id_of(raw: str | bytes) -> int | None:
    """The task id a payload names, None for a malformed one; no size limit (for scans)."""
    try:
        return parse_payload(raw, max_bytes=sys.maxsize).task_id
    except BadPayload:
        return None


def make_payload(
    task_id: int,
    task_name: str | None,
    priority: str | None = None,
    tenant: str | None = None,
    traceparent: str | None = None,
) -> str:
    """The payload existing producers push, byte-compatible with the original note; ``priority``,
    ``tenant`` and ``traceparent`` are added only when set, so a default-lane untraced task's
    payload is the note's."""
    data: dict[str, object] = {"task_id": task_id, "task_name": task_name}
    if priority is not None and priority != DEFAULT_LANE:
        data["priority"] = priority
    if tenant is not None:
        data["tenant"] = tenant
    if traceparent is not None:
        data["traceparent"] = traceparent
    return json.dumps(data, ensure_ascii=False)


def payload_of(task: Task) -> str:
    """The payload of a row: its id, name, lane, tenant and trace (a re-queue keeps them)."""
    return make_payload(task.task_id, task.task_name, task.priority, task.tenant, task.traceparent)


def _label(token: bytes | None, what: str, error: Callable[[str], str | None]) -> str | None:
    """A ``priority``/``tenant`` member: absent or null is None; else a plain string that passes."""
    if token is None or token == b"null":
        return None
    text = token.decode("utf-8")
    plain = _PLAIN_STRING.fullmatch(token)
    reason = error(text[1:-1]) if plain else f"{what} must be a plain JSON string, got {text[:80]}"
    if reason:
        raise BadLabel(reason)
    return text[1:-1]


def _task_id(token: bytes) -> int:
    shown = token.decode("utf-8")
    shown = shown if len(shown) <= 80 else shown[:80] + "..."
    quoted = token.startswith(b'"')
    match = _DIGITS.fullmatch(_PADDING.sub(b" ", token[1:-1])) if quoted else _INTEGER.fullmatch(token)
    if match is None:
        raise BadPayload(f"task_id is not an integer: {shown}")
    digits = match.group(1) if quoted else token
    if digits.startswith(b"-") or digits == b"0":  # -5, -0, 0, "0", "000"
        raise BadPayload(f"task_id is not positive: {shown}")
    if len(digits) > 16 or int(digits) > MAX_TASK_ID:
        raise BadPayload(f"task_id is over the largest row id: {shown}")
    return int(digits)


def _members(data: bytes) -> dict[bytes, bytes]:
    """The raw value token of each top-level member, by its key as written (``b'"task_id"'``);
    BadPayload when ``data`` is not a JSON object. As ``task_id_token`` in lib.lua."""
    i = _ws(data, 0)
    if data[i : i + 1] != b"{":
        _value_end(data, i)  # says "not JSON" when it is not
        raise BadPayload("payload is not a JSON object")
    members: dict[bytes, bytes] = {}
    i = _ws(data, i + 1)
    if data[i : i + 1] == b"}":
        return _end(data, i, members)
    while True:
        key, start = data[i : _string_end(data, i)], _key_end(data, i)
        end = _value_end(data, start)
        members[key] = data[start:end]
        i = _ws(data, end)
        if data[i : i + 1] == b"}":
            return _end(data, i, members)
        if data[i : i + 1] != b",":
            raise _not_json(i)
        i = _ws(data, i + 1)


def _end(data: bytes, i: int, members: dict[bytes, bytes]) -> dict[bytes, bytes]:
    if _ws(data, i + 1) < len(data):
        raise _not_json(i + 1)
    return members


def _not_json(at: int) -> BadPayload:
    return BadPayload(f"payload is not JSON: unexpected byte at {at}")


def _ws(data: bytes, i: int) -> int:
    match = _WS.match(data, i)
    assert match is not None  # `*` matches the empty string
    return match.end()


def _string_end(data: bytes, i: int) -> int:
    if data[i : i + 1] != b'"':
        raise _not_json(i)
    while True:
        stop = _STRING_STOP.search(data, i + 1)
        if stop is None or data[stop.start()] < 32:
            raise _not_json(i if stop is None else stop.start())
        i = stop.start()
        if data[i : i + 1] == b'"':
            return i + 1
        escape = data[i + 1 : i + 2]
        if escape and escape in b'"\\/bfnrt':
            i += 1
        elif escape == b"u" and _HEX4.match(data, i + 2):
            code = int(data[i + 2 : i + 6], 16)
            if 0xDC00 <= code <= 0xDFFF:
                raise _not_json(i)
            if 0xD800 <= code <= 0xDBFF:
                if not _LOW_SURROGATE.match(data, i + 6):
                    raise _not_json(i)
                i += 6
            i += 5
        else:
            raise _not_json(i)


def _scalar_end(data: bytes, i: int) -> int:
    for word in _LITERALS:
        if data.startswith(word, i):
            return i + len(word)
    match = _NUMBER.match(data, i)
    if match is None:
        raise _not_json(i)
    return match.end()


def _key_end(data: bytes, i: int) -> int:
    i = _ws(data, _string_end(data, i))
    if data[i : i + 1] != b":":
        raise _not_json(i)
    return _ws(data, i + 1)


def _value_end(data: bytes, i: int) -> int:
    """Past the JSON value at ``i``; containers on a stack of expected closers, not recursion."""
    closers: list[bytes] = []
    while True:
        c = data[i : i + 1]
        opened = False
        if c in (b"{", b"["):
            close = b"}" if c == b"{" else b"]"
            i = _ws(data, i + 1)
            if data[i : i + 1] == close:
                i += 1
            else:
                closers.append(close)
                if close == b"}":
                    i = _key_end(data, i)
                opened = True
        elif c == b'"':
            i = _string_end(data, i)
        else:
            i = _scalar_end(data, i)
        while not opened:  # a value is complete: close what it completes, or move to the next one
            if not closers:
                return i
            i = _ws(data, i)
            c = data[i : i + 1]
            if c == closers[-1]:
                closers.pop()
                i += 1
            elif c == b",":
                i = _ws(data, i + 1)
                if closers[-1] == b"}":
                    i = _key_end(data, i)
                opened = True
            else:
                raise _not_json(i)
