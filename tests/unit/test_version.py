"""The version moves with the schema: its minor number is the newest migration's revision.

A worker's version is what ``docllm workers`` shows, so an operator reads from it which schema the
process expects; a migration without a version bump would hide that. See CHANGELOG.md.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import docllm

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ROOT / "src" / "docllm" / "adapters" / "sql" / "migrations" / "versions"


def _assigned(name: str, text: str) -> str | None:
    """The string a module assigns to ``name`` at top level (``revision = "0004"``), or None."""
    found = re.search(rf'^{name}\s*=\s*(?:"([^"]*)"|None)\s*$', text, re.MULTILINE)
    assert found is not None, f"no top-level {name} = ..."
    return found.group(1)


def head_revision() -> int:
    """The revision no other migration revises (Alembic's head), as a number."""
    revises: dict[str, str | None] = {}
    for path in sorted(VERSIONS.glob("*.py")):
        text = path.read_text()
        revision = _assigned("revision", text)
        assert revision is not None and revision.isdigit(), f"{path.name}: revision ids are numbers ('0004')"
        revises[revision] = _assigned("down_revision", text)
    heads = set(revises) - {down for down in revises.values() if down is not None}
    assert len(heads) == 1, f"the migrations have {len(heads)} heads: {sorted(heads)}"
    return int(heads.pop())


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_package_and_project_say_the_same_version() -> None:
    assert docllm.__version__ == project_version()


def test_minor_version_is_the_newest_migration() -> None:
    _major, minor, _patch = (int(part) for part in project_version().split("."))
    head = head_revision()
    assert minor == head, (
        f"the newest migration is {head:04d} but the version is {project_version()}: a migration "
        f"bumps the minor version (0.{head}.0 in pyproject.toml and src/docllm/__init__.py, and a "
        "CHANGELOG.md entry)"
    )
