"""The review cache (issue 46): a docs set reviewed twice, one section edited in a few documents.

A CI job reviews the same pages on every push. Here: ``DOCS`` Markdown documents (seeded, 6 to 10
sections of 1 to 3 KB each, so each is 1 to 3 chunks at the default DOCLLM_LLM_MAX_CHUNK_CHARS)
are submitted (``docllm submit``'s producer, in the bench's process) and reviewed by one
``docllm worker`` process against the OpenAI-compatible test server
(``tests/support/llm_server.py``: answers after 0.5 to 1.5 s, about one token per 4 characters).
Then ``EDITED`` of them get one sentence added to one section, and the whole set is submitted
again. Per run: the chat requests the server answered, the prompt and completion tokens and the
cost on the rows (``DOCLLM_LLM_PRICES``), the chunks served from the cache (the reports'
``cached``), and the time from the first submit to the last task's end.

    PYTHONPATH=src:. python -m bench.review_cache [--quick] [--off] [--backend mariadb]

``--off`` runs the same with DOCLLM_REVIEW_CACHE=off (what run 2 cost before the cache).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.common import PYTHON, Env, child_env, spawn, stop, tail
from docllm.adapters.sql.migrations import upgrade_schema
from tests.support.llm_server import FakeLLM

DOCS, EDITED = 50, 5
QUICK_DOCS, QUICK_EDITED = 10, 1
MODEL = "gpt-4o-mini"
PRICES = f"{MODEL}=0.15/0.60"  # USD per 1M tokens
LATENCY_MS = (500.0, 1500.0)
CONCURRENCY = 16
PREFIX = "benchcache"
WORDS = ("queue", "worker", "lease", "retry", "reaper", "commit", "review", "chunk", "section", "heading", "deploy")


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
    return " ".join(words).capitalize() + "."


def document(i: int, rng: random.Random) -> list[str]:
    """The sections of document ``i`` (each starts with its heading)."""
    sections = []
    for s in range(rng.randint(6, 10)):
        size = rng.randint(1000, 3000)
        paragraphs, text = [], ""
        while len(text) < size:
            paragraph = " ".join(sentence(rng) for _ in range(rng.randint(3, 6)))
            paragraphs.append(paragraph)
            text = "\n\n".join(paragraphs)
        sections.append(f"## Part {s + 1} of guide {i}\n\n{text}\n")
    return sections


def write_set(folder: Path, docs: dict[int, list[str]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, sections in docs.items():
        path = folder / f"guide-{i:03d}.md"
        path.write_text(f"# Guide {i}\n\n" + "\n".join(sections), encoding="utf-8")
        paths.append(path)
    return paths


def submitter(env: dict[str, str]) -> Any:
    """What ``docllm submit`` does, in this process (the CLI's start-up, seconds on a loaded
    machine, is not what is measured): a row, then its payload, per document."""
    import redis

    from docllm.adapters.redis.queue import RedisTaskQueue
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
    from docllm.domain.tasks.producer import submit

    repo = SqlAlchemyTaskRepository(make_engine(env["DOCLLM_DATABASE_URL"]))
    queue = RedisTaskQueue(redis.Redis.from_url(env["DOCLLM_REDIS_URL"]), PREFIX)

    def send(paths: list[Path]) -> list[int]:
        return [submit(repo, queue, p.name, p.read_text(encoding="utf-8")).task_id for p in paths]

    return send


def rows(engine: sa.Engine, ids: list[int]) -> list[dict[str, Any]]:
    cols = "task_id, status, result, llm_calls, prompt_tokens, completion_tokens, cost_usd"
    query = sa.text(f"SELECT {cols} FROM task_doc_llm WHERE task_id IN :ids").bindparams(  # noqa: S608
        sa.bindparam("ids", expanding=True)
    )
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query, {"ids": ids}).mappings()]


def run_once(send: Any, engine: sa.Engine, llm: FakeLLM, paths: list[Path]) -> dict[str, Any]:
    asked = sum(r["path"].endswith("/chat/completions") for r in llm.requests)
    started = time.monotonic()
    ids = send(paths)
    submitted = time.monotonic()
    while True:
        found = rows(engine, ids)
        if all(r["status"] in ("success", "failed") for r in found):
            break
        if time.monotonic() - started > 900:
            raise RuntimeError("the run did not end within 15 minutes")
        time.sleep(0.05)
    seconds, reviewed = time.monotonic() - started, time.monotonic() - submitted
    reports = [json.loads(r["result"]) for r in found if r["result"]]
    return {
        "tasks": len(found),
        "failed": sum(r["status"] == "failed" for r in found),
        "chunks": sum(rep["chunks"] for rep in reports),
        "from_cache": sum(len(rep.get("cached") or []) for rep in reports),
        "requests": sum(r["path"].endswith("/chat/completions") for r in llm.requests) - asked,
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in found),
        "completion_tokens": sum(r["completion_tokens"] or 0 for r in found),
        "cost_usd": sum(r["cost_usd"] or 0.0 for r in found),
        "seconds": seconds,
        "reviewed_seconds": reviewed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--off", action="store_true", help="DOCLLM_REVIEW_CACHE=off")
    parser.add_argument("--backend", choices=("sqlite", "mariadb"), default="sqlite")
    args = parser.parse_args(argv)
    n, edited = (QUICK_DOCS, QUICK_EDITED) if args.quick else (DOCS, EDITED)
    rng = random.Random(46)
    docs = {i: document(i, rng) for i in range(1, n + 1)}
    with Env(args.quick) as bench, FakeLLM(latency_ms=LATENCY_MS, seed=46) as llm:
        url = bench.new_database(args.backend)
        engine = sa.create_engine(url)
        upgrade_schema(engine)
        env = child_env(
            DOCLLM_REDIS_URL=bench.redis_url(0),
            DOCLLM_DATABASE_URL=url,
            DOCLLM_QUEUE_PREFIX=PREFIX,
            DOCLLM_HOME=str(bench.dir / "home"),
            DOCLLM_LOG_LEVEL="WARNING",
            DOCLLM_CONCURRENCY=str(CONCURRENCY),
            DOCLLM_LLM_PROVIDER="openai",
            DOCLLM_LLM_BASE_URL=llm.base_url,
            DOCLLM_LLM_API_KEY="sk-bench",
            DOCLLM_LLM_MODEL=MODEL,
            DOCLLM_LLM_PRICES=PRICES,
            DOCLLM_REVIEW_CACHE="off" if args.off else "on",
        )
        log = bench.dir / "worker.log"
        worker = spawn([PYTHON, "-m", "docllm.entrypoints.worker"], env, log)
        send = submitter(env)
        try:
            warm = bench.dir / "warm-up.md"  # the worker started and connected before the clock runs
            warm.write_text("# Warm-up\n\nNot part of the set.\n", encoding="utf-8")
            run_once(send, engine, llm, [warm])
            first = run_once(send, engine, llm, write_set(bench.dir / "run1", docs))
            for i in rng.sample(sorted(docs), edited):  # one sentence added to one section
                sections = docs[i]
                s = rng.randrange(len(sections))
                sections[s] = sections[s].rstrip("\n") + " " + sentence(rng) + "\n"
            second = run_once(send, engine, llm, write_set(bench.dir / "run2", docs))
        except BaseException:
            print(tail(log), file=sys.stderr)
            raise
        finally:
            stop(worker)
            engine.dispose()
    report(first, second, n, edited, args)
    return 0


def report(first: dict[str, Any], second: dict[str, Any], n: int, edited: int, args: argparse.Namespace) -> None:
    cache = "off" if args.off else "on"
    print(f"{n} documents, {edited} with one section edited; DOCLLM_REVIEW_CACHE={cache}; {args.backend}")
    print("| | run 1 | run 2 | run 2 / run 1 |")
    print("|---|---|---|---|")
    for key, label in (
        ("chunks", "chunks reviewed"),
        ("from_cache", "chunks from the cache"),
        ("requests", "chat requests"),
        ("prompt_tokens", "prompt tokens"),
        ("completion_tokens", "completion tokens"),
        ("cost_usd", "cost (USD)"),
        ("seconds", "time, submit to last end (s)"),
        ("reviewed_seconds", "of which after the submit returned (s)"),
    ):
        a, b = first[key], second[key]
        ratio = f"{100 * b / a:.1f} %" if a else "-"
        shown = (a, b)
        if key == "cost_usd":
            shown = (f"{a:.4f}", f"{b:.4f}")
        elif key.endswith("seconds"):
            shown = (f"{a:.1f}", f"{b:.1f}")
        print(f"| {label} | {shown[0]} | {shown[1]} | {ratio} |")
    if first["failed"] or second["failed"]:
        print(f"FAILED tasks: run 1 {first['failed']}, run 2 {second['failed']}")


if __name__ == "__main__":
    sys.exit(main())
