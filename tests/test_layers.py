"""The house's layering holds (pyproject's import-linter contract: cli -> catalog -> run -> report ->
workloads -> nodes -> measure | realize -> runtime -> plan -> model -> errors), and no module of
wearlab imports itself back through others (an import circle), function-level and TYPE_CHECKING
imports included. `make test` runs lint-imports too; this test says which circle when one appears."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import grimp

from conftest import ROOT


def test_layers_contract_is_kept():
    res = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout[-3000:]


def circles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_no_import_circle():
    graph = grimp.build_graph("wearlab", include_external_packages=False)
    assert circles(graph) == []


SRC = Path(__file__).resolve().parent.parent / "src" / "wearlab"
SAME_CONCEPT = "same concept as"   # what a module's docstring says when it shares a name on purpose


def test_no_two_modules_in_different_layers_share_a_name():
    """One name per concept: `run/launch.py` beside `runtime/launch.py` cost a newcomer a file
    each time. A shared base name is allowed only where both docstrings say it is the same
    concept seen from two layers."""
    by_name: dict[str, list[Path]] = {}
    for p in SRC.rglob("*.py"):
        if p.name != "__init__.py":
            by_name.setdefault(p.name, []).append(p)
    shared = {n: ps for n, ps in by_name.items() if len(ps) > 1}
    unexplained = {n: [str(p.relative_to(SRC)) for p in ps] for n, ps in shared.items()
                   if not all(SAME_CONCEPT in (ast.get_docstring(ast.parse(p.read_text())) or "").lower()
                              for p in ps)}
    assert unexplained == {}


def test_a_workloads_and_a_node_kinds_name_is_written_once():
    """`name = "http-get"` in the class, and nowhere else as a declaration: no `kind = ...` class
    attribute beside it, no `Literal["http-get"]` field repeating it (the YAML's `workload: {kind:
    http-get}` is dispatched to the class by its name)."""
    from wearlab.catalog import CATALOG

    for name, cls in [*CATALOG.workloads.items(), *CATALOG.node_kinds.items()]:
        assert cls.name == name
        tree = ast.parse(Path(inspect.getsourcefile(cls)).read_text())
        body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__).body
        declared = [t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        assert declared.count("name") == 1 and "kind" not in declared, cls.__name__
        literals = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == "Literal"
                    and name in ast.unparse(n.slice)]
        assert literals == [], f"{name!r} is repeated in a Literal in {cls.__module__}"
