"""No import cycles among the runtime imports of ``src/docllm`` and ``sim/`` (issue 12).

The graph is read from the source (ASTs), so it also sees imports inside functions, which a cycle
check by importing would miss; imports under ``if TYPE_CHECKING:`` are not run and are left out."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"docllm": ROOT / "src" / "docllm", "sim": ROOT / "sim"}


def module_files(name: str, path: Path) -> dict[str, Path]:
    files = {}
    for f in sorted(path.rglob("*.py")):
        parts = [name, *f.relative_to(path).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = f
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(module: str, path: Path) -> set[str]:
    """Every module name an import statement of this file may load (``from a import b`` names both
    ``a`` and ``a.b``: ``b`` may be a module); relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):  # try/except: each handler's body
                visit(handler.body)

    visit(ast.parse(path.read_text(), str(path)).body)
    return names


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    return {m: (runtime_imports(m, f) & files.keys()) - {m} for m, f in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := dfs(start)):
            return found
    return None


def product_graph() -> dict[str, list[str]]:
    files = {m: f for name, path in PACKAGES.items() for m, f in module_files(name, path).items()}
    return {m: sorted(deps) for m, deps in import_graph(files).items()}


def test_src_and_sim_have_no_import_cycles():
    # Parsed in a process of its own: CPython 3.11's AST conversion keeps its recursion depth in
    # interpreter-wide state (gh-106905), so a thread an earlier test left running that parses too
    # (the offline reviewer checks Python code blocks) can make ast.parse raise SystemError here.
    code = "import json; from tests.unit.test_import_cycles import product_graph; print(json.dumps(product_graph()))"
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    graph = {m: set(deps) for m, deps in json.loads(out.stdout).items()}
    assert len(graph) > 60 and "docllm.entrypoints.cli" in graph and "sim.world" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_check_sees_a_cycle_even_inside_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("def thing():\n    from . import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    graph = import_graph(module_files("pkg", pkg))
    assert graph["pkg.b"] == {"pkg", "pkg.a"} and graph["pkg.c"] == set()
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
