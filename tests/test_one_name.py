"""One name for which interface a wearable uses (issue 25 item 2): the wearable's
`interface_policy`. The handover modes are policies, `path` is filled in from the policy, and the
plan holds the transport each policy resolves to. Host only, no network: seconds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import plan

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = """topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: host}, ap: {role: ap}, server: {role: server}}
  links:
    - {between: [watch, phone], medium: bt}
    - {between: [watch, ap], medium: wifi}
    - {between: [phone, ap], medium: wired}
    - {between: [ap, server], medium: wired}
"""
STREAM = "workload: {kind: stream, client: watch, server: server, direction: down, duration: 2s, mptcp: true}\n"


def _write(tmp_path, text: str) -> Path:
    f = tmp_path / "e.yaml"
    f.write_text("name: one-name\nrepetitions: 1\n" + TOPOLOGY + text)
    return f


def test_shipped_files_name_a_wearables_interface_once():
    """No shipped experiment or docs example writes `path:` for a wearable client, or `handover`."""
    wearable_clients = []
    for f in sorted((ROOT / "experiments").rglob("*.yaml")):
        text = f.read_text()
        if "pages" in f.parts or not re.search(r"^workload:", text, re.M):
            continue
        exp = load_experiment(f, CATALOG)
        client = getattr(exp.workload, "client", None)
        if client and CATALOG.node_kinds[exp.topology.nodes[client].kind].first_hop_option:
            wearable_clients.append(f.name)
            assert not re.search(r"^  path:|^workload: \{[^}]*\bpath:", text, re.M), f
        assert not re.search(r"\bhandover: (reactive|proactive|wifi-always)|\.handover\b", text), f
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", f.read_text(), re.S):
            if re.search(r"^  client: (watch|glass)|client: watch", block, re.M):
                assert not re.search(r"^  path:|\bpath: (phone|ap)\b", block, re.M), (f, block)
            assert not re.search(r"\bhandover: (reactive|proactive|wifi-always)|\.handover\b", block), (f, block)
    assert len(wearable_clients) >= 30    # the check saw the suite (40 experiments, most with a watch)


def test_the_plan_resolves_each_policys_first_hop_and_transport(tmp_path):
    """The first hop is the neighbour across the policy's first medium; over the chunked
    transport the app's own connection goes through the phone (the transport moves its chunks)."""
    f = _write(tmp_path, STREAM.replace(", mptcp: true", "") + "matrix:\n  watch.interface_policy: [bt, wifi, adaptive]\n")
    p = plan(load_experiment(f, CATALOG))
    got = {c.values["watch.interface_policy"]: (c.values["path"], c.nodes["watch"].options["policy_transport"])
           for c in p.cells}
    assert got == {"bt": ("phone", "route"), "wifi": ("ap", "route"), "adaptive": ("phone", "chunked")}
    assert "path" not in p.fixed      # not one value for every cell
    f = _write(tmp_path, STREAM + "matrix:\n  watch.interface_policy: [reactive, proactive]\n")
    p = plan(load_experiment(f, CATALOG))
    got = {c.values["watch.interface_policy"]: (c.values["path"], c.nodes["watch"].options["policy_transport"])
           for c in p.cells}
    assert got == {"reactive": ("phone", "route"), "proactive": ("phone", "mptcp")}


def test_a_wifi_policy_over_the_chunked_transport_keeps_the_apps_connection_through_the_phone(tmp_path):
    f = _write(tmp_path, STREAM.replace(", mptcp: true", "") +
               "nodes:\n  watch: {interface_policy: wifi, policy_transport: chunked}\n")
    (cell,) = plan(load_experiment(f, CATALOG)).cells
    assert (cell.values["path"], cell.nodes["watch"].options["policy_transport"]) == ("phone", "chunked")


@pytest.mark.parametrize("text, line, field, message", [
    # a path that contradicts the policy: the file's line, what to write instead
    (STREAM.replace("direction", "path: ap, direction") + "nodes:\n  watch: {interface_policy: reactive}\n",
     10, "workload.path", "path names another: remove path"),
    # the old option: renamed, with what to write
    (STREAM + "nodes:\n  watch: {handover: reactive}\n", 12, "nodes.watch.handover",
     "no longer takes 'handover': write interface_policy: reactive"),
    (STREAM + "matrix:\n  watch.handover: [reactive, proactive]\n", 12, "matrix[watch.handover]",
     "no longer takes 'handover'"),
    # a transport the policy cannot use
    (STREAM + "nodes:\n  watch: {interface_policy: reactive, policy_transport: chunked}\n", 12,
     "nodes.watch.policy_transport", "carried out by route, not by chunked"),
])
def test_bad_input_names_file_line_and_field(tmp_path, text, line, field, message):
    f = _write(tmp_path, text)
    with pytest.raises(InputError) as e:
        plan(load_experiment(f, CATALOG))
    found = [p for p in e.value.problems if message in p.message]
    assert found and (found[0].file, found[0].line, found[0].field) == (str(f), line, field), e.value.problems


def test_the_same_first_hop_written_twice_is_redundant_not_wrong(tmp_path):
    f = _write(tmp_path, STREAM.replace("direction", "path: phone, direction") +
               "nodes:\n  watch: {interface_policy: proactive}\n")
    (cell,) = plan(load_experiment(f, CATALOG)).cells
    assert cell.values["path"] == "phone"


def test_the_cli_exits_2_without_a_traceback(tmp_path):
    f = _write(tmp_path, STREAM + "nodes:\n  watch: {handover: reactive}\n")
    res = subprocess.run([sys.executable, "-m", "wearlab", "plan", str(f)], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{f}:12: nodes.watch.handover: kind wearable no longer takes 'handover'" in res.stderr, res.stderr


def test_an_unknown_policy_is_named_before_any_cell_needs_its_first_hop(tmp_path):
    """A policy no kind can place keeps the default first hop, so the plan's own check names it
    (found by tests/test_mutations.py: the plan read a cell's missing path before its checks)."""
    f = _write(tmp_path, STREAM + "nodes:\n  watch: {interface_policy: 10 parsecs}\n")
    with pytest.raises(InputError) as e:
        plan(load_experiment(f, CATALOG))
    (p,) = e.value.problems
    assert (p.line, p.field) == (12, "nodes.watch.interface_policy") and "unknown interface policy" in p.message
