"""InMemoryRubricCatalog: the RubricCatalog over a dict, held to the same contract as the YAML one."""

from __future__ import annotations

from docllm.domain.errors import RubricError
from docllm.domain.review.rubric import Rubric


class InMemoryRubricCatalog:
    def __init__(self, *rubrics: Rubric):
        self._rubrics = {r.name: r for r in rubrics}

    def get(self, name: str) -> Rubric:
        try:
            return self._rubrics[name]
        except KeyError:
            known = ", ".join(sorted(self._rubrics)) or "none"
            raise RubricError(f"no rubric {name!r} (known: {known})") from None
