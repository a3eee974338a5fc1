"""The plan step: an experiment resolved once and checked whole before anything touches the
network. Each input fault a run used to find only after minutes (in prepare() or the workload)
is now `wearlab validate`'s exit 2 with file:line:field - one fixture each - and `wearlab run` of
such a file touches nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ROOT, wearlab
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.declarations import Catalog
from wearlab.model.experiment_file import load_experiment
from wearlab.model.features import KernelFeature
from wearlab.model.media import Medium
from wearlab.plan.plan import plan

HANDOVER_TOPO = """\
name: ho
nodes:
  watch:  {role: wearable}
  phone:  {role: phone, kind: host}
  ap:     {role: ap}
  server: {role: server}
links:
  - {between: [watch, phone], profile: bt-classic}
  - {between: [watch, ap], rate: 10Mbit, delay: 5ms}
  - {between: [phone, ap], profile: wifi-5g-good}
  - {between: [ap, server], profile: wan}
"""

STREAM = ("workload: {kind: stream, client: watch, server: server, path: phone, direction: down, "
          "duration: 5s, mptcp: true}\n")


def problems(path: Path, **kw) -> list:
    with pytest.raises(InputError) as e:
        plan(load_experiment(path, CATALOG, **kw))
    return e.value.problems


def one(path: Path, **kw):
    found = problems(path, **kw)
    assert len(found) == 1, found
    return found[0]


def test_a_handover_needs_a_declared_wifi_link(write_yaml):
    """The watch-AP link has explicit values and no profile: its medium is not declared, so it is
    no WiFi path (wearlab never infers a medium from a name)."""
    write_yaml("ho.yaml", HANDOVER_TOPO)
    exp = write_yaml("e.yaml", f"topology: ho.yaml\n{STREAM}nodes:\n  watch: {{interface_policy: reactive}}\n")
    p = one(exp)
    assert (p.file, p.line, p.field) == (str(exp), 4, "nodes.watch.interface_policy")
    assert "BT path and a WiFi path" in p.message and "declare no medium" in p.message and "ap" in p.message
    # Declaring it is all it takes.
    write_yaml("ho.yaml", HANDOVER_TOPO.replace("rate: 10Mbit, delay: 5ms", "rate: 10Mbit, delay: 5ms, medium: wifi"))
    assert plan(load_experiment(exp, CATALOG)).network.link("watch", "ap").medium == Medium.WIFI


def test_recovery_min_above_recovery_max(write_yaml):
    exp = write_yaml("e.yaml", f"topology: {ROOT}/topologies/bt-sniff.yaml\n{STREAM.replace(', mptcp: true', '')}"
                               "nodes:\n  watch: {radio: bt, recovery_min: 2s, recovery_max: 1s}\n")
    p = one(exp)
    assert (p.line, p.field) == (4, "nodes.watch.recovery_min") and "above recovery_max" in p.message


def test_recovery_min_from_the_matrix_and_from_set(write_yaml):
    exp = write_yaml("e.yaml", f"topology: {ROOT}/topologies/bt-sniff.yaml\n{STREAM.replace(', mptcp: true', '')}"
                               "nodes:\n  watch: {radio: bt}\nmatrix:\n  watch.recovery_min: [0.5s, 3s]\n")
    p = one(exp)
    assert (p.line, p.field) == (6, "matrix[watch.recovery_min][1]")
    p = one(exp, overrides={"watch.recovery_min": "3s"})
    assert (p.file, p.line, p.field) == ("command line", None, "--set watch.recovery_min")


def test_a_server_kind_without_the_service(write_yaml):
    exp = write_yaml("e.yaml", """\
topology:
  nodes: {watch: {role: wearable}, server: {role: server, kind: host}}
  links: [{between: [watch, server], delay: 5ms}]
workload: {kind: http-get, client: watch, server: server, protocol: https}
""")
    p = one(exp)
    assert (p.line, p.field) == (4, "workload.server") and "offers no https" in p.message


def test_a_proactive_handover_without_mptcp(write_yaml):
    exp = write_yaml("e.yaml", f"topology: {ROOT}/topologies/handover.yaml\n{STREAM.replace('true', 'false')}"
                               "nodes:\n  watch: {interface_policy: proactive}\n")
    p = one(exp)
    assert (p.line, p.field) == (4, "nodes.watch.interface_policy") and "mptcp: true" in p.message


def test_a_radio_needs_one_bt_link_to_a_phone(write_yaml):
    exp = write_yaml("e.yaml", f"topology: {ROOT}/topologies/wearable-basic.yaml\n"
                               "workload: {kind: stream, client: watch, server: server, path: ap, duration: 5s}\n"
                               "matrix:\n  watch.radio: [none, bt]\n")
    assert plan(load_experiment(exp, CATALOG)).radio_nodes() == {"watch"}   # wearable-basic has a bt-classic link
    write_yaml("t.yaml", (ROOT / "topologies" / "wearable-basic.yaml").read_text().replace("profile: bt-classic",
                                                                                         "rate: 1Mbit"))
    exp.write_text(exp.read_text().replace(f"{ROOT}/topologies/wearable-basic.yaml", "t.yaml"))
    p = one(exp)
    assert (p.line, p.field) == (4, "matrix[watch.radio][1]") and "exactly one Bluetooth link" in p.message


def test_the_plan_is_the_experiment_resolved_once():
    p = plan(load_experiment(ROOT / "experiments" / "handover.yaml", CATALOG))
    assert len(p.cells) == 6 and len(p.groups()) == 3          # 3 handover policies x 2 apps
    assert [lp.medium for lp in p.network.links] == [Medium.BT, Medium.WIFI, Medium.WIFI, Medium.WIRED]
    assert {KernelFeature.NETEM, KernelFeature.MPTCP} <= p.features
    assert all(5001 in group["server"] for group in p.ports)   # the stream agent, in every group
    assert "handover_p1_s" in [m.name for m in p.columns.metrics]
    doc = json.loads(json.dumps(p.to_document()))              # JSON as it is, no custom encoder
    assert doc["runs"] == 18 and doc["links"][0]["medium"] == "bt"
    sniff = plan(load_experiment(ROOT / "experiments" / "sniff.yaml", CATALOG))
    assert {KernelFeature.PLUG, KernelFeature.HTB} <= sniff.features
    assert sniff.network.link("watch", "phone").shaper.value == "htb"   # a sleeping radio: htb above the plug


def test_ports_that_collide_on_a_node_are_an_input_error(write_yaml):
    """Two of wearlab's programs on one port of one node: found by the plan, not by a bind error."""
    nginx = CATALOG.node_kinds["nginx"]

    class Clashing(nginx):   # a server kind whose software also wants the stream agent's port
        name = "clash"

        @classmethod
        def ports(cls, settings, needs):
            return {**super().ports(settings, needs), 5001: "clash's own daemon"}

    catalog = Catalog.of([*CATALOG.node_kinds.values(), Clashing], list(CATALOG.workloads.values()),
                         CATALOG.default_kinds)
    exp = write_yaml("e.yaml", """\
topology:
  nodes: {watch: {role: wearable}, server: {role: server, kind: clash}}
  links: [{between: [watch, server], delay: 5ms}]
workload: {kind: stream, client: watch, server: server, duration: 5s}
""")
    with pytest.raises(InputError) as e:
        plan(load_experiment(exp, catalog))
    [p] = e.value.problems
    assert p.line == 2 and "port 5001 on server" in p.message


def test_validate_and_run_refuse_before_touching_anything(write_yaml, tmp_path):
    exp = write_yaml("e.yaml", f"topology: {ROOT}/topologies/handover.yaml\n{STREAM.replace('true', 'false')}"
                               "nodes:\n  watch: {interface_policy: proactive}\n")
    res = wearlab("validate", "--no-kernel", str(exp))
    assert res.returncode == 2 and f"{exp}:4: nodes.watch.interface_policy:" in res.stderr, res.stderr
    # Its own ledger (WEARLAB_LEDGER), so other wearlab runs on the machine cannot blur the check:
    # a refused run records nothing - the ledger's directory is never even made.
    own = tmp_path / "ledger"
    res = wearlab("run", str(exp), "--out", str(tmp_path / "results"),
                  env={**os.environ, "WEARLAB_LEDGER": str(own)})
    assert res.returncode == 2 and f"{exp}:4: nodes.watch.interface_policy:" in res.stderr, res.stderr
    assert not (tmp_path / "results").exists()                 # no results directory
    assert not own.exists()                                    # no guest, no network in the ledger


def test_plan_command_prints_the_plan():
    res = wearlab("plan", str(ROOT / "experiments" / "quickstart.yaml"), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"] == 60 and len(doc["cells"]) == 12
    assert {n["need"] for n in doc["needs"]} == {"files", "relay"}
    res = wearlab("plan", str(ROOT / "experiments" / "quickstart.yaml"), "--set", "size=1KB")
    assert res.returncode == 0 and "4 cells" in res.stdout, res.stdout


def test_plan_table_shows_only_the_node_settings_that_vary():
    # Seed 003's interface selection sweeps one watch setting (its policy) over a wearable with
    # ~20 settings: the table names that one, not the node's whole list in every cell.
    res = wearlab("plan", str(ROOT / "experiments" / "seeds" / "003-interface-selection.yaml"),
                  env={**os.environ, "COLUMNS": "300"})
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if "watch: wearable" in line]
    assert len(rows) == 21, res.stdout            # one per cell: 24 less the 3 matrix.exclude drops
    assert all("interface_policy=" in r for r in rows), rows
    assert not any("sniff_timer" in r or "radio=" in r for r in rows), rows[0]


def test_tcpcrypts_kernel_features_come_with_its_daemon_whatever_the_workload(write_yaml):
    """tcpcryptd needs a BPF sock_ops program (TCP-ENO's option) and iptables REDIRECT (it takes the
    node's connections): a plan lists both when some cell runs the daemon, for a GET, a stream, a
    page load and the characterizer alike, and sock_ops only then (REDIRECT has other users: a
    phone's transparent proxy, a wearable's transport)."""
    tcpcrypt = {KernelFeature.BPF_SOCK_OPS, KernelFeature.IPT_REDIRECT}
    topo = f"topology: {ROOT}/topologies/wearable-basic.yaml\n"
    get = topo + "workload: {kind: http-get, client: watch, server: server, path: ap}\n"
    stream = topo + "workload: {kind: stream, client: watch, server: server, path: ap, duration: 5s}\n"
    cases = {"get-plain": (get + "matrix: {protocol: [http, https], size: [1KB]}\n", False),
             "get-crypt": (get + "matrix: {protocol: [http, tcpcrypt], size: [1KB]}\n", True),
             "stream-plain": (stream, False),
             "stream-crypt": (stream + "matrix: {tcpcrypt: [false, true]}\n", True)}
    for name, (text, crypt) in cases.items():
        features = plan(load_experiment(write_yaml(f"{name}.yaml", text), CATALOG)).features
        assert (tcpcrypt <= features) is crypt and (KernelFeature.BPF_SOCK_OPS in features) is crypt, (name, features)
    for path in ("experiments/seeds/004-characterizer.yaml", "experiments/page-load.yaml"):
        p = plan(load_experiment(ROOT / path, CATALOG))
        crypt = any(c.values.get("protocol") == "tcpcrypt" for c in p.cells) or "characterizer" in path
        assert (tcpcrypt <= p.features) is crypt and (KernelFeature.BPF_SOCK_OPS in p.features) is crypt, \
            (path, p.features)
