"""The LlmBreaker port's four operations over one step function: the in-memory and the Redis
breakers differ only in where that step runs (a lock in the process, or breaker.lua)."""

from __future__ import annotations

from docllm.domain.llm.breaker import BreakerView


class BreakerOps:
    def _run(self, op: str, ok: bool = False, worker_id: str = "", count: int = 1) -> BreakerView:
        raise NotImplementedError

    def record(self, ok: bool, count: int = 1) -> BreakerView:
        return self._run("record", ok, count=count)

    def view(self) -> BreakerView:
        return self._run("view")

    def try_probe(self, worker_id: str) -> bool:
        return self._run("probe", worker_id=worker_id).changed == "probing"

    def probe_result(self, worker_id: str, ok: bool) -> BreakerView:
        return self._run("result", ok, worker_id)
