"""The house's layering holds (pyproject's import-linter contract: cli -> catalog -> run -> report ->
workloads -> nodes -> measure | realize -> runtime -> plan -> model -> errors), and no module of
wearlab imports itself back through others (an import circle), function-level and TYPE_CHECKING
imports included. `make test` runs lint-imports too; this test says which circle when one appears."""

from __future__ import annotations

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
