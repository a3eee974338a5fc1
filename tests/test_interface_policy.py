"""A wearable's interface-selection policy (seed 003 section 5.2; wearlab.nodes.interface_policies
and interface_selection): the adaptive policy's state machine against synthetic traces worked out
by hand, the measurements' arithmetic, the agents moving a flow between open paths without
reconnecting, the options at plan time (file:line:field, exit 2), a user's policy through the
catalog (host, about 3 s); and three guest tests against netem, their bounds beside them: a download (two cells: a
phone that forwards, one that splits; about 21 s) and an upload (the bytes wait at the watch; about 13 s); and a
message's radio busy time, its two chunks' flights, between the BT link's physics and one guest tick above it
(about 6 s).
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from conftest import run_rows, timing_bound, wearlab
from wearlab.nodes.interface_policies import (BT, WIFI, Adaptive, InterfacePolicy, PolicyOptions, Sample,
                                              StaticBt, StaticWifi)
from wearlab.nodes.interface_selection import (Backlog, WifiThroughput, larger, proxy_backlog, root_backlog,
                                               watch_backlog)

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


# -- the report draws each policy's switches (host, a synthetic results directory) ------------
def test_the_timeline_draws_the_active_interface_and_each_switch_with_its_reason(tmp_path):
    """The figure's data, not its pixels: per cell its run's bands of the active interface, a mark
    per switch at the switch's time with the policy's reason, and what each path carried (the
    counters' differences: 1.5 Mbit/s on the active path, nothing on the other)."""
    from synthetic_results import POLICY_RATE_BPS, POLICY_SWITCHES, policy_results
    from wearlab.report import plots

    d = plots.draw(policy_results(tmp_path / "run"))
    try:
        (fig,) = [f for f in d.figures if f.name == "interface_timeline"]
        assert fig.section == "interface"
        bt_ax, adaptive_ax = fig.fig.axes
        assert "adaptive" in adaptive_ax.get_title("left") and "adaptive" not in bt_ax.get_title("left")

        def marks(ax):
            return [line.get_xdata()[0] for line in ax.get_lines() if line.get_gid() == plots.SWITCH_GID]

        def bands(ax, name):
            return [(round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) for p in ax.patches
                    if p.get_gid() == f"interface-{name}"]
        assert marks(bt_ax) == [] and bands(bt_ax, "wifi") == [] and bands(bt_ax, "bt") == [(0.0, 10.0)]
        assert marks(adaptive_ax) == pytest.approx([t for t, *_ in POLICY_SWITCHES])
        assert bands(adaptive_ax, "bt") == [(0.0, 3.0), (7.5, 10.0)] and bands(adaptive_ax, "wifi") == [(3.0, 7.5)]
        notes = [t.get_text() for t in adaptive_ax.texts]
        for _, _, to, why in POLICY_SWITCHES:
            assert any(n.startswith(f" → {plots.INTERFACE_NAMES[to]}: {why[:20]}") for n in notes), notes
        lines = {line.get_label(): line for line in adaptive_ax.get_lines() if line.get_gid() == plots.DATA_GID}
        wifi = lines["WiFi path carried"]
        div = 1e6    # the axis is in Mbit/s
        on = [y * div for x, y in zip(wifi.get_xdata(), wifi.get_ydata()) if 3.0 < x <= 7.5]
        off = [y * div for x, y in zip(wifi.get_xdata(), wifi.get_ydata()) if x <= 3.0 or x > 7.6]
        assert len(on) == 45 and all(0.99 * POLICY_RATE_BPS < y < 1.01 * POLICY_RATE_BPS for y in on)
        assert off and all(y == 0 for y in off)
        assert plots.plot_results(tmp_path / "run", d)[-1].name == "interface_timeline.png"
    finally:
        d.close()


def test_qoe_against_energy_puts_each_policy_at_its_medians_per_app(tmp_path):
    """Fig. 12's axes: a panel per app in the presets' order, a point per policy at the median of
    its runs' QoE (the app's own metric) and energy, bars from the lowest run to the highest, one
    colour per policy on every panel."""
    import statistics

    from synthetic_results import APP_RUNS, app_results
    from wearlab.report import plots

    d = plots.draw(app_results(tmp_path / "run"))
    try:
        (fig,) = [f for f in d.figures if f.name == "qoe_energy"]
        axes = fig.fig.axes
        assert [ax.get_title("left") for ax in axes] == ["download", "message"]
        colours = {}
        for ax, app in zip(axes, ("download", "message")):
            points = {c.get_label(): c.lines[0] for c in ax.containers if c.lines[0].get_gid() == plots.DATA_GID}
            assert len(points) == 3
            for policy in ("bt", "wifi", "adaptive"):
                (label,) = [k for k in points if k.endswith(policy)]
                runs = APP_RUNS[(app, policy)]
                div = 1e-3 if app == "message" else 1.0          # the message's delay is drawn in ms
                ediv = 1e-3 if app == "message" else 1.0         # ... and its energy in mJ
                x, y = points[label].get_xdata()[0], points[label].get_ydata()[0]
                assert x * div == pytest.approx(statistics.median(q for q, _ in runs))
                assert y * ediv == pytest.approx(statistics.median(e for _, e in runs))
                colours.setdefault(policy, set()).add(points[label].get_color())
        assert all(len(c) == 1 for c in colours.values()) and len({next(iter(c)) for c in colours.values()}) == 3
        assert "qoe_energy.png" in [p.name for p in plots.plot_results(tmp_path / "run", d)]
    finally:
        d.close()


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


def test_a_splitting_proxys_backlog_is_its_sockets_queues():
    # /proc/net/tcp of a phone whose relay splits the watch's BT path (watch 10.0.0.2, the server
    # agent 10.0.3.2:7101 = 0203000A:1BBD; addresses little-endian): toward the watch 0x3A98 =
    # 15 000 B unacknowledged; from the server agent 0x1388 = 5000 B unread (its 0x64 = 100 B
    # toward the server are not the watch's); a listener and a connection to another port are
    # not counted: 20 000 B.
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = ["   0: 0100000A:1BBD 0200000A:C350 01 00003A98:00000000 01:00000014 00000000 0 0 1 1",
            "   1: 0101000A:9C40 0203000A:1BBD 01 00000064:00001388 00:00000000 00000000 0 0 2 1",
            "   2: 00000000:1BBD 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 3 1",
            "   3: 0101000A:9C41 0203000A:1F90 01 00000000:00000FA0 00:00000000 00000000 0 0 4 1"]
    assert proxy_backlog(head + "\n".join(rows), "10.0.0.2", {("10.0.3.2", 7101)}) == (True, 20_000)
    # A forwarding phone holds no connection with the watch: not split (its qdisc is read instead).
    assert proxy_backlog(head + rows[3], "10.0.0.2", {("10.0.3.2", 7101)}) == (False, 0)


def test_backlog_is_the_root_qdiscs():
    # `tc -s -j qdisc show dev X` with htb at the root and netem under it: the root's backlog
    # already holds its child's, so the children are not added.
    qdiscs = [{"kind": "htb", "handle": "1:", "root": True, "backlog": 15140, "qlen": 10},
              {"kind": "netem", "handle": "10:", "parent": "1:1", "backlog": 15140, "qlen": 10}]
    assert root_backlog(qdiscs) == 15140
    assert root_backlog([{"kind": "netem", "handle": "1:", "root": True, "backlog": 0}]) == 0
    assert root_backlog([]) == 0


def test_an_uploads_backlog_is_the_watchs_qdisc_plus_its_unsent_bytes_and_the_larger_side_counts():
    # At the watch: 6000 B sent into its BT qdisc + 5000 B its BT path's socket holds unsent +
    # 2000 B the agent's write buffer holds for that socket (disjoint: sent; in the socket, not
    # sent; not in the socket yet) = 13 000 B, above B = 10 000 B.
    up = watch_backlog(6000, 5000, 2000)
    assert up == Backlog(13_000, "watch", "qdisc+unsent+agent")
    # The phone's side holds the upload's ACKs: the watch's side is the sample's; a download's
    # 15 140 B at the phone beat the watch's ACKs; a tie (both empty) reads as the phone's.
    assert larger(Backlog(132, "phone", "qdisc"), up) == up
    down = Backlog(15_140, "phone", "qdisc")
    assert larger(down, watch_backlog(66, 0, 0)) == down
    assert larger(Backlog(0, "phone", "sockets"), watch_backlog(0, 0, 0)).side == "phone"
    # The policy's reason names the side its backlog waited on.
    p = Adaptive(PolicyOptions(t1_s=0.04))
    assert p.observe(Sample(0.0, 11_000, 0.0, "watch")) is None
    assert p.observe(Sample(0.04, 11_000, 0.0, "watch")).reason.startswith("11000 B waiting at the watch, above")


def test_the_unsent_bytes_come_from_the_kernels_socket_diagnostics():
    """tcp_diag parses sock_diag's answer (a synthetic one: an inet_diag_msg from 10.0.0.2:40000
    to 10.0.3.2:7101 with a tcp_info whose tcpi_notsent_bytes, at byte 144, is 4321), and
    against this kernel: a connection whose receiver reads nothing keeps what did not fit in the
    receiver's small window unsent, so sock_diag reports more than 0 and at most what we wrote."""
    import struct

    from wearlab.nodes import tcp_diag

    info = bytearray(232)
    struct.pack_into("=I", info, tcp_diag.OFF_NOTSENT, 4321)
    attr = struct.pack("=HH", 4 + len(info), tcp_diag.INET_DIAG_INFO) + bytes(info)
    sockid = struct.pack(">HH", 40000, 7101) + socket.inet_aton("10.0.0.2") + bytes(12) \
        + socket.inet_aton("10.0.3.2") + bytes(12) + bytes(12)
    msg = struct.pack("=BBBB", socket.AF_INET, 1, 0, 0) + sockid + bytes(20) + attr
    done = tcp_diag.NLMSG.pack(tcp_diag.NLMSG.size + 4, tcp_diag.NLMSG_DONE, 2, 1, 0) + bytes(4)
    answer = tcp_diag.NLMSG.pack(tcp_diag.NLMSG.size + len(msg), tcp_diag.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + msg
    assert tcp_diag.parse(answer + done) == ([("10.0.0.2", "10.0.3.2", 7101, 4321)], True)

    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        c = socket.create_connection(srv.getsockname())
        peer, _ = srv.accept()
        with c, peer:
            c.setblocking(False)
            wrote = 0
            try:
                while True:
                    wrote += c.send(bytes(65536))
            except BlockingIOError:
                pass
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, tcp_diag.NETLINK_SOCK_DIAG) as nl:
                (row,) = [r for r in tcp_diag.connections(nl, 1) if r[1:3] == srv.getsockname()]
            assert 0 < row[3] <= wrote, (row, wrote)


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
    ("  watch: {interface_policy: adaptive, handover: reactive}", "handover", "no longer takes 'handover'"),
    ("  watch: {interface_policy: adaptive, policy_transport: route}", "policy_transport", "carried out by chunked"),
    ("  watch: {interface_policy: proactive}", "interface_policy", "needs mptcp: true"),
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


@pytest.mark.parametrize("direction", ["up", "both"])
def test_uploads_and_both_directions_plan_under_a_policy(tmp_path, direction, monkeypatch):
    # The selector reads the backlog on both sides of BT (the larger counts), so no direction
    # is refused: the plan holds the policy's options for the watch.
    monkeypatch.setitem(globals(), "TOPOLOGY", TOPOLOGY.replace("direction: down", f"direction: {direction}"))
    p = planned(tmp_path, "  watch: {interface_policy: adaptive}")
    (cell,) = p.cells
    assert (cell.values["direction"], cell.nodes["watch"].options["interface_policy"]) == (direction, "adaptive")


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

    assert sorted(CATALOG.interface_policies) == ["adaptive", "bt", "proactive", "reactive", "wifi", "wifi-always"]
    mine = CATALOG.extended(interface_policies=[CellularFirst])
    p = planned(tmp_path, "  watch: {interface_policy: wifi-first}", mine)
    assert p.interface_policies["wifi-first"] == f"{__name__}:CellularFirst"
    opts = p.cells[0].nodes["watch"].options
    assert (opts["interface_policy"], opts["policy_backlog"], opts["policy_t1"]) == ("wifi-first", 10_000, 0.5)
    with pytest.raises(ValueError, match="share a name"):
        mine.extended(interface_policies=[CellularFirst])
    console = Console(width=200, record=True)
    kinds(mine, console)
    (row,) = [line for line in console.export_text().splitlines() if line.startswith("│ wifi-first ")]  # `wearlab kinds`
    assert [c.strip() for c in row.split("│")][1:6] == ["wifi-first", "WiFi from the start", "load", "wifi", "chunked"]


# -- in the guest: the adaptive policy against netem --------------------------------------------
# A download (server -> watch, the paper's case) of 2 Mbit/s CBR, 1000 B messages, through the
# transport pinned by the adaptive policy with B = 10 KB, T1 = 500 ms, T2 = 1 s (shorter than the
# paper's 5 s, to keep the test short), threshold 500 kbit/s. Two cells: the phone (a relay)
# forwards the transport's BT path (intercept: [], the backlog is its BT qdisc's) or splits it
# (intercept: [7101], the backlog is its sockets' queues plus what the relay's pipe holds).
#
# BT (5 ms one-way) starts at 4 Mbit/s: it carries the 2 Mbit/s with no backlog (a split
# phone's send queue holds what is in flight, 2 Mbit/s x 10 ms RTT = 2.5 KB, and its relay's pipe
# what one read took, a message or two: below B). At
# BT_SLOW the timeline cuts its phone->watch rate to 500 kbit/s: 1.5 Mbit/s more arrives at the
# phone than leaves, so its queue passes B = 10 KB no sooner than the change itself and, once
# TCP keeps the path full, after about 10 000 x 8 / 1.5e6 = 53 ms: we give it FILL_S = 250 ms
# (the BT path's connection must first grow its window past the few KB in flight). Then T1.
# At WIFI_SLOW the timeline cuts WiFi (ap->watch) to 300 kbit/s: the watch's WiFi throughput
# over the selector's trailing 100 ms falls to the threshold once 2 x (100 - x) + 0.3 x <= 50
# (kbit per 100 ms at 2 Mbit/s before, 0.3 after): x >= 88 ms, plus the 5 ms link and what
# netem had already timed at 10 Mbit/s (at most the path's 64 KB window: 52 ms); FALL_S =
# 200 ms bounds it. Then T2. At WIFI_BACK WiFi is fast again, so the run drains soon.
# The Done-when, from the measured inputs (the selector's samples of the phone's backlog and
# the WiFi counters): each switch comes T1 (T2) after the first sample of its run of
# backlog > B (throughput <= threshold), and no later than T1 (T2) + 100 ms.
# From independent records: the switch instants against the timeline's applied changes
# (series/timeline.csv) and the physics above; and the traffic itself moving (the watch agent's
# per-path counters, series/multipath.csv, every 100 ms): no WiFi bytes before the first switch,
# WiFi bytes within 100 ms + a series interval after it.
BT_SLOW, WIFI_SLOW = 1.0, 3.0
WIFI_BACK = 4.3
T1, T2 = 0.5, 1.0
FILL_S, FALL_S = 0.25, 0.2
POLICY_S = 0.1            # the Done-when's allowance after T1 / T2 (the selector polls every 20 ms)
POLL_GAP_MAX_S = 0.25     # the selector's cadence on a busy guest: a poll at least every 250 ms


@pytest.mark.netem
def test_adaptive_policy_switches_on_the_phones_backlog_and_wifis_throughput(tmp_path):
    import csv

    (tmp_path / "exp.yaml").write_text(f"""
name: ifp
topology:
  nodes: {{watch: {{role: wearable, device: lg-g-watch-r}}, phone: {{role: phone, kind: relay}},
          ap: {{role: ap}}, server: {{role: server}}}}
  links:
    - {{between: [watch, phone], medium: bt, rate: 4Mbit, delay: 5ms}}
    - {{between: [watch, ap], medium: wifi, band: 5GHz, rate: 10Mbit, delay: 5ms}}
    - {{between: [phone, ap], medium: wired, rate: 100Mbit, delay: 1ms}}
    - {{between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}}
repetitions: 1
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 2Mbit, message_size: 1000, duration: 4.5s}}
nodes:
  watch: {{interface_policy: adaptive, policy_backlog: 10KB, policy_t1: {T1}s, policy_t2: {T2}s,
          policy_wifi_low: 500kbit}}
timeline:
  - {{at: {BT_SLOW}s, link: watch-phone, direction: phone->watch, set: {{rate: 500kbit}}}}
  - {{at: {WIFI_SLOW}s, link: watch-ap, direction: ap->watch, set: {{rate: 300kbit}}}}
  - {{at: {WIFI_BACK}s, link: watch-ap, reset: true}}
matrix:
  phone.intercept: [[], [7101]]
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    d = tmp_path / "r" / "ifp" / "latest"

    def rows(name):
        with (d / "series" / f"{name}.csv").open() as f:
            return list(csv.DictReader(f))
    with (d / "runs.csv").open() as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == 2 and all(r["status"] == "ok" for r in runs), runs
    cells = {r["phone.intercept"] for r in runs}
    seen = {}
    for cell in sorted(cells):
        def of(name):
            return [r for r in rows(name) if r["phone.intercept"] == cell]
        seen[cell] = check_cell(of("interface"), of("timeline"), of("multipath"))
        check_energy(next(r for r in runs if r["phone.intercept"] == cell), of("interface"), of("timeline"))
    assert sorted(seen.values()) == ["qdisc", "sockets+relay"], seen       # one phone forwards, one splits


def wifi_bytes_begin(multipath, side, to_wifi):
    """When `side`'s agent first received bytes over WiFi: its counter stays put until the first
    switch and grows within 100 ms and one series interval of it."""
    wifi_rx = [(float(r["t_s"]), int(r["bytes_received"])) for r in multipath
               if r["side"] == side and r["path_name"] == "wifi"]
    base = wifi_rx[0][1]
    assert all(b == base for t, b in wifi_rx if t < to_wifi), wifi_rx[:40]
    first_wifi = next(t for t, b in wifi_rx if b > base)
    assert to_wifi <= first_wifi <= to_wifi + POLICY_S + 0.1 + timing_bound(0.1), (to_wifi, first_wifi)
    return first_wifi


def began(samples, t_switch, cond):
    """The first sample of the run of samples meeting `cond` that ends at the switch."""
    start = None
    for r in samples:
        if float(r["t_s"]) > t_switch:
            break
        start = (start if start is not None else float(r["t_s"])) if cond(r) else None
    return start


def check_cell(iface, timeline, multipath) -> str:
    samples = [r for r in iface if r["event"] == "sample"]
    switches = [(float(r["t_s"]), r["from"], r["to"]) for r in iface if r["event"] == "switch"]
    assert [s[1:] for s in switches[:2]] == [("bt", "wifi"), ("wifi", "bt")], switches
    (to_wifi, _, _), (to_bt, _, _) = switches[:2]
    changes = {}
    for r in timeline:                    # each link's first change by the timeline
        if r["source"] == "timeline":
            changes.setdefault(r["link"], float(r["t_s"]))
    bt_slow, wifi_slow = changes["watch-phone"], changes["watch-ap"]
    # where the backlog was read at the phone, one way while the session runs (a split phone's
    # connections close with it, and it reads the qdisc again); a download's waits at the phone
    # (the watch's side holds its ACKs: a sample may read that side only while the phone's is
    # smaller, i.e. not while it is above B)
    where = {r["backlog_at"] for r in samples if BT_SLOW <= float(r["t_s"]) <= to_bt and r["backlog_side"] == "phone"}
    assert len(where) == 1, (where, [(r["t_s"], r["backlog_at"]) for r in samples][::10])
    assert all(r["backlog_side"] == "phone" for r in samples if int(r["backlog_bytes"]) > 10_000), samples[::10]

    # The Done-when, from the measured inputs: each switch T1 (T2) after its condition began.
    crossed = began(samples, to_wifi, lambda r: int(r["backlog_bytes"]) > 10_000)
    fell = began(samples, to_bt, lambda r: float(r["wifi_bps"]) <= 500_000)
    assert T1 - 1e-6 <= to_wifi - crossed <= T1 + POLICY_S, (crossed, to_wifi)
    assert T2 - 1e-6 <= to_bt - fell <= T2 + POLICY_S, (fell, to_bt)

    # ... and against the timeline's changes and the links' physics, not the selector's samples.
    assert bt_slow <= crossed <= bt_slow + FILL_S + timing_bound(FILL_S), (bt_slow, crossed)
    assert bt_slow + T1 <= to_wifi <= bt_slow + FILL_S + T1 + POLICY_S + timing_bound(T1), (bt_slow, to_wifi)
    assert wifi_slow <= fell <= wifi_slow + FALL_S + timing_bound(FALL_S), (wifi_slow, fell)
    assert wifi_slow + T2 <= to_bt <= wifi_slow + FALL_S + T2 + POLICY_S + timing_bound(T2), (wifi_slow, to_bt)

    # The flow moved: the watch agent's WiFi counter (the chunks' path, not the policy's word).
    first_wifi = wifi_bytes_begin(multipath, "watch", to_wifi)
    print(f"backlog at the phone's {where}: BT slowed {bt_slow:.3f} s, backlog > B {crossed:.3f} s, to WiFi "
          f"{to_wifi:.3f} s (+{(to_wifi - crossed) * 1e3:.0f} ms), WiFi bytes from {first_wifi:.3f} s; WiFi slowed "
          f"{wifi_slow:.3f} s, <= 500 kbit/s {fell:.3f} s, to BT {to_bt:.3f} s (+{(to_bt - fell) * 1e3:.0f} ms); "
          f"switches {switches}")
    return where.pop()


# Seed 000's watch (lg-g-watch-r), levels by hand (W): its data level on WiFi 534.12 mW, moved to BT
# (- WiFi radio 73.2 mA, + BT radio 64 mA, at 3.8 V) and with both radios; tail 200 mW x 0.2 s. The
# phone names no device here: a phone's device pads its relay's computation, which in the one-CPU
# guest moves this test's timing (the phone's relaying energy: tests/test_energy.py, by hand).
WATCH_BT_W, WATCH_BOTH_W = 0.53412 - 0.0732 * 3.8 + 0.064 * 3.8, 0.53412 + 0.064 * 3.8
TAIL_J = 0.2 * 0.2
# Adaptive keeps WiFi on all run (seed 003 §5.2): its base power, the watch's wifi.on 2.6 mA at
# 3.8 V, is charged apart (energy_radio_on_j) while WiFi carries nothing; the levels above are
# above the idle baseline (BT connected, WiFi off) and hold WiFi's draw while it carries.
WIFI_ON_W = 0.0026 * 3.8


def wifi_drain_s(left_s: float, wifi_slow: float, wifi_back: float) -> float:
    """How long WiFi may still carry after the watch switched away from it at `left_s`: the
    chunks already handed to its connection arrive. With WiFi fast, within a series interval
    and a half (0.3 s). Leaving while it is slowed (WIFI_SLOW..WIFI_BACK), its backlog is at most
    what the 2 Mbit/s flow put in beyond the 300 kbit/s that left since WIFI_SLOW; it drains at
    300 kbit/s until WIFI_BACK, then at 10 Mbit/s."""
    if not wifi_slow <= left_s < wifi_back:
        return 0.3
    backlog_bits = (2e6 - 0.3e6) * (left_s - wifi_slow)
    return 0.3 + (wifi_back - left_s) + backlog_bits / 10e6


def check_energy(run, iface, timeline) -> None:
    """The watch's energy follows the path that carried (RunEnergy.interfaces): BT from the start
    to the first switch, WiFi for at least its first stretch and at most the switches' WiFi
    stretches, each with the time its backlog needs to drain (wifi_drain_s); the watch between
    its cheapest level (BT) over the longer radio's time and both radios' over the sum, plus a
    tail per stretch; and apart, WiFi's base power (adaptive keeps it on) for at least the time
    before the first switch less 100 ms (WiFi carries nothing then; its first chunk's flight
    starts at the switch, the 100 ms is slack kept from when busy time was 100 ms counter
    intervals) and at most the run (to its last sample, plus 0.3 s for the last flights and a
    tail, and 0.2 s for the stream's end being read after the selector's last 20 ms poll) less
    the time WiFi carried."""
    wifi_changes = [float(r["t_s"]) for r in timeline if r["source"] == "timeline" and r["link"] == "watch-ap"]
    wifi_slow, wifi_back = wifi_changes[0], wifi_changes[-1]
    switches = [(float(r["t_s"]), r["to"]) for r in iface if r["event"] == "switch"]
    end = max(float(r["t_s"]) for r in iface)        # the last sample: the run's end (the queue drained)
    on_wifi = [(t, nxt[0] if nxt else end) for (t, to), nxt in zip(switches, [*switches[1:], None]) if to == "wifi"]
    bt_s, wifi_s = float(run["energy_bt_active_s"]), float(run["energy_wifi_active_s"])
    watch_j, base_j = float(run["energy_j"]), float(run["energy_radio_on_j"])
    print(f"energy: BT carried {bt_s:.2f} s, WiFi {wifi_s:.2f} s, WiFi by the switches {on_wifi}, run end {end:.2f} s; "
          f"watch {watch_j:.3f} J, of it WiFi's base {base_j * 1e3:.2f} mJ")
    assert WIFI_ON_W * (switches[0][0] - 0.1) - 1e-6 <= base_j <= WIFI_ON_W * (end + 0.5 - wifi_s) + 1e-6, \
        (base_j, switches[0][0], end, wifi_s)
    watch_j -= base_j
    assert bt_s >= switches[0][0] - 0.1, (bt_s, switches)
    # WiFi carries from each switch to it (its first chunks within 100 ms) to the switch away,
    # and then until what it already holds has arrived (wifi_drain_s)
    first = on_wifi[0][1] - on_wifi[0][0]
    most = sum(b - a + wifi_drain_s(b, wifi_slow, wifi_back) for a, b in on_wifi)
    assert first - 0.2 <= wifi_s <= most, (wifi_s, most, switches, (wifi_slow, wifi_back))
    assert WATCH_BT_W * max(bt_s, wifi_s) + TAIL_J - 1e-6 <= watch_j \
        <= WATCH_BOTH_W * (bt_s + wifi_s) + TAIL_J * (len(switches) + 1) + 1e-6, (watch_j, bt_s, wifi_s)
    assert run["energy_relay_j"] == ""      # the phone names no device: no relay energy, not 0 J


# A message's radio time is its chunks' flights (measure.chunk_flights), not counter intervals. The
# message app (one 200 B message down, after the stream's request up) pinned to BT (`bt`) over a
# BT link of 1 Mbit/s and 10 ms one-way, then two wired hops of 1 ms at 100 Mbit/s to the server
# (the phone routes): each chunk's flight is at least the path's one-way delay, 12 ms, plus its
# payload and the transport's 13 B framing serialised on BT (the request's 334 B: 2.78 ms; the
# message's 200 B: 1.70 ms). At most that plus its TCP/IP/Ethernet headers on BT (66 B: 0.53 ms),
# the HELLO ahead of the first chunk on its connection (37 + 66 B: 0.82 ms), the wired hops'
# serialisation (< 0.1 ms), and one guest tick (10 ms, HZ 100: tests/test_fetch_physics.GUEST_TICK)
# for the receiving agent to be scheduled, plus the busy-machine slack (timing_bound). The two
# flights are disjoint (the server answers the request it has read), so BT's busy time, the energy
# model's input, is their sum; WiFi carries no chunk and is busy 0 s.
MSG_BT_RATE, MSG_PATH_DELAY_S = 1e6, 0.012
MSG_EXTRA_MAX_S = (66 + 103) * 8 / MSG_BT_RATE + 0.0001   # headers, the HELLO, the wired hops
GUEST_TICK = 0.010


@pytest.mark.netem
def test_a_messages_busy_time_is_its_chunks_flights(tmp_path):
    import csv

    (tmp_path / "exp.yaml").write_text("""
name: msgflight
topology:
  nodes: {watch: {role: wearable, device: lg-g-watch-r}, phone: {role: phone, kind: host},
          ap: {role: ap}, server: {role: server}}
  links:
    - {between: [watch, phone], medium: bt, rate: 1Mbit, delay: 10ms}
    - {between: [watch, ap], medium: wifi, band: 2.4GHz, rate: 10Mbit, delay: 5ms}
    - {between: [phone, ap], medium: wired, rate: 100Mbit, delay: 1ms}
    - {between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}
repetitions: 1
workload: {kind: stream, client: watch, server: server, app: message}
nodes:
  watch: {interface_policy: bt, policy_transport: chunked}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=120)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    d = tmp_path / "r" / "msgflight" / "latest"
    with (d / "runs.csv").open() as f:
        (run,) = list(csv.DictReader(f))
    with (d / "series" / "multipath_chunks.csv").open() as f:
        records = list(csv.DictReader(f))
    assert run["status"] == "ok", run
    assert {r["path_name"] for r in records} == {"bt"}, records
    sent = {(r["side"], r["seq"]): r for r in records if r["event"] == "sent"}
    got = {("server" if r["side"] == "watch" else "watch", r["seq"]): r for r in records if r["event"] == "received"}
    assert sorted(sent) == sorted(got) == [("server", "0"), ("watch", "0")], records   # the message; the request
    lows, highs = [], []
    for key, s in sent.items():
        flight = (int(got[key]["t_ns"]) - int(s["t_ns"])) / 1e9
        low = MSG_PATH_DELAY_S + (int(s["payload_bytes"]) + 13) * 8 / MSG_BT_RATE
        high = low + MSG_EXTRA_MAX_S + GUEST_TICK + timing_bound(low)
        print(f"{key[0]}'s chunk, {s['payload_bytes']} B: flight {flight * 1e3:.2f} ms in [{low * 1e3:.2f}, {high * 1e3:.2f}]")
        assert low <= flight <= high, (key, flight, low, high)
        lows.append(low)
        highs.append(high)
    bt_s = float(run["energy_bt_active_s"])
    print(f"BT busy {bt_s * 1e3:.2f} ms in [{sum(lows) * 1e3:.2f}, {sum(highs) * 1e3:.2f}]; energy {run['energy_j']} J")
    assert sum(lows) - 1e-6 <= bt_s <= sum(highs) + 1e-6, (bt_s, lows, highs)
    assert float(run["energy_wifi_active_s"]) == 0.0


# An upload (watch -> server), the same policy and options, through a forwarding phone (kind
# host): the bytes wait at the watch, in its BT qdisc toward the phone and, unsent, in its BT
# path's socket (interface_selection's module doc). BT (5 ms one-way) starts at 4 Mbit/s: the
# 2 Mbit/s CBR (1000 B every 4 ms) crosses with no backlog. At BT_SLOW the timeline cuts the
# watch->phone rate to 500 kbit/s: 1.5 Mbit/s (187.5 B/ms) more is written at the watch than
# leaves it, all of it counted (qdisc + unsent; the agent's 64 KB window is far off), so the
# backlog passes B = 10 KB at most 10 000 / 187.5 = 53 ms after the change (less what already
# waited, a message or three: 3.2 KB at most, measured), seen at the next poll (20 ms) once
# that poll's own reads are done (up to 20 ms): 93 ms; UP_FILL_S = 150 ms bounds it. Not
# sooner than the change: before it the queue stays below B (4 Mbit/s carries the 2).
# At WIFI_SLOW the timeline cuts WiFi's watch->ap rate to 300 kbit/s: the WiFi counter (tx,
# read at the watch's own egress, no link delay) falls to the threshold over the trailing
# 100 ms once 2 x (100 - x) + 0.3 x <= 50 kbit: x >= 88 ms, after what netem had already timed
# at 10 Mbit/s (at most the path's 64 KB window: 52 ms): FALL_S = 200 ms bounds it, as for the
# download. Each switch T1 (T2) after its condition began, at most T1 (T2) + POLICY_S.
UP_FILL_S = 0.15


@pytest.mark.netem
def test_adaptive_policy_switches_an_upload_on_the_watchs_backlog(tmp_path):
    import csv

    (tmp_path / "exp.yaml").write_text(f"""
name: ifp-up
topology:
  nodes: {{watch: {{role: wearable}}, phone: {{role: phone, kind: host}}, ap: {{role: ap}}, server: {{role: server}}}}
  links:
    - {{between: [watch, phone], medium: bt, rate: 4Mbit, delay: 5ms}}
    - {{between: [watch, ap], medium: wifi, band: 5GHz, rate: 10Mbit, delay: 5ms}}
    - {{between: [phone, ap], medium: wired, rate: 100Mbit, delay: 1ms}}
    - {{between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}}
repetitions: 1
workload: {{kind: stream, client: watch, server: server, path: phone, direction: up, pattern: cbr,
           rate: 2Mbit, message_size: 1000, duration: 4.5s}}
nodes:
  watch: {{interface_policy: adaptive, policy_backlog: 10KB, policy_t1: {T1}s, policy_t2: {T2}s,
          policy_wifi_low: 500kbit}}
timeline:
  - {{at: {BT_SLOW}s, link: watch-phone, direction: watch->phone, set: {{rate: 500kbit}}}}
  - {{at: {WIFI_SLOW}s, link: watch-ap, direction: watch->ap, set: {{rate: 300kbit}}}}
  - {{at: {WIFI_BACK}s, link: watch-ap, reset: true}}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    d = tmp_path / "r" / "ifp-up" / "latest"

    def rows(name):
        with (d / "series" / f"{name}.csv").open() as f:
            return list(csv.DictReader(f))
    with (d / "runs.csv").open() as f:
        (run_row,) = list(csv.DictReader(f))
    assert run_row["status"] == "ok", run_row
    iface, multipath = rows("interface"), rows("multipath")
    samples = [r for r in iface if r["event"] == "sample"]
    switches = [(float(r["t_s"]), r["from"], r["to"]) for r in iface if r["event"] == "switch"]
    assert [s[1:] for s in switches[:2]] == [("bt", "wifi"), ("wifi", "bt")], switches
    (to_wifi, _, _), (to_bt, _, _) = switches[:2]
    changes = {}
    for r in rows("timeline"):
        if r["source"] == "timeline":
            changes.setdefault(r["link"], float(r["t_s"]))
    bt_slow, wifi_slow = changes["watch-phone"], changes["watch-ap"]
    # the backlog that moved it waited at the watch, read as its qdisc plus its unsent bytes
    above = [r for r in samples if int(r["backlog_bytes"]) > 10_000 and float(r["t_s"]) <= to_wifi]
    assert above and {(r["backlog_side"], r["backlog_at"]) for r in above} == {("watch", "qdisc+unsent+agent")}, above

    crossed = began(samples, to_wifi, lambda r: int(r["backlog_bytes"]) > 10_000)
    fell = began(samples, to_bt, lambda r: float(r["wifi_bps"]) <= 500_000)
    assert T1 - 1e-6 <= to_wifi - crossed <= T1 + POLICY_S, (crossed, to_wifi)
    # The policy moves back at the first poll at least T2 after WiFi fell: exact, from its own
    # samples. How late that poll comes is the sampler's cadence (an upload's poll reads both
    # sides of BT, ~26 ms apart on a quiet guest), which a starved guest stretches: a CI run saw
    # one 161 ms late, so the cadence gets its own bound and the Done-when's T2 + 100 ms is held
    # by the download test above.
    polls = [float(r["t_s"]) for r in samples]
    due = [t for t in polls if t >= fell + T2 - 1e-6]
    assert due and abs(to_bt - due[0]) <= 1e-6 and to_bt - fell >= T2 - 1e-6, (fell, to_bt, due[:3])
    gaps = [b - a for a, b in zip(polls, polls[1:]) if fell <= a < to_bt]
    assert max(gaps) <= POLL_GAP_MAX_S, max(gaps)
    # ... and against the timeline's changes and the links' physics
    assert bt_slow <= crossed <= bt_slow + UP_FILL_S + timing_bound(UP_FILL_S), (bt_slow, crossed)
    assert bt_slow + T1 <= to_wifi <= bt_slow + UP_FILL_S + T1 + POLICY_S + timing_bound(T1), (bt_slow, to_wifi)
    assert wifi_slow <= fell <= wifi_slow + FALL_S + timing_bound(FALL_S), (wifi_slow, fell)
    assert wifi_slow + T2 <= to_bt <= wifi_slow + FALL_S + T2 + POLICY_S + timing_bound(T2), (wifi_slow, to_bt)

    # The flow moved: what the server agent received over WiFi.
    first_wifi = wifi_bytes_begin(multipath, "server", to_wifi)
    print(f"upload: BT slowed {bt_slow:.3f} s, the watch's backlog > B {crossed:.3f} s "
          f"(+{(crossed - bt_slow) * 1e3:.0f} ms), to WiFi {to_wifi:.3f} s (+{(to_wifi - crossed) * 1e3:.0f} ms), "
          f"WiFi bytes at the server from {first_wifi:.3f} s; WiFi slowed {wifi_slow:.3f} s, <= 500 kbit/s "
          f"{fell:.3f} s (+{(fell - wifi_slow) * 1e3:.0f} ms), to BT {to_bt:.3f} s (+{(to_bt - fell) * 1e3:.0f} ms); "
          f"switches {switches}")


def test_top_shows_the_active_interface():
    """`wearlab top` draws the live record: the wearable's live() -> NodeState -> a line."""
    from rich.console import Console

    from wearlab.report.live_record import LiveDoc, NodeState
    from wearlab.report.top_view import render

    live = {"interface": {"policy": "adaptive", "active": "wifi", "since_s": 1.575, "switches": 1}}
    doc = LiveDoc(experiment="ifp", run_s=2.0, nodes={"watch": NodeState.model_validate(live)})
    console = Console(width=160, record=True)
    console.print(render(doc))
    assert "interface: WIFI since 1.6 s (adaptive, 1 switches)" in console.export_text()


def test_top_shows_what_the_policy_decides_on():
    """The selector's live() hands on its last poll's inputs beside the policy's thresholds, and
    `wearlab top` prints them on the watch's line: what a class watches pass B before a switch.
    (A bare selector: only what _record and live() read, no network.)"""
    import threading

    from rich.console import Console

    from wearlab.nodes.interface_selection import InterfaceSelector
    from wearlab.report.live_record import LiveDoc, NodeState
    from wearlab.report.top_view import render

    sel = object.__new__(InterfaceSelector)
    sel.policy_name, sel.options = "adaptive", PolicyOptions()
    sel.policy, sel.rows, sel.lock, sel.switches, sel.since_s = Adaptive(sel.options), [], threading.Lock(), 0, 0.0
    sel.last_sample = None
    assert "backlog_bytes" not in sel.live()                       # before the first poll: no inputs yet
    sel._record(1_000, Sample(0.02, 19_067, 310_000.0, "phone"), "qdisc", None)
    # the runner (or a hold) takes the rows: they leave the selector, live() still has the last poll
    assert [r["backlog_bytes"] for r in sel.take()] == [19_067] and sel.take() == [] and sel.rows == []
    live = sel.live()
    assert (live["backlog_bytes"], live["backlog_side"], live["wifi_bps"]) == (19_067, "phone", 310_000)
    assert (live["backlog_limit"], live["wifi_low_bps"]) == (10_000, 500_000)   # the paper's B and threshold
    doc = LiveDoc(experiment="ifp", run_s=2.0, nodes={"watch": NodeState.model_validate({"interface": live})})
    console = Console(width=200, record=True)
    console.print(render(doc))
    text = console.export_text()
    assert "waiting to cross BT: 19.1 kB at the phone (B 10 kB), WiFi 0.31 Mbit/s (low <= 0.5)" in text, text


# http-get over the chunked transport (its TCP REDIRECTed into the watch agent): the fetch is timed
# on the watch's loopback, where the app's connection ends, and its energy is each radio's for the
# time its path carried - as the stream kinds'. A static policy pins one path: 100 KB of file over
# BT at 1 Mbit/s takes at least 0.8 s; at most that plus the transport's framing and the TCP/IP
# headers on BT (13 B per chunk, 66 B per 1,448: 4.6 %, so x 1.05), the request's flight and TCP's
# slow start over BT's 20 ms round trip (0.15 s), plus the busy-machine slack. Over WiFi at 10
# Mbit/s at least 0.08 s; at most the time the app takes to read it - the watch's platform cost,
# 3,219.77 ns per byte received (builtin.yaml, seed 000's 2.6 Mbit/s): 0.322 s, which TCP's flow
# control carries back onto the path - plus WiFi's last window (0.05 s) and the slack; the watch
# stays in its data state until its app has read the last byte. The phone
# (nexus-5x: 1,048 mW for both radios, seed 003 §5.1) relays only while BT carries, then its 200 ms
# tail at the same power; not at all under `wifi`. `bt` switches WiFi off, so no base power is paid.
FETCH_BYTES = 100_000
PHONE_RELAY_W = 1.048
FETCH_PER_BYTE_S = 3219.77e-9


@pytest.mark.netem
def test_a_fetch_over_the_transport_is_timed_at_the_agent_and_pays_the_radio_that_carried(tmp_path):
    import csv

    (tmp_path / "exp.yaml").write_text(f"""
name: fetchcarried
topology:
  nodes: {{watch: {{role: wearable, device: lg-g-watch-r}}, phone: {{role: phone, kind: host, device: nexus-5x}},
          ap: {{role: ap}}, server: {{role: server}}}}
  links:
    - {{between: [watch, phone], medium: bt, rate: 1Mbit, delay: 10ms}}
    - {{between: [watch, ap], medium: wifi, band: 2.4GHz, rate: 10Mbit, delay: 5ms}}
    - {{between: [phone, ap], medium: wifi, band: 5GHz, rate: 100Mbit, delay: 1ms}}
    - {{between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}}
repetitions: 1
workload: {{kind: http-get, client: watch, server: server, size: {FETCH_BYTES}, protocol: http}}
nodes:
  watch: {{policy_transport: chunked}}
matrix:
  watch.interface_policy: [bt, wifi]
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=120)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with (tmp_path / "r" / "fetchcarried" / "latest" / "runs.csv").open() as f:
        runs = {r["watch.interface_policy"]: r for r in csv.DictReader(f)}
    for policy, run in runs.items():
        print(policy, {k: v for k, v in run.items() if k.startswith(("energy", "bytes_down_total", "wire_total"))})
        assert run["status"] == "ok", run
        # the app's connection on the loopback: the file, nginx's header, and TCP/IP headers of
        # packets up to the loopback's 64 KB
        assert FETCH_BYTES <= int(run["bytes_down_total"]) <= FETCH_BYTES * 1.1, run["bytes_down_total"]
        assert run["energy_handshake_j"] == ""        # the radios' time holds no handshake phase
    bt, wifi = runs["bt"], runs["wifi"]
    bt_s = float(bt["energy_bt_active_s"])
    low = FETCH_BYTES * 8 / 1e6
    assert low <= bt_s <= low * 1.05 + 0.15 + timing_bound(low), bt_s
    assert float(bt["energy_wifi_active_s"]) == 0.0 and float(bt["energy_radio_on_j"]) == 0.0
    assert WATCH_BT_W * bt_s + TAIL_J - 1e-6 <= float(bt["energy_j"]) <= WATCH_BT_W * bt_s + 2 * TAIL_J + 1e-6
    assert PHONE_RELAY_W * (bt_s + 0.2) - 1e-6 <= float(bt["energy_relay_j"]) <= PHONE_RELAY_W * (bt_s + 0.4) + 1e-6
    wifi_s = float(wifi["energy_wifi_active_s"])
    reading = FETCH_BYTES * FETCH_PER_BYTE_S
    assert FETCH_BYTES * 8 / 10e6 <= wifi_s <= reading + 0.05 + timing_bound(reading), wifi_s
    assert float(wifi["energy_bt_active_s"]) == 0.0 and float(wifi["energy_relay_j"]) == 0.0
    base_j = float(wifi["energy_radio_on_j"])
    assert 0.0 <= base_j <= WIFI_ON_W * (float(wifi["time_total"]) + 0.5)
    # The watch stays in its data state until its app has read the last byte (as on the direct
    # route): WiFi delivers in 0.08-0.2 s what the app reads in 0.322 s, the agent holding the
    # rest. Its response chunks go back to back (a bulk transfer within the path's 64 KB window:
    # each flight begins before the one before it lands), so the data state runs unbroken from
    # the first of them to the app's last read: at least the reading time, at most the fetch
    # (curl's time_total, plus the fetch agent's answer, 0.05 s).
    # Its tails: the last one whole, one before it cut short at most (the request's flight, then
    # the response's), so its data state is between these two:
    watch_j = float(wifi["energy_j"]) - base_j
    least_data_s, most_data_s = (watch_j - 2 * TAIL_J) / 0.53412, (watch_j - TAIL_J) / 0.53412
    assert most_data_s >= reading - 1e-6 and least_data_s <= float(wifi["time_total"]) + 0.05, \
        (watch_j, reading, wifi["time_total"])
    assert float(wifi["energy_j"]) > 0.53412 * wifi_s + 2 * TAIL_J      # more than the radio's busy time alone


TRANSPORT_TOPOLOGY = """topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: host}, ap: {role: ap},
          www: {role: server, kind: WWW}, cdn: {role: server, kind: caddy}}
  links:
    - {between: [watch, phone], medium: bt}
    - {between: [watch, ap], medium: wifi}
    - {between: [phone, ap], medium: wired}
    - {between: [ap, www], medium: wired}
    - {between: [ap, cdn], medium: wired}
"""


@pytest.mark.parametrize("workload, matrix, message", [
    ("{kind: characterizer, client: watch, server: www, flows: [{name: a, sensitivity: 1, size: 1KB}]}", "",
     "nodes.watch.multipath: the chunked transport carries the stream kinds, http-get and page-load; a "
     "characterizer workload's connections are not carried by it"),
    ("{kind: page-load, client: watch, page: exp3-java, servers: {static: www}}", "matrix: {http_version: [2, 3]}",
     "nodes.watch.multipath: the chunked transport carries TCP, and HTTP/3 is QUIC over UDP"),
    ("{kind: page-load, client: watch, page: exp3-java, servers: {static: www}}",
     "matrix: {protocol: [https, tcpcrypt]}",
     "nodes.watch.multipath: tcpcrypt's TCP-ENO runs between the two ends of one TCP connection"),
])
def test_what_the_transport_does_not_carry_is_refused_at_its_line(tmp_path, workload, matrix, message):
    """A characterizer's flows (read off the watch's interfaces), a page load's HTTP/3 (QUIC over
    UDP: the REDIRECT takes TCP) and its tcpcrypt (TCP-ENO would end at the watch's agent) are not
    the chunked transport's: the plan stops at the option that turns it on (its line: 14), per
    cell, exit 2, no traceback."""
    f = tmp_path / "exp.yaml"
    www = "nginx" if "characterizer" in workload else "caddy"    # what each workload's server serves with
    f.write_text(f"name: notcarried\n{TRANSPORT_TOPOLOGY.replace('WWW', www)}workload: {workload}\n{matrix}\nnodes:\n"
                 "  watch: {multipath: minrtt}\n")
    res = wearlab("plan", str(f))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"{f}:14: {message}" in res.stderr + res.stdout, res.stderr + res.stdout
    assert res.stderr.count(f"{f}:14:") == 1, res.stderr      # one cell of the two is refused, once


def test_a_page_loads_servers_are_its_origins_nodes_and_the_transport_carries_them(tmp_path):
    """A page whose origins map to two server nodes (exp3-java: www and static, static on cdn):
    the plan's servers are both, so the transport has a server agent on each; HTTP/1.1 and /2 over
    it plan."""
    f = tmp_path / "exp.yaml"
    f.write_text(f"name: carried\n{TRANSPORT_TOPOLOGY.replace('WWW', 'caddy')}workload: {{kind: page-load, client: watch, page: exp3-java, "
                 "servers: {static: cdn}}\nmatrix: {http_version: [1.1, 2]}\nnodes:\n  watch: {multipath: minrtt}\n")
    res = wearlab("plan", "--json", str(f))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["servers"] == ["cdn", "www"] and len(doc["cells"]) == 2


# A page over the transport (exp3-java: www and static, static on its own node cdn; 21 objects,
# 380 KB), minRTT on BT (1 Mbit/s) and WiFi (10 Mbit/s), HTTP/1.1 and /2, after the same loads by
# route over WiFi (`none` first: the client's capture, made once, must hold the loopback all the
# same). Each of the app's connections ends at the watch agent, and rides to the server agent on
# its own origin's node.
# Physics and bookkeeping, per run:
# - every app connection the load opened is on the watch's loopback and joined to its origin's
#   server: its SYNs per origin are libcurl's connections per origin, exactly;
# - what the watch agent received (its DATA chunks, the run's records, each chunk once) is the
#   app's stream from the servers: at least the page's body bytes (plus TLS), at most the app's bytes on the loopback
#   with their TCP/IP headers (wire_bytes_down);
# - a path cannot carry faster than its rate: its busy time is at least its bytes' serialisation
#   (payload + the 13 B chunk header, TCP/IP headers left out: a lower bound), and it is busy only
#   within the load (the load's time, plus one flight's delay and a guest tick of slack);
# - the load cannot end before both rates together carry the page: page_load_s >= bytes / 11 Mbit/s.
PAGE_BT_RATE, PAGE_WIFI_RATE = 1e6, 10e6


@pytest.mark.netem
def test_a_page_load_rides_the_transport_to_each_origins_own_server(tmp_path):
    import csv

    (tmp_path / "exp.yaml").write_text("""
name: pagecarried
topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: host}, ap: {role: ap},
          www: {role: server, kind: caddy}, cdn: {role: server, kind: caddy}}
  links:
    - {between: [watch, phone], medium: bt, rate: 1Mbit, delay: 10ms}
    - {between: [watch, ap], medium: wifi, band: 5GHz, rate: 10Mbit, delay: 5ms}
    - {between: [phone, ap], medium: wired, rate: 100Mbit, delay: 1ms}
    - {between: [ap, www], medium: wired, rate: 100Mbit, delay: 1ms}
    - {between: [ap, cdn], medium: wired, rate: 100Mbit, delay: 1ms}
repetitions: 1
workload: {kind: page-load, client: watch, page: exp3-java, servers: {static: cdn}, protocol: https, path: ap}
matrix:
  watch.multipath: [none, minrtt]
  http_version: [1.1, 2]
""")
    d, runs = run_rows(tmp_path / "exp.yaml", tmp_path / "r", "pagecarried", timeout=300)   # every run ok

    def series(name):
        with (d / "series" / f"{name}.csv").open() as f:
            return list(csv.DictReader(f))
    chunks, conns = series("multipath_chunks"), series("connections")
    assert len(runs) == 4
    for run in runs:
        mine = lambda rows: [r for r in rows if r["run"] == run["run"]]
        opened = int(run["connections_opened"])
        by_origin = {r["origin"]: r for r in mine(conns)}
        print(f"HTTP/{run['http_version']}: {run['page_load_s']} s, {opened} connections "
              f"{ {o: (r['server'], r['opened'], r['tcp_syns']) for o, r in by_origin.items()} }, "
              f"wire down {run['wire_bytes_down']} B, BT {run['energy_bt_active_s']} s, WiFi {run['energy_wifi_active_s']} s")
        assert by_origin.keys() == {"www", "static"}
        assert by_origin["static"]["server"] == "cdn" and by_origin["www"]["server"] == "www"
        for r in by_origin.values():
            assert int(r["tcp_syns"]) == int(r["opened"]) >= 1, r
        assert int(run["tcp_syns"]) == opened == (2 if run["http_version"] == "2" else opened)
        body = int(run["body_bytes"])
        if run["watch.multipath"] == "none":
            # WiFi alone, by route (the transport's cells come after: the loopback is captured from
            # the start all the same); the app's connections on WiFi, the page and TCP/IP headers
            assert body < int(run["wire_bytes_down"]) <= body * 1.1 and not mine(chunks), run
            continue
        got = [r for r in mine(chunks) if r["side"] == "watch" and r["event"] == "received"]
        # each chunk once: a copy sent again on the other path (reinjection) arrives twice, and
        # the agent hands the app only the first
        carried = sum(int(r["payload_bytes"]) for r in {(r["session"], r["seq"]): r for r in got}.values())
        assert body < carried <= int(run["wire_bytes_down"]), (body, carried, run["wire_bytes_down"])
        load_s = float(run["page_load_s"])
        assert load_s >= carried * 8 / (PAGE_BT_RATE + PAGE_WIFI_RATE)
        for medium, rate, delay in (("bt", PAGE_BT_RATE, 0.010), ("wifi", PAGE_WIFI_RATE, 0.005)):
            on_path = [r for r in got if r["path_name"] == medium]
            busy = float(run[f"energy_{medium}_active_s"])
            least = sum(int(r["payload_bytes"]) + 13 for r in on_path) * 8 / rate
            assert least - 1e-6 <= busy <= float(run["session_s"]) + delay + GUEST_TICK + timing_bound(load_s), \
                (medium, busy, least)
        assert float(run["energy_wifi_active_s"]) > 0
