"""Seed 004's characterizer (issue 22 item 7): flows labelled 0-4, the client's battery and the
thresholds decide per flow whether it goes over tcpcrypt (item 2's require) or in the clear.

Without namespaces: the thresholds, the decision, the battery's capacity from seed 000's watch
(410 mAh at a Li-ion cell's 3.8 V, worked out by hand), bad input (exit 2, file:line and field),
and the plan (item 2's `Tcpcrypt` need carries `require`; the clear flows have the plain port).

In the guest (`netem`): seed 000's watch fetches a step count (level 1), a health record (level 4)
and a second step count with the battery above, below and just above the 50 % band. The capture,
read here with the test's own pcap parser, shows for every flow what its decision says: TCP-ENO
in the SYN and no plaintext HTTP on the wire, or no ENO and the request and response readable;
the drain of the first flow is what takes the battery below the band within a run, and the energy
a flow in the clear saved is seed 000's levels times that flow's own phase times, written out here.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from textwrap import dedent

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcpcrypt_wire as tw  # noqa: E402
from conftest import wearlab  # noqa: E402
from wearlab.catalog import CATALOG  # noqa: E402
from wearlab.model import sensitivity as S  # noqa: E402
from wearlab.model.experiment_file import load_experiment  # noqa: E402
from wearlab.model.needs import Tcpcrypt  # noqa: E402
from wearlab.nodes.tcpcrypt import BINARY  # noqa: E402
from wearlab.plan.plan import plan  # noqa: E402

# Seed 000's watch (lg-g-watch-r), as its paper and builtin.yaml give it.
MAH, VOLTS = 410, 3.8
CAPACITY_J = MAH * 3.6 * VOLTS            # 5,608.8 J
P_HANDSHAKE = P_CONNECT = 0.40522         # W, seed 000 IV.A (connect assumed = handshake)
P_DATA, P_DATA_ENC = 0.53412, 0.51638     # W, HTTP / HTTPS data exchange
TAIL_J = 0.200 * 0.200                    # 200 mW for 200 ms
# the watch's X25519 keygen and derive, each (builtin.yaml): seed 002's computer's 215.4/s times the
# watch/computer ratio 0.8085 (seed 001's watch RSA private op ~35 ms over seed 002's 43.29 ms)
X25519_S = 0.8085 / 215.4                 # 3.75 ms, as docs/devices.md gives it
ONE_WAY = 0.005 + 0.015                   # wifi-2g4-good + the wan link below
RTT = 2 * ONE_WAY


# -- the policy, by hand -----------------------------------------------------------------------

def test_thresholds_read_and_decide():
    bands = S.parse_thresholds({50: 0, 20: 2, 0: 4})
    assert S.thresholds({50: 0, 20: 2, 0: 4}) == "50:0 20:2 0:4" == S.thresholds("0:4 50:0 20:2")
    assert [bands.min_level(b) for b in (100, 50, 49.999, 20, 19.9, 0)] == [0, 0, 2, 2, 4, 4]
    assert S.decide(1, 80, bands, "require") == "require" and S.decide(1, 30, bands, "require") == "off"
    assert S.decide(2, 30, bands, "opportunistic") == "opportunistic"
    assert S.decide(4, 0, bands, "require") == "require"
    # below the lowest band nothing is encrypted
    assert S.decide(4, 9, S.parse_thresholds({10: 4}), "require") == "off"


@pytest.mark.parametrize("bad, words", [
    ({50: 3, 20: 2}, "not monotonic"),      # a lower battery encrypting more levels
    ({50: 5}, "outside 0-4"),
    ({120: 0}, "outside 0-100"),
    ("50:0 x:1", "not a battery level"),
    ({}, "at least one band"),
])
def test_bad_thresholds(bad, words):
    with pytest.raises(ValueError, match=words):
        S.thresholds(bad)


def test_battery_capacity_and_drain_by_hand():
    assert S.capacity_joules(410, 3.8) == pytest.approx(5608.8)
    assert S.capacity_joules(2100, 3.8) == pytest.approx(28728.0)   # seed 000's phone
    # 56.088 J is 1 % of the watch's battery
    assert S.level_after(50, 56.088, CAPACITY_J) == pytest.approx(49.0)
    for bad in (101, -1, "120%", True):
        with pytest.raises(ValueError):
            S.battery_percent(bad)
    assert S.battery_percent("35%") == 35.0


EXPERIMENT = """
name: char-plan
topology:
  nodes:
    watch: {{role: wearable, device: lg-g-watch-r}}
    ap: {{role: ap}}
    server: {{role: server}}
  links:
    - {{between: [watch, ap], profile: wifi-2g4-good}}
    - {{between: [ap, server], profile: wan, delay: 15ms}}
workload:
  kind: characterizer
  client: watch
  server: server
  flows:
    - {{name: steps, sensitivity: {level}, size: 1KB}}
    - {{name: record, sensitivity: 4, size: 2KB}}
  thresholds: {thresholds}
  encrypted_as: {mode}
matrix:
  battery: {battery}
"""


def write(tmp_path, level=1, thresholds="{50: 0, 0: 4}", mode="require", battery="[80, 10]") -> Path:
    f = tmp_path / "exp.yaml"
    f.write_text(EXPERIMENT.format(level=level, thresholds=thresholds, mode=mode, battery=battery))
    return f


@pytest.mark.parametrize("mode, required", [("require", True), ("opportunistic", False)])
def test_plan_uses_item_2s_need(tmp_path, mode, required):
    p = plan(load_experiment(write(tmp_path, mode=mode), CATALOG))
    crypt = [n for n in p.needs if isinstance(n, Tcpcrypt)]
    assert {(n.node, n.side, n.port, n.require) for n in crypt} == {("watch", "outbound", 8080, required),
                                                                     ("server", "inbound", 8080, False)}


@pytest.mark.parametrize("edit, field, words", [
    (dict(level=7), "workload.flows[0].sensitivity", "outside 0-4"),
    (dict(thresholds="{50: 3, 20: 2}"), "workload.thresholds", "not monotonic"),
    (dict(battery="[80, 120]"), "matrix.battery[1]", "0-100"),
])
def test_bad_values_exit_2_with_file_line_field(tmp_path, edit, field, words):
    f = write(tmp_path, **edit)
    res = wearlab("validate", str(f), timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    line = next(i for i, text in enumerate(f.read_text().splitlines(), 1)
                if text.strip().startswith({"workload.flows[0].sensitivity": "- {name: steps",
                                            "workload.thresholds": "thresholds:",
                                            "matrix.battery[1]": "battery:"}[field]))
    assert f"{f}:{line}: {field}:" in res.stderr and words in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


# -- in the guest: the capture says what each flow's decision says ------------------------------

RUN = """
name: char-run
topology:
  nodes:
    watch: {role: wearable, device: lg-g-watch-r}
    ap: {role: ap}
    server: {role: server}
  links:
    - {between: [watch, ap], profile: wifi-2g4-good}
    - {between: [ap, server], profile: wan, delay: 15ms}
repetitions: 1
seed: 4
workload:
  kind: characterizer
  client: watch
  server: server
  flows:
    - {name: steps-a, sensitivity: 1, size: 1KB}
    - {name: record, sensitivity: 4, size: 2KB}
    - {name: steps-b, sensitivity: 1, size: 1KB}
  thresholds: {50: 0, 0: 4}
matrix:
  # above the band, below it, and 0.001 % above it: steps-a's own energy (at least its connect and
  # key exchange, a round trip each at 405 mW, and the 40 mJ tail: 72 mJ = 0.0013 % of 5,608.8 J)
  # takes the battery below 50 % before the record and steps-b start.
  battery: [80, 10, 50.001]
"""


@pytest.fixture(scope="module")
def guest_run(tmp_path_factory):
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is not built: `make test` builds it (make tcpcrypt)", pytrace=False)
    d = tmp_path_factory.mktemp("characterizer")
    (d / "exp.yaml").write_text(RUN)
    res = wearlab("run", str(d / "exp.yaml"), "--out", str(d / "r"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    latest = d / "r" / "char-run" / "latest"
    with (latest / "runs.csv").open() as f:
        rows = {float(r["battery"]): r for r in csv.DictReader(f)}
    assert all(r["status"] == "ok" for r in rows.values()), [r["error"] for r in rows.values()]
    with (latest / "series" / "flows.csv").open() as f:
        flows = list(csv.DictReader(f))
    with (latest / "series" / "tcpcrypt.csv").open() as f:
        records = list(csv.DictReader(f))
    return latest, rows, flows, records


def of(flows, rows, battery):
    run = rows[battery]["run"]
    return {f["name"]: f for f in flows if f["run"] == run}


def segments(latest: Path):
    """(src port, dst port, flags, options, payload) of every TCP segment the watch's capture holds,
    parsed with the test's own reader (tcpcrypt_wire), not wearlab's."""
    out = []
    for pcap in sorted((latest / "captures").glob("watch-*.pcap")):
        for _, _, pkt, lt in tw._records(pcap.read_bytes()):
            l3 = tw._network_layer(pkt, lt)
            r = tw._ip_to_tcp(*l3) if l3 else None
            if r is None or len(r[2]) < 20:
                continue
            tcp = r[2]
            doff = (tcp[12] >> 4) * 4
            out.append((int.from_bytes(tcp[0:2], "big"), int.from_bytes(tcp[2:4], "big"), tcp[13],
                        bytes(tcp[20:doff]), bytes(tcp[doff:])))
    return out


def on_the_wire(segs, flow):
    """What the capture shows of one flow's connection: ENO in its SYN, its payload both ways."""
    port, server = int(flow["wire_port"]), int(flow["port"])
    conn = [s for s in segs if (s[0], s[1]) in ((port, server), (server, port))]
    syns = [s for s in conn if s[2] & tw.TCP_SYN and not s[2] & tw.TCP_ACK]
    assert len(syns) == 1, (flow["name"], port, len(syns))   # one connection from that port
    up = b"".join(s[4] for s in conn if s[0] == port)
    down = b"".join(s[4] for s in conn if s[0] == server)
    eno = bool(tw.rp.eno_options_in(syns[0][3]))
    return eno, up, down


def expect_decisions(flows, expected):
    assert {n: f["decision"] for n, f in flows.items()} == expected


@pytest.mark.netem
def test_level_1_goes_clear_below_the_band_and_level_4_stays_encrypted(guest_run):
    latest, rows, flows, records = guest_run
    expect_decisions(of(flows, rows, 80), {"steps-a": "require", "record": "require", "steps-b": "require"})
    expect_decisions(of(flows, rows, 10), {"steps-a": "off", "record": "require", "steps-b": "off"})
    # the drain within one run: steps-a starts above 50 %, its energy takes the battery below
    expect_decisions(of(flows, rows, 50.001), {"steps-a": "require", "record": "require", "steps-b": "off"})
    segs = segments(latest)
    for battery in (80, 10, 50.001):
        for f in of(flows, rows, battery).values():
            eno, up, down = on_the_wire(segs, f)
            if f["decision"] == "off":
                # plain TCP to the plain port: no ENO, the request and the response readable
                assert f["port"] == "80" and f["encrypted"] == "0"
                assert not eno and up.startswith(b"GET /") and b"HTTP/1.1 200 OK" in down, (battery, f["name"])
            else:
                # tcpcrypt: ENO in the SYN, not one byte of HTTP in clear either way; both daemons
                # report the one session ID
                assert f["port"] == "8080" and f["encrypted"] == "1", (battery, f)
                assert eno and b"GET /" not in up and b"HTTP/1." not in down, (battery, f["name"])
                ids = {r["node"]: r["session_id"] for r in records if r["session_id"] == f["session_id"]}
                assert set(ids) == {"watch", "server"} and len(f["session_id"]) == 66, f
    assert rows[80]["flows_encrypted"] == "3" and rows[80]["flows_clear"] == "0"
    assert rows[10]["flows_encrypted"] == "1" and rows[10]["flows_clear"] == "2"


@pytest.mark.netem
def test_battery_drains_by_the_energy_model(guest_run):
    _, rows, flows, _ = guest_run
    for battery in (80, 10, 50.001):
        fl = of(flows, rows, battery)
        charged = 0.0
        for name in ("steps-a", "record", "steps-b"):
            f = fl[name]
            # series/flows.csv keeps 9 significant digits: 1e-7 % at 50 %
            assert float(f["battery_pct"]) == pytest.approx(battery - 100 * charged / CAPACITY_J, abs=2e-7)
            # a flow costs at least its connect and a tail; an encrypted one a key exchange too
            least = P_CONNECT * RTT + TAIL_J + (P_HANDSHAKE * RTT if f["decision"] != "off" else 0)
            assert least <= float(f["energy_j"]) <= least + 1.0, f
            charged += float(f["energy_j"])
        # runs.csv keeps a ratio's 6 decimals
        assert float(rows[battery]["battery_end_ratio"]) == pytest.approx((battery - 100 * charged / CAPACITY_J) / 100,
                                                                           abs=1e-6)


@pytest.mark.netem
def test_energy_saved_is_seed_000s_levels_times_the_flows_times(guest_run):
    _, rows, flows, _ = guest_run
    saved_total = 0.0
    for f in of(flows, rows, 10).values():
        if f["decision"] != "off":
            assert float(f["energy_saved_j"]) == 0.0
            continue
        c, d = float(f["connect_s"]), float(f["data_s"])
        assert RTT - 1e-4 <= c <= RTT + 0.05, c
        assert float(f["energy_j"]) == pytest.approx(P_CONNECT * c + P_DATA * d + TAIL_J, rel=1e-6)
        kx = c + 2 * X25519_S          # one round trip (Init1, Init2) and the watch's two X25519s
        assert float(f["kx_estimate_s"]) == pytest.approx(kx, rel=1e-5)
        would = P_CONNECT * c + P_HANDSHAKE * kx + P_DATA_ENC * d + TAIL_J
        assert float(f["energy_encrypted_j"]) == pytest.approx(would, rel=1e-5)
        saved = float(f["energy_saved_j"])
        assert saved == pytest.approx(would - float(f["energy_j"]), rel=1e-6)
        assert f["saved_basis"].startswith("estimate")
        # physics: at least the key exchange's round trip and X25519s at 405 mW, less the data
        # state's 17.7 mW difference over the flow's data time
        assert P_HANDSHAKE * (RTT + 2 * X25519_S) - (P_DATA - P_DATA_ENC) * d - 1e-9 <= saved
        assert saved <= P_HANDSHAKE * (RTT + 0.05 + 2 * X25519_S)
        saved_total += saved
    assert float(rows[10]["energy_saved_j"]) == pytest.approx(saved_total, abs=2e-6)  # runs.csv: 6 decimals
    assert float(rows[80]["energy_saved_j"]) == 0.0
    # the estimate against what the same level-1 flow cost when the battery was high and it went
    # encrypted (measured): the same order, within a factor of 2
    measured = float(of(flows, rows, 80)["steps-a"]["energy_j"]) - float(of(flows, rows, 10)["steps-a"]["energy_j"])
    estimate = float(of(flows, rows, 10)["steps-a"]["energy_saved_j"])
    assert estimate / 2 <= measured <= estimate * 2, (measured, estimate)


@pytest.mark.netem
def test_policy_is_in_the_metadata(guest_run):
    meta = json.loads((guest_run[0] / "metadata.json").read_text())
    facts = find(meta, "characterizer")
    assert facts is not None, "no characterizer facts in metadata.json"
    assert facts["battery"]["mah"] == MAH and facts["battery"]["volts"] == VOLTS
    assert facts["battery"]["capacity_j"] == pytest.approx(CAPACITY_J)
    assert "seed 000 Table I" in facts["battery"]["mah_source"]
    assert {(c["battery_start_pct"], c["thresholds"], c["encrypted_as"]) for c in facts["cells"]} == \
        {(b, "50:0 0:4", "require") for b in (80, 10, 50.001)}


def find(tree, key):
    """The first value under `key` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        if key in tree and isinstance(tree[key], dict):
            return tree[key]
        tree = list(tree.values())
    if isinstance(tree, list):
        for v in tree:
            got = find(v, key)
            if got is not None:
                return got
    return None
