"""The Files and Batch APIs of the fake OpenAI server (``tests.support.llm_server``), in memory.

``FakeBatches`` keeps uploaded files and batches and answers ``/v1/files`` and ``/v1/batches`` the way
OpenAI does. A batch's life is a function of the server's monotonic clock, worked out lazily whenever
the batch is read: ``validating`` for the first 10 % of its delay, ``in_progress`` to 90 % (each line
is answered at a seeded moment in that span), ``finalizing``, then ``completed`` with its output and
error files. Every line is answered at create by ``chat`` (the realtime route's logic), so a batch's
answers are the realtime answers; what the knobs change is which of them the caller gets to read.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs, urlsplit

# (status, body, content type): the router's answer; the server wraps it in its ``Reply``.
Answer = tuple[int, Any, str]
# Which batches a knob hits: the next N created, or those a predicate picks (it sees the batch object
# as created: id, metadata, input_file_id ...).
Pick = int | Callable[[dict], bool]

JSON, JSONL = "application/json", "application/octet-stream"
EXPIRED = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}
CANCELLED = {"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}
SERVER_ERROR = {"message": "The server had an error.", "type": "server_error", "param": None, "code": None}
TERMINAL = {"completed", "failed", "expired", "cancelled"}
HOLDABLE = {"create", "retrieve"}  # POST /v1/batches, GET /v1/batches/{id}


def _err(status: int, message: str, param: str | None = None, code: str | None = None) -> Answer:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, JSON


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def parse_form(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body as {field: str} with the file field as {"filename", "content"}."""
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    form: dict[str, Any] = {}
    for part in message.iter_parts():
        name = str(part.get_param("name", header="content-disposition"))
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        form[name] = {"filename": filename, "content": content} if filename is not None else content.decode()
    return form


@dataclass
class _File:
    obj: dict
    content: bytes
    lost: bool = False  # a lost file answers 404, as if the provider had dropped it


@dataclass
class _Line:
    custom_id: str
    done_at: float  # seconds after create when the line is answered (inf: never, the batch expires first)
    status: int
    body: dict
    request_id: str = field(default_factory=lambda: _id("req_"))


@dataclass
class _Batch:
    obj: dict
    started: float  # monotonic
    delay: float
    lines: list[_Line]
    expires: bool
    loses_files: bool
    fails: list[dict]  # validation errors: the batch ends ``failed``
    cancel_at: float | None = None  # seconds after create
    cancelled_after: float = 0.0


class FakeBatches:
    def __init__(
        self,
        chat: Callable[[dict], tuple[int, dict]],
        *,
        seed: int = 0,
        batch_delay_s: float | tuple[float, float] = 0.0,
        batch_fail_rate: float = 0.0,
        poison_marker: str | None = None,
        expire_batches: Pick = 0,
        lose_files: Pick = 0,
        fail_batches: Pick = 0,
        cancel_delay_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.chat, self.clock = chat, clock
        self.batch_delay_s, self.batch_fail_rate, self.poison_marker = batch_delay_s, batch_fail_rate, poison_marker
        self.expire_batches, self.lose_files, self.fail_batches = expire_batches, lose_files, fail_batches
        self.cancel_delay_s = cancel_delay_s
        # files_created, batches_created, batches_cancelled, batch_lines (answered into a result file),
        # batch_lines_failed, content_reads, content_lost (reads answered 404 because the file is lost)
        self.counters: collections.Counter[str] = collections.Counter()
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}  # in creation order
        # Holds armed by a test (``arm``): route -> seconds, one per request; ``held`` what they held.
        self.holds: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self.held: list[dict[str, Any]] = []
        self._rng, self._lock = random.Random(seed), threading.Lock()

    @staticmethod
    def owns(path: str) -> bool:
        return re.match(r"/v1/(files|batches)(/|\?|$)", path) is not None

    # Holds: a request done (a batch created, a status worked out) whose answer waits, so a test can
    # kill its caller at a known step (the batcher after its create, a poller in its retrieve).

    def arm(self, route: str, seconds: float, count: int = 1) -> None:
        """Hold the answer of the next ``count`` successful ``route`` requests (``HOLDABLE``) for
        ``seconds`` each."""
        if route not in HOLDABLE:
            raise ValueError(f"route {route!r}: one of {sorted(HOLDABLE)}")
        with self._lock:
            self.holds[route].extend([float(seconds)] * count)

    def hold_for(self, method: str, path: str, status: int, answer: Any = None, peer: int = 0) -> float:
        """Seconds to hold this answer: an armed hold of its route (counted ``{route}s_held``, the
        request written down in ``held`` with the batch's id and docllm_ref, and the client's port), else 0."""
        parts = urlsplit(path).path.strip("/").split("/")[1:]
        route = {("POST", 1): "create", ("GET", 2): "retrieve"}.get((method, len(parts)))
        if status != 200 or route is None or parts[0] != "batches":
            return 0.0
        with self._lock:
            if not self.holds[route]:
                return 0.0
            self.counters[f"{route}s_held"] += 1
            batch = answer if isinstance(answer, dict) else {}
            ref = (batch.get("metadata") or {}).get("docllm_ref")
            self.held.append({"route": route, "path": path, "batch_id": batch.get("id"), "ref": ref, "peer": peer})
            return self.holds[route].popleft()

    def serve(self, method: str, path: str, body: Any) -> Answer:
        url = urlsplit(path)
        parts, query = url.path.strip("/").split("/")[1:], {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self._lock:
            match method, parts:
                case "POST", ["files"]:
                    return self._upload(body if isinstance(body, dict) else {})
                case "GET", ["files"]:
                    files = [f.obj for f in self.files.values() if not f.lost]
                    files = [f for f in files if f["purpose"] == query.get("purpose", f["purpose"])]
                    return 200, {"object": "list", "data": files[::-1], "has_more": False}, JSON
                case "GET", ["files", file_id]:
                    return self._file(file_id, lambda f: (200, f.obj, JSON))
                case "DELETE", ["files", file_id]:
                    return self._file(file_id, self._delete)
                case "GET", ["files", file_id, "content"]:
                    return self._file(file_id, self._content, counting=True)
                case "POST", ["batches"]:
                    return self._create(body if isinstance(body, dict) else {})
                case "GET", ["batches"]:
                    return self._list(query)
                case "GET", ["batches", batch_id]:
                    return self._batch(batch_id, lambda b: (200, b.obj, JSON))
                case "POST", ["batches", batch_id, "cancel"]:
                    return self._batch(batch_id, self._cancel)
        return _err(404, f"no route {method} {path}")

    # Files

    def _upload(self, form: dict) -> Answer:
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, dict) or purpose not in {"batch", "fine-tune", "assistants", "user_data", "vision"}:
            return _err(400, "a multipart upload needs `file` and a valid `purpose`", param="purpose")
        self.counters["files_created"] += 1
        return 200, self._store(upload["filename"] or "upload.jsonl", purpose, upload["content"]).obj, JSON

    def _store(self, filename: str, purpose: str, content: bytes, lost: bool = False) -> _File:
        obj: dict[str, Any] = {
            "id": _id("file-"),
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        self.files[obj["id"]] = stored = _File(obj, content, lost)
        return stored

    def _file(self, file_id: str, then: Callable[[_File], Answer], counting: bool = False) -> Answer:
        stored = self.files.get(file_id)
        if stored is None or stored.lost:
            self.counters["content_lost" if counting and stored else "files_not_found"] += 1
            return _err(404, f"No such File object: {file_id}", param="id")
        return then(stored)

    def _delete(self, stored: _File) -> Answer:
        del self.files[stored.obj["id"]]
        return 200, {"id": stored.obj["id"], "object": "file", "deleted": True}, JSON

    def _content(self, stored: _File) -> Answer:
        self.counters["content_reads"] += 1
        return 200, stored.content.decode(), JSONL

    # Batches

    def _create(self, body: dict) -> Answer:
        stored = self.files.get(str(body.get("input_file_id")))
        metadata = body.get("metadata") or {}
        if stored is None or stored.obj["purpose"] != "batch":
            return _err(400, f"Input file {body.get('input_file_id')!r} not found or not for batch", "input_file_id")
        if body.get("endpoint") != "/v1/chat/completions":
            return _err(400, "this server batches only /v1/chat/completions", param="endpoint")
        if body.get("completion_window") != "24h":
            return _err(400, "completion_window must be '24h'", param="completion_window")
        if (
            not isinstance(metadata, dict)
            or len(metadata) > 16
            or not all(isinstance(v, str) for v in metadata.values())
        ):
            return _err(400, "metadata: at most 16 string values", param="metadata")
        now, wall = self.clock(), int(time.time())
        obj = {
            "id": _id("batch_"),
            "object": "batch",
            "endpoint": body["endpoint"],
            "model": None,
            "errors": None,
            "input_file_id": stored.obj["id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": wall,
            "in_progress_at": None,
            "expires_at": wall + 24 * 3600,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "usage": None,
            "metadata": dict(metadata),
        }
        delay = (
            self.batch_delay_s
            if isinstance(self.batch_delay_s, int | float)
            else self._rng.uniform(*self.batch_delay_s)
        )
        expires, loses, fails = (self._picked(name, obj) for name in ("expire_batches", "lose_files", "fail_batches"))
        lines, errors = self._lines(stored.content, delay, expires)
        if fails:
            errors = errors or [
                {"code": "failed", "line": None, "message": "The batch failed (test server).", "param": None}
            ]
        self.batches[obj["id"]] = _Batch(obj, now, delay, lines, expires, loses, errors)
        self.counters["batches_created"] += 1
        obj["model"] = next((line.body.get("model") for line in lines if line.status == 200), None)
        return 200, obj, JSON

    def _picked(self, knob: str, batch: dict) -> bool:
        pick: Pick = getattr(self, knob)
        if callable(pick):
            return bool(pick(batch))
        if pick > 0:
            setattr(self, knob, pick - 1)
        return pick > 0

    def _lines(self, content: bytes, delay: float, expires: bool) -> tuple[list[_Line], list[dict]]:
        """Every request line answered now (at a seeded moment of the batch's run), or the validation
        errors that fail the batch (a line that is not JSON, a wrong url, a repeated custom_id)."""
        lines: list[_Line] = []
        errors: list[dict] = []
        seen: set[str] = set()
        for no, text in enumerate(content.decode().splitlines(), start=1):
            if not text.strip():
                continue
            try:
                request = json.loads(text)
                custom_id, url, body = request["custom_id"], request["url"], request["body"]
            except (ValueError, KeyError, TypeError):
                errors.append({"code": "invalid_json_line", "line": no, "message": "not a request line", "param": None})
                continue
            if url != "/v1/chat/completions" or request.get("method") != "POST" or custom_id in seen:
                code = "duplicate_custom_id" if custom_id in seen else "invalid_url"
                errors.append({"code": code, "line": no, "message": f"line {no}: {code}", "param": None})
                continue
            seen.add(custom_id)
            lines.append(self._answer(str(custom_id), body, delay))
        if not lines and not errors:
            errors.append({"code": "empty_file", "line": None, "message": "The input file is empty.", "param": None})
        if expires:  # half the lines (in a seeded order) are never answered: the window runs out
            for line in self._rng.sample(lines, len(lines) - len(lines) // 2):
                line.done_at = float("inf")
        return lines, errors

    def _answer(self, custom_id: str, body: dict, delay: float) -> _Line:
        draw, done_at = self._rng.random(), self._rng.uniform(0.1, 0.9) * delay
        text = " ".join(str(m.get("content") or "") for m in body.get("messages", []) if isinstance(m, dict))
        if self.poison_marker and self.poison_marker in text:
            status, answer, _ = _err(400, "Poisoned document (test server).", "messages", "context_length_exceeded")
        elif draw < self.batch_fail_rate:
            status, answer = 500, {"error": {**SERVER_ERROR}}
        else:
            status, answer = self.chat(body)
        return _Line(custom_id, done_at, status, answer)

    def _list(self, query: dict[str, str]) -> Answer:
        newest_first = list(self.batches.values())[::-1]
        after = query.get("after")
        if after:
            ids = [b.obj["id"] for b in newest_first]
            newest_first = newest_first[ids.index(after) + 1 :] if after in ids else []
        limit = max(1, min(100, int(query.get("limit", 20))))
        page = [self._advanced(b).obj for b in newest_first[:limit]]
        first, last = (page[0]["id"], page[-1]["id"]) if page else (None, None)
        listing = {"object": "list", "data": page, "first_id": first, "last_id": last}
        return 200, {**listing, "has_more": len(newest_first) > limit}, JSON

    def _batch(self, batch_id: str, then: Callable[[_Batch], Answer]) -> Answer:
        batch = self.batches.get(batch_id)
        if batch is None:
            return _err(404, f"No batch found with id '{batch_id}'.", param="batch_id")
        return then(self._advanced(batch))

    def _cancel(self, batch: _Batch) -> Answer:
        status = batch.obj["status"]
        if status in TERMINAL:
            return _err(400, f"Cannot cancel a batch with status '{status}'.")
        if status != "cancelling":
            batch.cancel_at = self.clock() - batch.started
            batch.cancelled_after = self.cancel_delay_s
            batch.obj.update(status="cancelling", cancelling_at=self._at(batch, batch.cancel_at))
            self.counters["batches_cancelled"] += 1
        return 200, self._advanced(batch).obj, JSON

    def _at(self, batch: _Batch, offset: float) -> int:
        return int(batch.obj["created_at"] + offset)

    def _advanced(self, batch: _Batch) -> _Batch:
        """The batch as it stands now on the monotonic clock (its result files made once, on its end)."""
        obj, d = batch.obj, batch.delay
        if obj["status"] in TERMINAL:
            return batch
        elapsed = self.clock() - batch.started
        if batch.cancel_at is not None:
            if elapsed >= batch.cancel_at + batch.cancelled_after:
                self._finish(batch, "cancelled", batch.cancel_at + batch.cancelled_after, batch.cancel_at, CANCELLED)
            return batch
        if elapsed >= 0.1 * d and batch.fails:
            obj.update(
                status="failed", failed_at=self._at(batch, 0.1 * d), errors={"object": "list", "data": batch.fails}
            )
            return batch
        if elapsed >= 0.1 * d:
            obj.update(status="in_progress", in_progress_at=self._at(batch, 0.1 * d))
            done = [line for line in batch.lines if line.done_at <= elapsed]
            ok = sum(1 for line in done if line.status == 200)
            obj["request_counts"] = {"total": len(batch.lines), "completed": ok, "failed": len(done) - ok}
        if elapsed >= 0.9 * d and not batch.expires:
            obj.update(status="finalizing", finalizing_at=self._at(batch, 0.9 * d))
        if elapsed >= d:
            self._finish(batch, "expired" if batch.expires else "completed", d, d)  # by 0.9 d, unless it expires
        return batch

    def _finish(self, batch: _Batch, status: str, at: float, cut: float, unanswered: dict = EXPIRED) -> None:
        """End the batch ``at`` seconds after its create, writing its result files: the lines answered
        by ``cut`` with their answers, the rest as ``unanswered`` errors; each file in a seeded shuffled
        order (the provider promises none)."""
        obj, rid = batch.obj, batch.obj["id"]
        out: list[dict] = []
        errs: list[dict] = []
        usage = {"input_tokens": 0, "cached": 0, "output_tokens": 0}
        for line in batch.lines:
            entry = {"id": _id("batch_req_"), "custom_id": line.custom_id}
            if line.done_at > cut:
                errs.append({**entry, "response": None, "error": unanswered})
                continue
            self.counters["batch_lines"] += 1
            response = {"status_code": line.status, "request_id": line.request_id, "body": line.body}
            (out if line.status == 200 else errs).append({**entry, "response": response, "error": None})
            if line.status != 200:
                self.counters["batch_lines_failed"] += 1
                continue
            used = line.body.get("usage") or {}
            usage["input_tokens"] += int(used.get("prompt_tokens", 0))
            usage["output_tokens"] += int(used.get("completion_tokens", 0))
            usage["cached"] += int((used.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
        self._rng.shuffle(out)
        self._rng.shuffle(errs)
        for name, entries, key in (("output", out, "output_file_id"), ("errors", errs, "error_file_id")):
            if entries:
                text = "".join(json.dumps(e) + "\n" for e in entries).encode()
                obj[key] = self._store(f"{rid}_{name}.jsonl", "batch_output", text, lost=batch.loses_files).obj["id"]
        ok = len(out)
        obj.update(
            status=status,
            request_counts={"total": len(batch.lines), "completed": ok, "failed": len(batch.lines) - ok},
            usage={
                "input_tokens": usage["input_tokens"],
                "input_tokens_details": {"cached_tokens": usage["cached"]},
                "output_tokens": usage["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            },
        )
        obj[f"{status}_at"] = self._at(batch, at)


# Counting batches in creation order, for a CLI ``--expire-batches at:2,5``.
def pick_from_cli(text: str) -> Pick:
    """``N`` (the next N batches) or ``at:I,J`` (the I-th and J-th batches created, from 1)."""
    if not text.startswith("at:"):
        return int(text)
    wanted, created = {int(x) for x in text[3:].split(",") if x}, itertools.count(1)
    return lambda _batch: next(created) in wanted
