"""Addressing, routing and tc plans, checked without a kernel: what the network will be."""

from __future__ import annotations

import ipaddress

from wearlab.model.shape import Loss, Shape
from wearlab.model.topology import load_topology
from wearlab.plan.addressing import plan_addresses
from wearlab.plan.shaping import MTU_FRAME, qdisc_plan

from conftest import ROOT
from wearlab.catalog import CATALOG


def _basic():
    return load_topology(ROOT / "topologies/wearable-basic.yaml", CATALOG)


def test_every_link_is_its_own_subnet_with_unique_addresses():
    topo = _basic()
    p = plan_addresses(topo)
    intfs = [i for n in p.interfaces.values() for i in n]
    assert len({i.ip for i in intfs}) == len(intfs) == 2 * len(topo.links)
    assert len({i.mac for i in intfs}) == len(intfs)
    for i in intfs:
        assert ipaddress.ip_address(i.ip) in ipaddress.ip_network(i.prefix)
        assert ipaddress.ip_address(i.peer_ip) in ipaddress.ip_network(i.prefix)


def test_every_node_reaches_every_server_subnet():
    topo = _basic()
    p = plan_addresses(topo)
    server_prefixes = {i.prefix for i in p.interfaces["server"]}
    for node in topo.nodes:
        if node == "server":
            continue
        known = {r[0] for r in p.routes[node]} | {i.prefix for i in p.interfaces[node]}
        assert server_prefixes <= known, node


def test_wearables_never_forward_for_others():
    topo = _basic()
    p = plan_addresses(topo)
    watch_ips = {i.ip for i in p.interfaces["watch"]}
    for node, routes in p.routes.items():
        assert not any(via in watch_ips for _, via in routes), (node, routes)


def test_the_server_reaches_the_bt_subnet_through_the_phone_side():
    topo = _basic()
    p = plan_addresses(topo)
    bt = p.interface_to("watch", "phone").prefix
    via = dict(p.routes["server"])[bt]
    assert via == p.interface_to("server", "ap").peer_ip
    assert dict(p.routes["ap"])[bt] == p.interface_to("ap", "phone").peer_ip


def test_netem_plan_carries_every_impairment():
    s = Shape(rate_bps=1_100_000, delay_s=0.015, jitter_s=0.002, loss=Loss(model="random", p=1.5),
              queue_packets=20)
    line, = qdisc_plan("eth0", s).lines
    assert "netem" in line and "delay 15000us 2000us" in line and "loss random 1.5%" in line
    assert "rate 1100000bit" in line
    # 20 queued + the delay line: (15 + 2) ms at 1.1 Mbit/s holds ceil(2337.5 / 1514) = 2 frames.
    assert "limit 22" in line


def test_queue_bytes_become_full_frames_and_say_so():
    qp = qdisc_plan("eth0", Shape(rate_bps=1_000_000, queue_bytes=10 * MTU_FRAME + 1))
    assert "limit 11" in qp.lines[0]
    assert any("queue_bytes" in n for n in qp.notes)


def test_jitter_keeps_order_unless_reorder_is_asked_for():
    ordered = qdisc_plan("eth0", Shape(delay_s=0.01, jitter_s=0.005)).lines[0]
    assert "rate 100000000000bit" in ordered
    reordering = qdisc_plan("eth0", Shape(delay_s=0.01, jitter_s=0.005, reorder=True)).lines[0]
    assert " rate " not in reordering


def test_gilbert_elliott_loss_maps_to_gemodel():
    s = Shape(loss=Loss(model="gilbert-elliott", p=1, r=25, bad_loss=100, good_loss=0))
    assert "loss gemodel 1% 25% 100% 0%" in qdisc_plan("eth0", s).lines[0]


def test_htb_shaper_puts_rate_in_htb_and_delay_in_netem():
    lines = qdisc_plan("eth0", Shape(rate_bps=5_000_000, delay_s=0.01), shaper="htb").lines
    assert lines[0].startswith("qdisc add dev eth0 root handle 1: htb")
    assert "rate 5000000bit" in lines[1]
    assert "netem" in lines[2] and "delay 10000us" in lines[2] and " rate " not in lines[2]


def test_change_plans_retune_in_place():
    lines = qdisc_plan("eth0", Shape(delay_s=0.02), verb="change").lines
    assert lines == ["qdisc change dev eth0 root handle 1: netem limit 1000 delay 20000us"]
