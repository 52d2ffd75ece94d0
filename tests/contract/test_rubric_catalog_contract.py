"""One contract for every RubricCatalog: the YAML files of a directory, and the in-memory twin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docllm.adapters.rubrics.catalog import YamlRubricCatalog
from docllm.adapters.rubrics.parse import parse_rubric
from docllm.domain.errors import RubricError
from docllm.domain.review.ports import RubricCatalog
from tests.support.memory.rubrics import InMemoryRubricCatalog

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rubrics" / "install-guide.yaml"


@pytest.fixture(params=["yaml", "memory"])
def catalog(request, tmp_path) -> RubricCatalog:
    if request.param == "yaml":
        (tmp_path / "install-guide.yaml").write_text(EXAMPLE.read_text())
        return YamlRubricCatalog(str(tmp_path))
    return InMemoryRubricCatalog(parse_rubric(EXAMPLE.read_text(), str(EXAMPLE), "install-guide"))


def test_a_known_rubric_is_returned_validated(catalog):
    rubric = catalog.get("install-guide")
    assert rubric.ref == "install-guide@1"
    assert [c.id for c in rubric.instructions] == ["steps-say-result"]


@pytest.mark.parametrize("name", ["nope", "../install-guide", "Install-Guide", "", "install-guide\n"])
def test_an_unknown_rubric_is_a_rubric_error_naming_it(catalog, name):
    with pytest.raises(RubricError, match=re.escape(repr(name))):
        catalog.get(name)
