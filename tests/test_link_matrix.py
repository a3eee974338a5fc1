"""A link's settings as matrix keys (`link.<link>.<field>`, model.link_settings): each cell's
planned links carry its values and nothing else changes, the band decides the 2.4 GHz coupling per
cell, the runs read the cell's links from the plan (LinkControl.enter_cell's tc lines, CellLinks'
coexistence controller), cells and claims address the key, and every bad key or value exits 2
naming file, line and field.

Host-side and fast: the plan in-process; the run's side with a network stand-in that records the
tc lines LinkControl would send (the lines themselves are plan.shaping's, whose netem physics the
guest tests check: tests/test_timeline_physics.py for changes in place).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import wearlab, yaml_dump
from wearlab.catalog import CATALOG
from wearlab.model.experiment_file import load_experiment
from wearlab.model.interference import Coupling
from wearlab.plan.plan import plan
from wearlab.realize.linkctl import LinkControl
from wearlab.run import runner

# The topology of docs/topologies.md's interference example, its WiFi link at 2 Mbit/s, 5 ms.
TOPOLOGY = {
    "nodes": {"watch": {"role": "wearable"}, "phone": {"role": "phone"}, "ap": {"role": "ap"},
              "server": {"role": "server"}},
    "links": [{"between": ["watch", "phone"], "profile": "bt-classic", "rate": "1Mbit"},
              {"between": ["watch", "ap"], "medium": "wifi", "band": "2.4GHz", "rate": "2Mbit", "delay": "5ms"},
              {"between": ["phone", "ap"], "profile": "wifi-5g-good"},
              {"between": ["ap", "server"], "profile": "wan"}],
    "interference": {},
}
WORKLOAD = {"kind": "stream", "client": "watch", "server": "server", "direction": "down", "rate": "500kbit",
            "duration": "5s"}
COUPLED = Coupling(node="watch", bt=("watch", "phone"), wifi=("watch", "ap"))


def _experiment(tmp_path: Path, matrix: dict, **more) -> Path:
    f = tmp_path / "links.yaml"
    f.write_text(yaml_dump({"name": "link-sweep", "topology": TOPOLOGY, "repetitions": 1, "workload": WORKLOAD,
                            "nodes": {"watch": {"interface_policy": "wifi"}}, "matrix": matrix, **more},
                           sort_keys=False))
    return f


def _watch_ap(p, cell):
    return p.topology_of(cell).link_between("watch", "ap")


def test_a_rate_sweep_gives_each_cell_its_rate_and_leaves_the_rest(tmp_path):
    """5 Mbit/s is 5 000 000 bit/s in both directions of watch-ap in its cell; the other cell is the
    topology's 2 Mbit/s; delay (5 ms, not swept) and the other links are the topology's in both."""
    p = plan(load_experiment(_experiment(tmp_path, {"link.watch-ap.rate": ["5000kbit", "2Mbit"]}), CATALOG))
    assert len(p.cells) == 2
    fast, own = p.cells
    assert fast.values["link.watch-ap.rate"] == "5Mbit" and own.values["link.watch-ap.rate"] == "2Mbit"
    for cell, bps in ((fast, 5_000_000), (own, 2_000_000)):
        link = _watch_ap(p, cell)
        assert link.forward.rate_bps == bps and link.reverse.rate_bps == bps
        assert 0.005 - 1e-9 <= link.forward.delay_s <= 0.005 + 1e-9
        bt = p.topology_of(cell).link_between("watch", "phone")
        assert bt.forward.rate_bps == 1_000_000 and bt == p.topology.link_between("watch", "phone")
    doc = p.to_document()
    assert doc["cells"][0]["links"]["watch-ap"]["watch->ap"]["rate"] == "5Mbit"
    assert "watch-ap" not in doc["cells"][1]["links"]      # the topology's own link: not repeated


def test_one_direction_and_the_run_s_tc_lines(tmp_path):
    """`forward.delay: 20ms` is watch->ap only (forward is between[0] -> between[1]); a run of the
    cell changes that direction's netem in place to delay 20000us, rate 2000000bit (the topology's
    rate kept), and a later cell without the key changes it back to 5000us. Read by LinkControl
    from the plan's cell (enter_cell), through a network stand-in recording the lines."""
    p = plan(load_experiment(_experiment(tmp_path, {"link.watch-ap.forward.delay": ["20ms"]}), CATALOG))
    (cell,) = p.cells
    link = _watch_ap(p, cell)
    assert 0.020 - 1e-9 <= link.forward.delay_s <= 0.020 + 1e-9
    assert 0.005 - 1e-9 <= link.reverse.delay_s <= 0.005 + 1e-9
    net = _FakeNet(p)
    control = LinkControl(net)
    control._batch = lambda node: net.batch(node)
    applied = control.enter_cell(p.topology_of(cell).links)
    assert [a.change.directions for a in applied] == [(("watch", "ap"),)]
    (line,) = [l for _, ls in net.sent for l in ls]
    assert line.startswith("qdisc change dev watch-eth-ap ") and "delay 20000us" in line and "rate 2000000bit" in line
    net.sent.clear()
    assert control.enter_cell(p.topology_of(cell).links) == []          # the same links: nothing to change
    control.enter_cell(p.topology.links)                                   # back to the experiment's
    (back,) = [l for _, ls in net.sent for l in ls]
    assert "delay 5000us" in back and "rate 2000000bit" in back


class _FakeNet:
    """What LinkControl reads of a built network: its links, each direction's egress, its shaper."""

    def __init__(self, p):
        self.topo, self.seed, self.sent = p.topology, None, []

    def egress(self, src, dst):
        return src, f"{src}-eth-{dst}"

    def link_shaper(self, link):
        return "netem"

    def batch(self, node):
        net = self

        class Batch:
            def run(self, lines):
                net.sent.append((node, list(lines)))
                return ""
        return Batch()


def test_the_band_decides_the_coupling_per_cell(tmp_path, monkeypatch):
    """2.4 GHz: the watch's BT and WiFi links are coupled (the topology writes interference:);
    5 GHz: nothing is. A run's CellLinks starts the coexistence controller for the 2.4 GHz cell,
    stops it for the 5 GHz one and starts it again after."""
    p = plan(load_experiment(_experiment(tmp_path, {"link.watch-ap.band": ["2.4GHz", "5GHz"]}), CATALOG))
    two, five = p.cells
    assert p.topology_of(two).interference.couplings == (COUPLED,)
    assert p.topology_of(five).interference.couplings == ()
    assert _watch_ap(p, five).band.value == "5GHz" and _watch_ap(p, two).band.value == "2.4GHz"
    assert [c["links"]["couplings"] for c in p.to_document()["cells"]] == \
        [[{"node": "watch", "bt": "watch-phone", "wifi": "watch-ap"}], []]

    events = []

    class Controller:
        def __init__(self, links, changes, rule, topo_links):
            self.rule = rule

        def start(self):
            events.append(("start", self.rule.couplings))

        def stop(self):
            events.append(("stop", self.rule.couplings))

        def record(self):
            return {"couplings": len(self.rule.couplings)}

    class Links:
        def enter_cell(self, links):
            return []

    class State:
        plan, links, changes = p, Links(), None
    monkeypatch.setattr(runner, "InterferenceController", Controller)
    cell_links = runner.CellLinks(State())
    for c in (two, two, five, two):
        cell_links.enter(c)
    cell_links.stop()
    assert events == [("start", (COUPLED,)), ("stop", (COUPLED,)), ("start", (COUPLED,)), ("stop", (COUPLED,))]
    assert cell_links.record() == [{"couplings": 1}, {"couplings": 1}]


def _phone_ap(p, cell):
    return p.topology_of(cell).link_between("phone", "ap")


def test_a_profile_sweep_gives_each_cell_its_profile_s_numbers(tmp_path):
    """phone-ap is written `profile: wifi-5g-good` (50 Mbit/s, 2 ms each way, 5 GHz). The cell with
    wifi-2g4-fair gets that profile's 5 Mbit/s = 5 000 000 bit/s and 10 ms in both directions and
    its band, 2.4 GHz, so the interference rule is resolved again: the phone's BT (watch-phone) and
    its WiFi are now coupled beside the watch's pair. The other cell is the topology's; the other
    links are the topology's in both."""
    p = plan(load_experiment(_experiment(tmp_path, {"link.phone-ap.profile": ["wifi-2g4-fair", "wifi-5g-good"]}),
                             CATALOG))
    fair, own = p.cells
    assert [c.values["link.phone-ap.profile"] for c in p.cells] == ["wifi-2g4-fair", "wifi-5g-good"]
    for cell, bps, delay_s, band in ((fair, 5_000_000, 0.010, "2.4GHz"), (own, 50_000_000, 0.002, "5GHz")):
        link = _phone_ap(p, cell)
        assert (link.forward.rate_bps, link.reverse.rate_bps) == (bps, bps)
        assert (link.forward.delay_s, link.reverse.delay_s) == (delay_s, delay_s)
        assert (link.band.value, link.medium.value, link.profile) == (band, "wifi", cell.values["link.phone-ap.profile"])
        assert [l for l in p.topology_of(cell).links if l.name != "phone-ap"] == \
            [l for l in p.topology.links if l.name != "phone-ap"]
    phone = Coupling(node="phone", bt=("watch", "phone"), wifi=("phone", "ap"))
    assert set(p.topology_of(fair).interference.couplings) == {COUPLED, phone}
    assert p.topology_of(own).interference.couplings == (COUPLED,)
    shown = p.to_document()["cells"][0]["links"]["phone-ap"]
    assert shown["profile"] == "wifi-2g4-fair" and shown["phone->ap"]["rate"] == "5Mbit"


def test_explicit_beats_preset_for_a_cell_s_profile(tmp_path):
    """The rule of a topology link, kept for a cell: the cell's profile takes the place of the
    link's `profile:`, the fields the topology writes beside it still hold, and the cell's other
    link keys go on top. phone-ap written {profile: wifi-5g-good, forward: {delay: 4ms}}, cells
    profile wifi-2g4-fair and rate 3Mbit: phone->ap 3 Mbit/s (the cell's) and 4 ms (the topology's
    own field beats the cell's profile's 10 ms); ap->phone 3 Mbit/s and 10 ms (the profile's)."""
    topo = {**TOPOLOGY, "links": [*TOPOLOGY["links"][:2],
                                  {"between": ["phone", "ap"], "profile": "wifi-5g-good", "forward": {"delay": "4ms"}},
                                  TOPOLOGY["links"][3]]}
    f = tmp_path / "explicit.yaml"
    f.write_text(yaml_dump({"name": "explicit", "topology": topo, "repetitions": 1, "workload": WORKLOAD,
                            "nodes": {"watch": {"interface_policy": "wifi"}},
                            "matrix": {"link.phone-ap.profile": ["wifi-2g4-fair", "wifi-5g-good"],
                                       "link.phone-ap.rate": ["3Mbit"]}}, sort_keys=False))
    p = plan(load_experiment(f, CATALOG))
    fair, own = p.cells
    for cell, reverse_delay_s in ((fair, 0.010), (own, 0.002)):
        link = _phone_ap(p, cell)
        assert (link.forward.rate_bps, link.reverse.rate_bps) == (3_000_000, 3_000_000)
        assert (link.forward.delay_s, link.reverse.delay_s) == (0.004, reverse_delay_s)


def test_a_profile_sweep_loads_back_from_the_resolved_experiment(tmp_path):
    """experiment.yaml (Experiment.to_document) writes a link whose profile cells swap as the
    topology writes it: resolved shapes written out would be explicit fields and hide the cell's
    profile (phone-ap would stay 50 Mbit/s in the wifi-2g4-fair cell). Loaded again, each cell's
    links are the first load's: 5 000 000 and 50 000 000 bit/s."""
    first = load_experiment(_experiment(tmp_path, {"link.phone-ap.profile": ["wifi-2g4-fair", "wifi-5g-good"]}),
                            CATALOG)
    again_file = tmp_path / "again" / "links.yaml"
    again_file.parent.mkdir()
    again_file.write_text(yaml_dump(first.to_document(), sort_keys=False))
    p, q = plan(first), plan(load_experiment(again_file, CATALOG))
    assert [_phone_ap(q, c).forward.rate_bps for c in q.cells] == [5_000_000, 50_000_000]
    links = lambda plan_, c: [l.model_dump(exclude={"line"}) for l in plan_.topology_of(c).links]   # noqa: E731
    assert [links(p, c) for c in p.cells] == [links(q, c) for c in q.cells]


def test_cells_and_claims_address_the_key(tmp_path):
    """runs.csv has the key as a column; a claim's cells: and ratio: over: select by it, by any
    spelling of the value (5000kbit is 5Mbit)."""
    claim = {"claim": "c", "source": {"where": "here"}, "evidence": "prediction", "metric": "down_owd_median_s"}
    f = _experiment(tmp_path, {"link.watch-ap.band": ["2.4GHz", "5GHz"], "link.watch-ap.rate": ["2Mbit", "5Mbit"]},
                    expect=[{**claim, "id": "fast", "cells": {"link.watch-ap.rate": "5000kbit"}, "paper": ["0 s", "1 s"]},
                            {**claim, "id": "band", "ratio": {"over": "link.watch-ap.band", "numerator": "2.4ghz",
                                                              "denominator": "5GHz"}, "paper": [1, None]}])
    p = plan(load_experiment(f, CATALOG))
    assert {"link.watch-ap.band", "link.watch-ap.rate"} <= set(p.columns.runs_csv())
    values = [(c.values["link.watch-ap.band"], c.values["link.watch-ap.rate"]) for c in p.cells]
    assert values == [("2.4GHz", "2Mbit"), ("2.4GHz", "5Mbit"), ("5GHz", "2Mbit"), ("5GHz", "5Mbit")]
    fast, band = p.claims
    assert [g.cells for g in fast.groups] == [(1, 3)]
    assert [(g.role, g.cells) for g in band.groups] == [("numerator", (0, 1)), ("denominator", (2, 3))]


ERRORS = [   # matrix entry -> (field, what the message says)
    ({"link.watch-sky.rate": ["1Mbit"]}, "matrix[link.watch-sky.rate]", "no link 'watch-sky'"),
    ({"link.watch-ap.speed": ["1Mbit"]}, "matrix[link.watch-ap.speed]", "no setting 'speed'"),
    ({"link.watch-ap.rate": ["fast"]}, "matrix[link.watch-ap.rate][0]", "'fast' is not a rate"),
    ({"link.watch-phone.band": ["5GHz"]}, "matrix[link.watch-phone.band][0]", "band is a WiFi link's"),
    ({"link.watch-ap.band": ["5GHz", "6GHz"]}, "matrix[link.watch-ap.band][1]", "unknown band '6GHz'"),
    ({"link.ap-watch.forward.rate": ["1Mbit"]}, "matrix[link.ap-watch.forward.rate]", "forward is watch->ap"),
    ({"link.watch-phone.profile": ["bt-classic", "wifi-2g4-fair"]}, "matrix[link.watch-phone.profile][1]",
     "profile wifi-2g4-fair is a wifi link's and watch-phone's medium is bt"),
    ({"link.watch-ap.profile": ["wifi-2g4-fiar"]}, "matrix[link.watch-ap.profile][0]",
     "unknown profile 'wifi-2g4-fiar'"),
    ({"link.watch-ap.forward.profile": ["wifi-2g4-fair"]}, "matrix[link.watch-ap.forward.profile]",
     "no setting 'profile'"),
    ({"link.watch-ap.delay": ["10ms", "1ms"], "link.watch-ap.jitter": ["4ms"]}, "matrix[link.watch-ap.delay][1]",
     "jitter 4ms > delay 1ms"),
]


def _line(f: Path, field: str) -> int:
    """The line of matrix key `field` names, or of its i-th value's (the file's lists are block
    style: one value a line)."""
    key, _, index = field.removeprefix("matrix[").partition("]")
    return f.read_text().splitlines().index(f"  {key}:") + 1 + (int(index.strip("[]")) + 1 if index else 0)


@pytest.mark.parametrize("matrix,field,says", ERRORS, ids=[e[1] for e in ERRORS])
def test_bad_link_keys_name_file_line_and_field(tmp_path, matrix, field, says):
    """In-process (load and plan, as `wearlab plan` does): one problem, located."""
    from wearlab.errors import InputError
    f = _experiment(tmp_path, matrix)
    with pytest.raises(InputError) as e:
        plan(load_experiment(f, CATALOG))
    (problem,) = e.value.problems
    assert (problem.file, problem.line, problem.field) == (str(f), _line(f, field), field)
    assert says in problem.message


def test_a_bad_link_key_exits_2_without_a_traceback(tmp_path):
    """Through the command line: every case above at once, each at its line, exit status 2."""
    matrix = {k: v for m, _, _ in ERRORS for k, v in m.items() if k != "link.watch-ap.delay"}
    f = _experiment(tmp_path, {**matrix, "link.watch-ap.band": ["5GHz", "6GHz"]})
    res = wearlab("plan", str(f))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    for _, field, says in ERRORS[:-1]:
        assert f"{f.name}:{_line(f, field)}: {field}: " in res.stderr and says in res.stderr, res.stderr


@pytest.mark.parametrize("key,value", [("link.server-ap.rate", "1Mbit"), ("link.server-ap.profile", "wan")])
def test_a_cells_rate_on_an_htb_link_built_without_one_is_a_plan_error(tmp_path, key, value):
    """With the htb shaper, a link the topology gives no rate is built as netem alone (plan.shaping),
    so a cell's rate has no htb class to go to: the plan says so at the value, not tc at run time.
    A profile gives a rate too (wan's 50 Mbit/s): the same, at the profile's value."""
    from wearlab.errors import InputError
    topo = {**TOPOLOGY, "links": [*TOPOLOGY["links"][:3], {"between": ["ap", "server"], "medium": "wired",
                                                             "delay": "10ms"}]}
    f = tmp_path / "htb.yaml"
    f.write_text(yaml_dump({"name": "htb", "topology": topo, "repetitions": 1, "workload": WORKLOAD,
                            "nodes": {"watch": {"interface_policy": "wifi"}},
                            "matrix": {key: [value]}}, sort_keys=False))
    exp = load_experiment(f, CATALOG)
    assert len(plan(exp).cells) == 1                     # netem takes a rate in place
    with pytest.raises(InputError) as e:
        plan(exp, shaper="htb")
    (problem,) = e.value.problems
    line = f.read_text().splitlines().index(f"  {key}:") + 2
    assert (problem.file, problem.line, problem.field) == (str(f), line, f"matrix[{key}][0]")
    assert "no htb class" in problem.message
