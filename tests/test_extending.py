"""docs/extending.md's checklists cannot drift from the code: every file they name exists, every
class, attribute and method they name is there, and a toy extension written from them alone
(tests/toy_extension/: a workload, a node kind, their result columns) registers through the
catalog, loads, plans, shows in `wearlab kinds` and runs.

The toy uses only what the checklists name: its classes declare nothing a checklist does not
list, and it imports only from files the page names."""

from __future__ import annotations

import ast
import csv
import dataclasses
import importlib
import json
import os
import re
import subprocess
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from conftest import ROOT, wearlab
from toy_extension import EXPERIMENT, TOY_CATALOG
from toy_extension.toy_exec import ToyExec
from toy_extension.toy_marker import ToyMarker
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.columns import Metric
from wearlab.model.experiment_file import load_experiment
from wearlab.model.media import Medium
from wearlab.model.quantities import UNITS
from wearlab.nodes.node_kind import NodeContext, NodeKind
from wearlab.plan.plan import plan
from wearlab.report import terminal
from wearlab.workloads.workload import Workload

DOC = ROOT / "docs" / "extending.md"
TOY = Path(__file__).resolve().parent / "toy_extension"
# Each checklist (a `## ` section of the page) and the class whose attributes its bullets name.
CHECKLISTS = {"A workload": Workload, "A node kind": NodeKind, "A link medium": Medium, "A result column": Metric}
# Bullet lists whose leading `names` are attributes of the checklist's class.
ATTRIBUTE_LISTS = ("**Declare**", "**Answer", "**Run**")
PATH = re.compile(r"^(?:src|tests|images|docs|bench)/[\w./<>-]+$")
CODE = re.compile(r"`([^`\n]+)`")
NAME = re.compile(r"^[A-Za-z_]\w*$")


def sections() -> dict[str, str]:
    out, title = {}, None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = ""
        elif title is not None:
            out[title] += line + "\n"
    return out


def named_paths(text: str) -> list[str]:
    return [c for c in CODE.findall(text) if PATH.match(c)]


def attribute_bullets(text: str) -> list[str]:
    """The names a checklist's Declare / Answer / Run bullets start with (`a`, `b`: ...)."""
    names, listing = [], False
    for line in text.splitlines():
        if line.startswith("**"):
            listing = line.startswith(ATTRIBUTE_LISTS)
        elif listing and line.startswith("- "):
            lead = line[2:].split(":", 1)[0]
            names += [n for n in CODE.findall(lead) if NAME.match(n)]
    return names


def has_attribute(cls: type, name: str) -> bool:
    """A class attribute, a declared-only ClassVar (`Fields`), a dataclass or pydantic field."""
    if hasattr(cls, name):
        return True
    for c in cls.__mro__:
        if name in getattr(c, "__annotations__", {}) or name in getattr(c, "__dataclass_fields__", {}):
            return True
        if name in getattr(c, "model_fields", {}):
            return True
    return False


def _module_of(path: str) -> str | None:
    if path.startswith("src/") and path.endswith(".py") and "<" not in path:
        return path[len("src/"):-len(".py")].replace("/", ".").removesuffix(".__init__")
    return None


def _imported(module: str, name: str) -> str:
    """The module `from module import name` reads: `name` itself when it is a module."""
    try:
        importlib.import_module(f"{module}.{name}")
        return f"{module}.{name}"
    except ImportError:
        return module


def test_the_page_has_the_four_checklists():
    assert set(CHECKLISTS) <= set(sections()), f"docs/extending.md lacks a checklist: {set(CHECKLISTS) - set(sections())}"


def test_every_file_the_checklists_name_exists():
    paths = named_paths(DOC.read_text())
    assert len(paths) > 20, paths
    missing = []
    for p in paths:
        if "<" in p:    # a new file: `src/wearlab/workloads/<name>.py` goes into a folder that exists
            if not (ROOT / p).parent.is_dir():
                missing.append(p)
        elif not (ROOT / p).exists():
            missing.append(p)
    assert missing == [], f"docs/extending.md names files that do not exist: {missing}"


def test_every_attribute_a_checklist_names_is_its_class():
    for title, cls in CHECKLISTS.items():
        names = attribute_bullets(sections()[title])
        if cls is not Medium:
            assert len(names) >= 6, (title, names)
        wrong = [n for n in names if not has_attribute(cls, n)]
        assert wrong == [], f"'{title}' in docs/extending.md names what {cls.__name__} does not have: {wrong}"


def test_every_class_and_name_the_page_names_is_in_a_file_it_names():
    """`Param`, `NodeView.links_of`, `CATALOG.extended`, `UNITS`: each is found in one of the
    modules the page names (or is an attribute of a checklist's class), so a rename fails here."""
    text = DOC.read_text()
    modules = [importlib.import_module(m) for m in map(_module_of, named_paths(text)) if m]
    spaces = [vars(m) for m in modules] + [vars(typing)]

    def resolve(token: str) -> bool:
        head, *rest = token.split(".")
        for space in spaces:
            if head in space:
                obj = space[head]
                return all(has_attribute(obj if isinstance(obj, type) else type(obj), a) or hasattr(obj, a)
                           for a in rest)
        return False

    tokens = {c for c in CODE.findall(text) if re.fullmatch(r"[A-Z]\w+(\.\w+)?", c)}   # `B`, `J`: units
    in_checklists = {n for title, cls in CHECKLISTS.items() for n in attribute_bullets(sections()[title])
                     if has_attribute(cls, n)}
    unknown = sorted(t for t in tokens if t not in in_checklists and not resolve(t))
    assert unknown == [], f"docs/extending.md names what no file it names has: {unknown}"


def test_units_the_page_lists_are_the_unit_table():
    column = sections()["A result column"]
    listed = re.search(r"Today's units are (.+?)\.\n", column.replace("\n  ", " ") + "\n", re.S)
    assert listed, "the result column checklist lists today's units"
    assert set(CODE.findall(listed.group(1))) == set(UNITS)


def test_the_toy_uses_only_what_the_checklists_name():
    """Built from the checklist alone: each toy class declares only attributes and methods its
    checklist names, and the toy imports wearlab only from files the page names."""
    named_modules = {m for m in map(_module_of, named_paths(DOC.read_text())) if m}
    for cls, title in ((ToyExec, "A workload"), (ToyMarker, "A node kind")):
        allowed = set(attribute_bullets(sections()[title]))
        tree = ast.parse((TOY / (cls.__module__.split(".")[-1] + ".py")).read_text())
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__).body
        declared = {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        declared |= {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert declared - allowed == set(), f"{cls.__name__} uses what '{title}' does not name"
        metrics = set(attribute_bullets(sections()["A result column"]))
        assert {f.name for f in dataclasses.fields(Metric)} <= metrics
    for f in TOY.glob("*.py"):
        imported = {_imported(n.module, a.name) for n in ast.walk(ast.parse(f.read_text()))
                    if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("wearlab") for a in n.names}
        imported = {m for m in imported if m != "wearlab.catalog"} - named_modules
        assert imported == set(), f"{f.name} imports from files docs/extending.md does not name: {imported}"


# -- the toy extension, registered through the catalog ------------------------------------------


def test_the_catalog_is_extended_not_replaced():
    assert set(TOY_CATALOG.workloads) == {*CATALOG.workloads, "toy-exec"}
    assert set(TOY_CATALOG.node_kinds) == {*CATALOG.node_kinds, "toy-marker"}
    assert TOY_CATALOG.default_kinds == CATALOG.default_kinds
    assert "toy-exec" not in CATALOG.workloads     # CATALOG itself is unchanged
    with pytest.raises(ValueError, match="share a name"):
        TOY_CATALOG.extended(workloads=[ToyExec])


def test_the_toy_experiment_needs_the_extended_catalog():
    with pytest.raises(InputError) as e:
        load_experiment(EXPERIMENT, CATALOG)
    (p,) = [p for p in e.value.problems if p.field == "workload.kind"]
    assert p.file == str(EXPERIMENT) and p.line is not None and "toy-exec" in p.message


def test_the_toy_experiment_loads_and_plans():
    exp = load_experiment(EXPERIMENT, TOY_CATALOG)
    p = plan(exp)
    assert p.workload is ToyExec
    assert len(p.cells) == 4 and len(p.groups()) == 2        # count x server.label; label restarts the server
    assert {c.nodes["server"].kind for c in p.cells} == {ToyMarker}
    assert {c.nodes["server"].options["label"] for c in p.cells} == {"near", "far"}
    units = {m.name: m.unit for m in p.columns.metrics}
    assert units["toy_exec_s"] == "s" and units["toy_commands"] == "count" and units["toy_marker_runs"] == "count"
    header = p.columns.runs_csv()
    assert {"count", "server.label", "toy_exec_s", "toy_marker_runs"} <= set(header)
    doc = json.loads(json.dumps(p.to_document(), default=str))
    assert {"toy_exec_s", "toy_commands", "toy_marker_runs"} <= set(doc["columns"]["metrics"])


def test_the_toys_checks_are_located(write_yaml):
    text = EXPERIMENT.read_text().replace("count: [1, 3]", "count: [1, 0]")
    bad = write_yaml("toy.yaml", text)
    with pytest.raises(InputError) as e:
        load_experiment(bad, TOY_CATALOG)
    (p,) = e.value.problems
    assert p.line == text.splitlines().index("  count: [1, 0]") + 1 and "count" in p.message

    text = EXPERIMENT.read_text().replace("server.label: [near, far]", "server.label: [near, far away]")
    bad = write_yaml("toy.yaml", text)
    with pytest.raises(InputError) as e:
        plan(load_experiment(bad, TOY_CATALOG))
    (p,) = e.value.problems
    assert p.line == text.splitlines().index("  server.label: [near, far away]") + 1
    assert "more than one word" in p.message


# -- `wearlab kinds`: every result column with its unit and meaning -------------------------------


def _kinds_text(catalog) -> list[str]:
    console = Console(record=True, width=400, color_system=None)
    assert terminal.kinds(catalog, console) == 0
    return console.export_text().splitlines()


def _row(lines: list[str], column: str) -> list[str]:
    for line in lines:
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 4 and cells[2] == column:
            return cells
    raise AssertionError(f"`wearlab kinds` shows no result column {column}")


def test_kinds_shows_every_result_column_with_its_unit_and_meaning():
    lines = _kinds_text(CATALOG)
    kinds = [*CATALOG.workloads.values(), *CATALOG.node_kinds.values()]
    for k in kinds:
        for m in k.metrics:
            cells = _row(lines, m.name)
            assert cells[3] == m.unit, (m.name, cells)
            assert cells[4] == m.better
            if m.doc:
                assert any(m.doc[:60] in line for line in lines), m.name
    for symbol, u in UNITS.items():
        assert any(f"│ {symbol} " in line and u.doc in line for line in lines), symbol


def test_kinds_shows_an_extensions_columns():
    lines = _kinds_text(TOY_CATALOG)
    for m in (*ToyExec.metrics, *ToyMarker.metrics):
        cells = _row(lines, m.name)
        assert cells[3] == m.unit and cells[5] == m.doc
    assert any("workload toy-exec" in line for line in lines)
    assert any("node kind toy-marker" in line for line in lines)


def test_the_kinds_command_prints_the_columns():
    res = wearlab("kinds", env={**os.environ, "COLUMNS": "300"}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "result columns" in res.stdout and "wire_total_s" in res.stdout and "units" in res.stdout


# -- running the toy ----------------------------------------------------------------------------


class _Shell:
    """A stand-in for the run's network, host-side: a node's shell is this machine's."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.commands: list[tuple[str, str]] = []

    def sh(self, node: str, script: str, *, check: bool = True) -> str:
        self.commands.append((node, script))
        return subprocess.run(["sh", "-c", script], check=check, capture_output=True, text=True).stdout


def test_the_toys_lifecycle_fills_exactly_their_columns(tmp_path):
    """Host-side, without a network: the calls the runner makes, in its order, and each row
    holding only declared columns."""
    p = plan(load_experiment(EXPERIMENT, TOY_CATALOG))
    net = _Shell(tmp_path)
    cell = p.cells[-1]
    setting = cell.nodes["server"]
    node = setting.kind(NodeContext(net=net, node="server", settings=dict(setting.options), workdir=tmp_path),
                        p.needs_of("server", setting))
    node.bring_up()
    node.ready()
    assert (tmp_path / "marker").read_text() == setting.options["label"]
    workload = ToyExec(load_experiment(EXPERIMENT, TOY_CATALOG).workload, SimpleNamespace(net=net))
    for rep in (1, 2):
        node.run_started(0)
        outcome = workload.run(dict(cell.values), rep)
        node.run_ended()
        row = {**node.run_metrics(), **outcome.row}
        assert set(row) == {m.name for m in (*ToyExec.metrics, *ToyMarker.metrics)}
        assert row["toy_marker_runs"] == rep and row["toy_commands"] == cell.values["count"]
        assert row["toy_exec_s"] > 0
    assert net.commands == [("watch", "true")] * 2 * cell.values["count"]
    node.shut_down()
    assert not (tmp_path / "marker").exists()


@pytest.mark.netem
def test_the_toy_experiment_runs(tmp_path):
    from wearlab.run.runner import run_experiment

    p = plan(load_experiment(EXPERIMENT, TOY_CATALOG))
    assert run_experiment(p, tmp_path, console=Console(file=open("/dev/null", "w"))) == 0
    with open(tmp_path / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 4 and {r["status"] for r in rows} == {"ok"}, rows
    for r in rows:
        assert int(r["toy_commands"]) == int(r["count"]) and float(r["toy_exec_s"]) > 0
    # The server restarts for each label (2 groups); its count starts again with it.
    assert max(int(r["toy_marker_runs"]) for r in rows) == 2
    # What compare and the exporter read: the columns with their units.
    declared = json.loads((tmp_path / "metadata.json").read_text())["columns"]["metrics"]
    assert declared["toy_exec_s"]["unit"] == "s" and declared["toy_marker_runs"]["unit"] == "count"
    assert "toy_exec_s" in json.loads((tmp_path / "summary.json").read_text()).__repr__()
