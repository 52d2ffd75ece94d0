"""The documents of a chaos run: written, submitted in waves with ``docllm submit``, and what came back."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.chaos.bad_input import BIG_NAME
from tests.e2e.chaos.counters import Counters
from tests.e2e.chaos.settings import ChaosSettings
from tests.e2e.harness import Harness, skewed, write_documents


class Workload:
    def __init__(
        self,
        settings: ChaosSettings,
        harness: Harness,
        workdir: Path,
        count: Counters,
        problems: list[str],
        say: Callable[[str], None],
    ):
        self.s, self.harness, self.workdir = settings, harness, workdir
        self.count, self.problems, self.say = count, problems, say
        self.headings: dict[str, str] = {}  # document name -> first heading
        self.submitted: dict[int, str] = {}  # task_id -> name, from `docllm submit --json`
        self.big_task: int | None = None

    def write(self) -> None:
        self.headings = write_documents(self.workdir / "docs", self.s.tasks, "chaos")

    def submit(self, batch: list[str]) -> None:
        if not batch:
            return
        paths = [self.workdir / "docs" / name for name in batch]
        env = skewed(self.s.submit_skew, self.harness.env["PYTHONPATH"]) if self.s.submit_skew else None
        for _ in range(5):
            result = self.harness.cli("submit", "--json", *map(str, paths), env=env, check=False)
            self.count.submits += 1
            if result.returncode == 0:
                for task in json.loads(result.stdout):
                    self.submitted[task["task_id"]] = task["task_name"]
                return
            # Rows created before the failure stay and must be settled like the others (they are
            # checked by name); submitting again may create a second row for a document: fine.
            self.count.submit_failures += 1
            self.say(f"submit failed ({result.returncode}): {result.stderr.strip()[:200]}")
            time.sleep(2.0)  # a server restarting
        self.problems.append(f"docllm submit failed 5 times for {len(batch)} documents")

    def submit_big(self) -> None:
        path = self.workdir / BIG_NAME
        heading = "# A document of ten megabytes"
        paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 16 + "\n\n"
        size = self.s.big_document_bytes
        path.write_text((heading + "\n\n" + paragraph * (size // len(paragraph) + 1))[:size], encoding="utf-8")
        # The producer accepts it; the workers' limit (DOCLLM_MAX_DOCUMENT_BYTES, 5 MB) does not.
        result = self.harness.cli(
            "submit", "--json", str(path), check=False, env={"DOCLLM_MAX_DOCUMENT_BYTES": str(size + (1 << 20))}
        )
        if result.returncode != 0:
            self.problems.append(f"could not submit the 10 MB document: {result.stderr.strip()[:300]}")
            return
        [task] = json.loads(result.stdout)
        self.big_task = task["task_id"]
