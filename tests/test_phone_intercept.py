"""A phone kind's handling of the watch's traffic, declared in the topology (nodes/proxies.py):
`intercept:` TCP ports split whatever the server (one transparent listener each, after the
workload's own (server, port) relays), and `udp:` forward, nat or drop - as the netfilter lines
the phone's namespace gets. Host only: the lines are what `wearlab plan --commands` prints; the
guest test of a page load through them is tests/test_page_phone.py."""

from __future__ import annotations

import pytest

from conftest import wearlab
from wearlab.model.needs import Relay
from wearlab.model.ports import PROXY_LISTEN_BASE
from wearlab.catalog import CATALOG
from wearlab.nodes.node_kind import NodeContext
from wearlab.nodes.proxies import HaproxyProxy, RelayProxy

BASE = PROXY_LISTEN_BASE


def test_intercepted_ports_listen_after_the_workloads_relays():
    needs = [Relay("phone", "server", "10.10.3.2", 443)]
    settings = {"intercept": (80, 443), "udp": "forward", "app_buffer": 65536}
    lines = RelayProxy.commands(settings, needs)
    nat = [l for l in lines if "PREROUTING" in l]
    assert nat == ["iptables -t nat -F PREROUTING",
                   f"iptables -t nat -A PREROUTING -p tcp -d 10.10.3.2 --dport 443 -j REDIRECT --to-ports {BASE}",
                   f"iptables -t nat -A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports {BASE + 1}",
                   f"iptables -t nat -A PREROUTING -p tcp --dport 443 -j REDIRECT --to-ports {BASE + 2}"]
    assert RelayProxy.ports(settings, needs) == {
        BASE: "relay proxy for server:443", BASE + 1: "relay proxy for any server's TCP 80 (transparent)",
        BASE + 2: "relay proxy for any server's TCP 443 (transparent)"}


@pytest.mark.parametrize("udp, rules", [
    ("forward", []),
    ("nat", ["iptables -t nat -A POSTROUTING -p udp -m owner ! --socket-exists -j MASQUERADE"]),
    ("drop", ["iptables -A FORWARD -p udp -j DROP"]),
])
def test_udp_is_forwarded_natted_or_dropped(udp, rules):
    for kind in (RelayProxy, HaproxyProxy):
        lines = kind.commands({"udp": udp}, [])
        # each cell group starts from no rules of an earlier group's
        assert "iptables -F FORWARD" in lines and "iptables -t nat -F POSTROUTING" in lines
        assert [l for l in lines if "-A FORWARD" in l or "-A POSTROUTING" in l] == rules


def test_a_kind_says_which_ports_it_splits_and_a_proxy_undoes_its_rules_when_it_stops(tmp_path):
    """What a workload that names no relay meets on its path (page-load's tcpcrypt port): a relay
    splits exactly its `intercept:` ports, a host none. A proxy kind that stops empties the chains
    it filled, so a kind after it on the node (`phone.kind: [relay, host]`) meets no REDIRECT to a
    proxy that is gone (its connections were reset)."""
    assert RelayProxy.splits({"intercept": (80, 8080)}, 8080) and not RelayProxy.splits({"intercept": (80,)}, 8080)
    assert not CATALOG.node_kinds["host"].splits({}, 8080)

    class Net:
        lines: list[str] = []

        def sh(self, node, line):
            self.lines.append((node, line))

    net = Net()
    RelayProxy(NodeContext(net, "phone", {"intercept": (8080,)}, tmp_path), []).stop()
    assert net.lines == [("phone", "iptables -t nat -F PREROUTING && iptables -F FORWARD && "
                                   "iptables -t nat -F POSTROUTING")]


def test_the_phone_topology_plans_with_its_listeners_and_bad_options_exit_2(tmp_path):
    res = wearlab("plan", "experiments/page-versions.yaml", "--commands")
    assert res.returncode == 0, res.stderr
    assert f"--dport 443 -j REDIRECT --to-ports {BASE + 1}" in res.stdout
    (tmp_path / "bad.yaml").write_text("name: bad\nnodes:\n  watch: {role: wearable}\n  phone: {role: phone, kind: relay, "
                   "intercept: [443, 70000], udp: tunnel}\n  server: {role: server}\nlinks:\n"
                   "  - {between: [watch, phone]}\n  - {between: [phone, server]}\n")
    (tmp_path / "exp.yaml").write_text("name: x\ntopology: bad.yaml\nworkload: {kind: http-get, client: watch, "
                                       "server: server}\n")
    res = wearlab("plan", str(tmp_path / "exp.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    text = res.stdout + res.stderr
    assert "bad.yaml:4" in text and "70000" in text and "tunnel" in text, text


class _Src:
    file = "exp.yaml"

    @staticmethod
    def line(path):
        return 7


def test_paths_to_several_servers(tmp_path):
    """workloads.paths.check_paths_to, for page-load's `path` (docs/pages.md: the hook it needs):
    the default is the client's first neighbour; a path must be a neighbour leading to every
    server without passing back through the client."""
    from wearlab.catalog import CATALOG
    from wearlab.model.topology import load_topology
    from wearlab.workloads.paths import check_paths_to

    (tmp_path / "t.yaml").write_text("""name: t
nodes:
  watch: {role: wearable}
  phone: {role: phone}
  ap: {role: ap}
  www: {role: server}
  cdn: {role: server}
  side: {role: ap}
links:
  - {between: [watch, ap]}
  - {between: [watch, phone]}
  - {between: [watch, side]}
  - {between: [phone, ap]}
  - {between: [ap, www]}
  - {between: [ap, cdn]}
""")
    topo = load_topology(tmp_path / "t.yaml", CATALOG)
    fixed, where = {}, {}
    assert check_paths_to("watch", ["www", "cdn"], topo, fixed, {}, where, _Src) == []
    assert fixed["path"] == "ap"
    matrix = {"path": ["ap", "phone", "side", "cdn"]}
    where = {("path", h): ("matrix", "path", i) for i, h in enumerate(matrix["path"])}
    problems = check_paths_to("watch", ["www", "cdn"], topo, {}, matrix, where, _Src)
    assert [(p.field, p.message) for p in problems] == [
        ("matrix.path[2]", "the servers www, cdn cannot be reached through 'side' without passing back through "
                           "the client 'watch'"),
        ("matrix.path[3]", "'cdn' is not next to the client 'watch' (its neighbours: ap, phone, side)"),
    ]
