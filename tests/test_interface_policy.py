"""A wearable's interface-selection policy (seed 003 section 5.2; wearlab.nodes.interface_policies
and interface_selection): the adaptive policy's state machine against synthetic traces worked out
by hand, the measurements' arithmetic, the agents moving a flow between open paths without
reconnecting, the options at plan time (file:line:field, exit 2), a user's policy through the
catalog. Host only, about 2 s; the guest test against netem is in test_interface_policy_guest.py.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from conftest import wearlab
from wearlab.nodes.interface_policies import (BT, WIFI, Adaptive, InterfacePolicy, PolicyOptions, Sample,
                                              StaticBt, StaticWifi)
from wearlab.nodes.interface_selection import WifiThroughput, root_backlog

POLL = 20        # ms: the selector's POLL_S


def run(policy: InterfacePolicy, trace: list[tuple[int, int, float]]):
    """Feed (t in ms, backlog bytes, WiFi bit/s) samples; the switches as (t ms, from, to)."""
    out = []
    for t_ms, backlog, wifi in trace:
        sw = policy.observe(Sample(t_ms / 1000, backlog, wifi))
        if sw is not None:
            out.append((round(sw.t * 1000), sw.from_, sw.to))
    return out


def trace(until_ms: int, backlog, wifi):
    """Samples every POLL ms from 0 to until_ms; backlog(t) and wifi(t) give each one's values."""
    return [(t, backlog(t), wifi(t)) for t in range(0, until_ms + 1, POLL)]


# -- the adaptive policy's state machine, by hand ---------------------------------------------
def test_adaptive_moves_to_wifi_t1_after_the_backlog_passes_b():
    # Backlog 12 KB (> B = 10 KB) from t = 1000 ms on. The clock T1 = 500 ms starts at the first
    # sample above B (1000 ms), so the sample at 1500 ms (500 ms later) switches: not 1480.
    p = Adaptive(PolicyOptions(backlog_bytes=10_000, t1_s=0.5, t2_s=5.0, wifi_low_bps=500_000))
    assert p.active == BT
    sw = run(p, trace(3000, lambda t: 12_000 if t >= 1000 else 0, lambda t: 0))
    assert sw == [(1500, BT, WIFI)]


def test_a_backlog_at_b_or_dipping_below_restarts_t1():
    # Exactly B (10 000 B) is not "more than B": no switch however long. Above from 1000 to 1300,
    # at B at 1320 (the clock stops), above again from 1340: T1 counts from 1340, switch at 1840.
    p = Adaptive()
    assert run(p, trace(3000, lambda t: 10_000, lambda t: 0)) == []
    p = Adaptive()
    sw = run(p, trace(3000, lambda t: 0 if t < 1000 else (10_000 if t == 1320 else 50_000), lambda t: 0))
    assert sw == [(1840, BT, WIFI)]


def test_adaptive_returns_to_bt_t2_after_wifi_falls_to_the_threshold():
    # On WiFi from 500 ms (backlog 20 KB from 0: T1 from 0). WiFi carries 2 Mbit/s until 3000 ms,
    # then exactly 500 kbit/s (at most the threshold counts as low): T2 = 1 s from the first low
    # sample (3000) -> back to BT at 4000. The backlog still above B on WiFi changes nothing, and
    # back on BT it restarts T1 from 4020: WiFi again at 4520.
    p = Adaptive(PolicyOptions(t1_s=0.5, t2_s=1.0))
    sw = run(p, trace(5000, lambda t: 20_000, lambda t: 2e6 if t < 3000 else 500_000))
    assert sw == [(500, BT, WIFI), (4000, WIFI, BT), (4520, BT, WIFI)]


def test_a_busy_wifi_sample_restarts_t2():
    # Low (100 kbit/s) from 1000 ms, one sample at 600 kbit/s at 1500: T2 = 1 s counts from 1520.
    p = Adaptive(PolicyOptions(t1_s=0.1, t2_s=1.0))
    backlog = lambda t: 20_000 if t <= 100 else 0
    wifi = lambda t: 3e6 if t < 1000 else (600_000 if t == 1500 else 100_000)
    assert run(p, trace(4000, backlog, wifi)) == [(100, BT, WIFI), (2520, WIFI, BT)]


def test_the_papers_values_are_the_defaults():
    o = PolicyOptions()
    assert (o.backlog_bytes, o.t1_s, o.t2_s, o.wifi_low_bps) == (10_000, 0.5, 5.0, 500_000)


def test_static_policies_never_switch():
    busy = trace(10_000, lambda t: 1_000_000, lambda t: 0)
    for cls, initial in ((StaticBt, BT), (StaticWifi, WIFI)):
        p = cls()
        assert p.active == initial and run(p, busy) == [] and p.active == initial


# -- the measurements' arithmetic -------------------------------------------------------------
def test_wifi_throughput_is_over_the_trailing_window():
    w = WifiThroughput(window=0.1)
    assert w.add(0.0, 0) == 0.0
    # 2 Mbit/s = 5000 B per 20 ms for 200 ms, then nothing.
    got = [w.add(k * 0.02, 5000 * min(k, 10)) for k in range(1, 20)]
    assert got[3] == pytest.approx(2e6)                      # t = 80 ms: 20 000 B over 80 ms
    assert got[8] == pytest.approx(2e6)                      # t = 180 ms: the last 100 ms
    # t = 260 ms: the window (160, 260] holds 200 -> 260 idle and 160 -> 200 at 2 Mbit/s: 2 x 5000 B
    assert got[12] == pytest.approx(10_000 * 8 / 0.1)
    assert got[15] == 0.0                                    # t = 320 ms: 120 ms idle


def test_backlog_is_the_root_qdiscs():
    # `tc -s -j qdisc show dev X` with htb at the root and netem under it: the root's backlog
    # already holds its child's, so the children are not added.
    qdiscs = [{"kind": "htb", "handle": "1:", "root": True, "backlog": 15140, "qlen": 10},
              {"kind": "netem", "handle": "10:", "parent": "1:1", "backlog": 15140, "qlen": 10}]
    assert root_backlog(qdiscs) == 15140
    assert root_backlog([{"kind": "netem", "handle": "1:", "root": True, "backlog": 0}]) == 0
    assert root_backlog([]) == 0


# -- the agents move the flow between open paths -------------------------------------------------
def test_a_switch_moves_the_download_to_the_other_open_path(tmp_path):
    """A 400 KB download through both agents pinned to bt: the first 100 KB go on bt; a control
    datagram moves the server agent to wifi; the other 300 KB go on wifi - over the same app
    connection and the same two path connections (none opened again), whole and in order."""
    from wearlab.nodes.multipath_agent import (ControlProtocol, PathSpec, Pin, ServerAgent, WatchAgent,
                                               control_socket, listener)

    names = ["wifi", "bt"]
    first, rest = 100_000, 300_000
    payload = bytes(i % 251 for i in range(first + rest))

    async def scenario():
        accepted, path_conns = [], []
        go_on = asyncio.Event()

        async def origin_handler(r, w):          # the app's server: sends the download
            accepted.append(1)
            w.write(payload[:first])
            await w.drain()
            await go_on.wait()
            w.write(payload[first:])
            await w.drain()
            w.close()
        origin = await asyncio.start_server(origin_handler, "127.0.0.1", 0)
        spin, wpin = Pin(names, BT), Pin(names, BT)
        sagent = ServerAgent(origin.sockets[0].getsockname(), names, "wearlab.nodes.multipath_schedulers:MinRtt",
                             1400, 65536, spin)

        async def counted(r, w):
            path_conns.append(1)
            await sagent.handle(r, w)
        spath = await asyncio.start_server(counted, "127.0.0.1", 0)
        sport = spath.sockets[0].getsockname()
        wagent = WatchAgent([PathSpec(n, sport, None) for n in names], "wearlab.nodes.multipath_schedulers:MinRtt",
                            1400, 65536, wpin)
        ctl = str(tmp_path / "server.sock")
        await asyncio.get_running_loop().create_datagram_endpoint(lambda: ControlProtocol(spin), sock=control_socket(ctl))
        local = await asyncio.start_server(wagent.handle, sock=listener(("127.0.0.1", 0), True))
        r, w = await asyncio.open_connection(*local.sockets[0].getsockname())
        got = await r.readexactly(first)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b"wifi", ctl)
        while spin.active != 0:                  # the datagram's arrival: yield until the loop took it
            await asyncio.sleep(0)
        go_on.set()
        got += await r.read(-1)
        return got, accepted, path_conns, sagent.counters.paths

    got, accepted, path_conns, counters = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert got == payload
    assert len(accepted) == 1 and len(path_conns) == 2     # no reconnect, no new path connection
    wifi, bt = counters
    assert bt.bytes_sent == first and wifi.bytes_sent == rest, (bt.bytes_sent, wifi.bytes_sent)


# -- plan time ------------------------------------------------------------------------------
TOPOLOGY = """
topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: host}, ap: {role: ap}, server: {role: server}}
  links:
    - {between: [watch, phone], medium: bt, rate: 1Mbit, delay: 15ms}
    - {between: [watch, ap], medium: wifi, rate: 1Mbit, delay: 5ms}
    - {between: [phone, ap], medium: wired}
    - {between: [ap, server], medium: wired}
workload: {kind: stream, client: watch, server: server, path: phone, direction: down, duration: 2s}
"""


def planned(tmp_path, nodes: str, catalog=None):
    from wearlab.catalog import CATALOG
    from wearlab.model.experiment_file import load_experiment
    from wearlab.plan.plan import plan

    f = tmp_path / "exp.yaml"
    f.write_text(f"name: ifp\nrepetitions: 1\n{TOPOLOGY}nodes:\n{nodes}\n")
    return plan(load_experiment(f, catalog or CATALOG))


@pytest.mark.parametrize("nodes, field, message", [
    ("  watch: {interface_policy: adaptiv}", "interface_policy", "did you mean 'adaptive'"),
    ("  watch: {interface_policy: adaptive, multipath: minrtt}", "interface_policy", "set one of them"),
    ("  watch: {interface_policy: adaptive, multipath_paths: [wifi]}", "multipath_paths", "must list both"),
    ("  watch: {interface_policy: adaptive, handover: reactive}", "interface_policy", "set one of them"),
    ("  watch: {interface_policy: adaptive, policy_backlog: 0}", "policy_backlog", "more than 0"),
    ("  watch: {interface_policy: adaptive, policy_t2: -5s}", "policy_t2", "negative"),
    ("  watch: {interface_policy: adaptive, policy_wifi_low: fast}", "policy_wifi_low", ""),
])
def test_bad_policy_options_name_file_line_and_field(tmp_path, nodes, field, message):
    from wearlab.errors import InputError

    with pytest.raises(InputError) as e:
        planned(tmp_path, nodes)
    (p,) = [p for p in e.value.problems if message in p.message and p.field == f"nodes.watch.{field}"]
    assert (p.file, p.line) == (str(tmp_path / "exp.yaml"), 13), p


def test_bad_policy_exits_2_without_traceback(tmp_path):
    (tmp_path / "exp.yaml").write_text(f"name: ifp\nrepetitions: 1\n{TOPOLOGY}nodes:\n  watch: {{interface_policy: fastest}}\n")
    res = wearlab("plan", str(tmp_path / "exp.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{tmp_path / 'exp.yaml'}:13: nodes.watch.interface_policy: unknown interface policy 'fastest'" \
        in res.stderr + res.stdout


class CellularFirst(InterfacePolicy):
    """A user's own policy: WiFi always (what a test registers)."""
    name = "wifi-first"
    doc = "WiFi from the start"
    initial = WIFI

    def observe(self, s):
        return None


def test_a_users_policy_registers_through_the_catalog(tmp_path):
    from rich.console import Console

    from wearlab.catalog import CATALOG
    from wearlab.report.terminal import kinds

    assert sorted(CATALOG.interface_policies) == ["adaptive", "bt", "wifi"]
    mine = CATALOG.extended(interface_policies=[CellularFirst])
    p = planned(tmp_path, "  watch: {interface_policy: wifi-first}", mine)
    assert p.interface_policies["wifi-first"] == f"{__name__}:CellularFirst"
    opts = p.cells[0].nodes["watch"].options
    assert (opts["interface_policy"], opts["policy_backlog"], opts["policy_t1"]) == ("wifi-first", 10_000, 0.5)
    with pytest.raises(ValueError, match="share a name"):
        mine.extended(interface_policies=[CellularFirst])
    console = Console(width=200, record=True)
    kinds(mine, console)
    assert "wifi-first │ WiFi from the start" in console.export_text()     # `wearlab kinds` lists it
