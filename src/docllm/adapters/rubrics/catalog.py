"""YamlRubricCatalog: the RubricCatalog over a directory of ``NAME.yaml`` files.

A file is read and validated when a rubric is asked for, and kept until the file changes, so an
edited rubric is used by the next attempt without a restart, and a broken one fails only the tasks
that name it (their error names the file and line).
"""

from __future__ import annotations

import os
import threading

from docllm.adapters.rubrics.parse import MAX_RUBRIC_BYTES, parse_rubric
from docllm.domain.errors import RubricError
from docllm.domain.review.rubric import NAME_PATTERN, NAME_RULE, Rubric


class YamlRubricCatalog:
    def __init__(self, directory: str):
        self.directory = directory
        self._cache: dict[str, tuple[tuple[int, int], Rubric]] = {}
        self._lock = threading.Lock()  # port calls run on a thread pool

    def names(self) -> list[str]:
        try:
            files = os.listdir(self.directory)
        except OSError:
            return []
        stems = (f.removesuffix(".yaml") for f in files if f.endswith(".yaml"))
        return sorted(stem for stem in stems if NAME_PATTERN.fullmatch(stem))

    def get(self, name: str) -> Rubric:
        if not NAME_PATTERN.fullmatch(name):  # also keeps a name from reaching outside the directory
            raise RubricError(f"rubric name {name!r} must be {NAME_RULE}")
        path = os.path.join(self.directory, f"{name}.yaml")
        try:
            stat = os.stat(path)
        except OSError:
            known = ", ".join(self.names()) or "none"
            raise RubricError(f"no rubric {name!r} in {self.directory} (known: {known})") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if stat.st_size > MAX_RUBRIC_BYTES:
            raise RubricError(f"{path}:1: a rubric file is at most {MAX_RUBRIC_BYTES} bytes, this one {stat.st_size}")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise RubricError(f"{path}:1: cannot be read: {exc}") from None
        rubric = parse_rubric(text, path, name)
        with self._lock:
            self._cache[name] = (stamp, rubric)
        return rubric
