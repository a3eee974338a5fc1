"""Scale: build and tear down a 50-wearable, 10-phone, 3-server network; time both, check leaks.

Runs where netem lives:

    .venv/bin/wearlab runtime-exec -- .venv/bin/python bench/bench_scale.py [--wearables 50 --phones 10 --servers 3]

Topology (written to a temporary YAML file): every wearable wN has a bt-classic link to its phone
(wearables are shared round-robin-in-blocks among the phones) and a wifi-2g4-good link to the AP;
every phone has a wifi-5g-good link to the AP; the AP has a 1 Gbit/s, 1 ms backbone link to the
router; the router has a `wan` link to every server. netns.build(...) brings it up,
net.teardown() takes it down, both timed. The build is instrumented without changing it: Mininet's
Host (and Link, if still used) constructors, Node.cmd, and netns's plan / _create_links /
shape_commands / _configure_node are wrapped with timers, so the report says where the time goes.

Checks: pings from a few wearables to every server (RTT ~ 2 x (5 + 1 + 10) ms through the AP);
after teardown no process carries WEARLAB_RUN, no veth is left in the root namespace,
`ip netns list` is empty, no process lives in another network namespace, the work directory and
the ledger entry are gone.
Targets: up < 30 s, down < 15 s.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from common import Stopwatch, environment, require_root_and_netem, table, verdict, write_result

from wearlab.model.topology import load_topology
from wearlab.realize import netns
from wearlab.runtime import ledger
from wearlab.catalog import CATALOG
from wearlab.plan.network import plan_network

UP_TARGET_S, DOWN_TARGET_S = 30.0, 15.0


def topology_yaml(wearables: int, phones: int, servers: int) -> str:
    per_phone = -(-wearables // phones)
    lines = ["name: bench-scale", "description: scale benchmark", "nodes:"]
    lines += [f"  w{i}: {{role: wearable}}" for i in range(1, wearables + 1)]
    lines += [f"  p{i}: {{role: phone}}" for i in range(1, phones + 1)]
    lines += ["  ap: {role: ap}", "  router: {role: router}"]
    lines += [f"  s{i}: {{role: server}}" for i in range(1, servers + 1)]
    lines.append("links:")
    for i in range(1, wearables + 1):
        lines.append(f"  - {{between: [w{i}, p{(i - 1) // per_phone + 1}], profile: bt-classic}}")
        lines.append(f"  - {{between: [w{i}, ap], profile: wifi-2g4-good}}")
    lines += [f"  - {{between: [p{i}, ap], profile: wifi-5g-good}}" for i in range(1, phones + 1)]
    lines.append("  - {between: [ap, router], rate: 1Gbit, delay: 1ms}")
    lines += [f"  - {{between: [router, s{i}], profile: wan}}" for i in range(1, servers + 1)]
    return "\n".join(lines) + "\n"


class Timers:
    """Wrap callables with accumulating wall-clock timers (count, total seconds)."""

    def __init__(self):
        self.count: dict[str, int] = defaultdict(int)
        self.total: dict[str, float] = defaultdict(float)
        self._undo: list = []
        self._depth: dict[str, int] = defaultdict(int)

    def wrap(self, owner, attr: str, label: str) -> None:
        raw = inspect.getattr_static(owner, attr)
        kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
        orig = raw.__func__ if kind else raw
        timers = self

        def timed(*a, **kw):
            # Only the outermost call of a label counts (Node.cmd may call itself via sendCmd...).
            timers._depth[label] += 1
            t0 = time.monotonic()
            try:
                return orig(*a, **kw)
            finally:
                timers._depth[label] -= 1
                if timers._depth[label] == 0:
                    timers.count[label] += 1
                    timers.total[label] += time.monotonic() - t0

        setattr(owner, attr, kind(timed) if kind else timed)
        self._undo.append((owner, attr, raw))

    def restore(self) -> None:
        for owner, attr, orig in reversed(self._undo):
            setattr(owner, attr, orig)
        self._undo.clear()

    def snapshot(self) -> dict:
        return {k: {"calls": self.count[k], "total_s": round(self.total[k], 3),
                    "mean_ms": round(1000 * self.total[k] / self.count[k], 2) if self.count[k] else None}
                for k in sorted(self.total)}

    def reset(self) -> None:
        self.count.clear()
        self.total.clear()


def instrument(t: Timers) -> None:
    import mininet.link
    import mininet.node
    import mininet.util

    t.wrap(mininet.node.Host, "__init__", "mininet Host() (namespace + bash shell)")
    t.wrap(mininet.link.Link, "__init__", "mininet Link() (veth pair + Intf config)")
    t.wrap(mininet.link.Link, "makeIntfPair", "  of which makeIntfPair (ip link add)")
    t.wrap(mininet.link.Intf, "setMAC", "  of which Intf.setMAC (3 x ifconfig: down, hw ether, up)")
    t.wrap(mininet.link.Intf, "isUp", "  of which Intf.isUp (ifconfig up)")
    t.wrap(mininet.node.Node, "cmd", "Node.cmd (one bash round trip each)")
    if hasattr(netns, "_create_links"):
        t.wrap(netns, "_create_links", "_create_links (one ip -batch of all veths)")
    t.wrap(netns, "plan", "addressing plan")
    t.wrap(netns, "node_setups", "set-up plan (plan.commands.node_setups: sysctls, ip, tc lines)")
    t.wrap(netns, "_configure_node", "_configure_node (per-node setup script)")
    # teardown
    t.wrap(netns, "kill_marked", "teardown: kill_marked (scan /proc, SIGKILL, wait)")
    t.wrap(netns, "_wait_gone", "teardown: _wait_gone (all calls)")
    t.wrap(netns.shutil, "rmtree", "teardown: rmtree workdir")


def root_veths() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return [l.split(":")[1].strip() for l in out.splitlines() if l.strip()]


def foreign_netns_pids() -> list[int]:
    """Processes in a network namespace other than ours (wearlab's nodes, if any survived)."""
    mine = os.stat("/proc/self/ns/net").st_ino
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.stat(d / "ns" / "net").st_ino != mine:
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def ping_check(net, wearables: list[str], servers: list[str]) -> list[dict]:
    out = []
    for w in wearables:
        for s in servers:
            ip = net.addresses.address_of(s)
            r = net.run(w, ["ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", ip], timeout=30)
            m = re.search(r"(\d+) received", r.stdout)
            avg = re.search(r"= [\d.]+/([\d.]+)/", r.stdout)
            route = net.sh(w, f"ip route get {ip}", check=False).split("\n")[0].strip()
            out.append({"from": w, "to": s, "ip": ip, "received": int(m[1]) if m else 0, "sent": 3,
                        "avg_rtt_ms": float(avg[1]) if avg else None, "route": route})
    return out



def one_round(topo, timers: Timers, check_wearables: list[str], servers: list[str]) -> dict:
    run_id = f"bench-{secrets.token_hex(3)}"
    timers.reset()
    with Stopwatch() as up:
        net = netns.build(plan_network(topo), run_id=run_id)
    up_profile = timers.snapshot()
    workdir = net.workdir
    n_procs_up = len(netns.marked_pids(run_id))
    veths_in_nodes = sum(len(v) for v in net.addresses.interfaces.values())
    qdisc_count = 0
    try:
        pings = ping_check(net, check_wearables, servers)
        # Every interface really carries its netem: count the qdiscs on two sample nodes.
        for n in ("ap", check_wearables[0]):
            qdisc_count += net.sh(n, "tc qdisc show").count("netem")
    finally:
        timers.reset()
        with Stopwatch() as down:
            net.teardown()
        down_profile = timers.snapshot()
    time.sleep(0.2)
    named_netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()
    leaks = {
        "marked_pids": netns.marked_pids(run_id),
        "marked_pids_any_run": netns.marked_pids(None),
        "root_veths": root_veths(),
        "ip_netns_list": named_netns.splitlines() if named_netns else [],
        "pids_in_other_netns": foreign_netns_pids(),
        "workdir_exists": workdir.exists(),
        "ledger_entry_exists": (ledger.LEDGER / f"net-{run_id}.json").exists(),
    }
    clean = not any(v for v in leaks.values())
    return {"run_id": run_id, "up_s": up.s, "down_s": down.s, "processes_marked_while_up": n_procs_up,
            "interfaces": veths_in_nodes, "netem_qdiscs_on_ap_and_one_wearable": qdisc_count,
            "pings": pings, "pings_ok": all(p["received"] == p["sent"] for p in pings),
            "leaks": leaks, "clean": clean, "profile_up": up_profile, "profile_down": down_profile,
            "builder": "wearlab netns.build"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wearables", type=int, default=50)
    ap.add_argument("--phones", type=int, default=10)
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="build/teardown cycles (default 2)")
    a = ap.parse_args()
    require_root_and_netem()
    env = environment(shaper="netem")
    with tempfile.TemporaryDirectory(prefix="wearlab-bench-scale-") as d:
        f = Path(d) / "scale.yaml"
        f.write_text(topology_yaml(a.wearables, a.phones, a.servers))
        topo = load_topology(f, CATALOG)
        yaml_text = f.read_text()
    servers = [f"s{i}" for i in range(1, a.servers + 1)]
    picks = sorted({1, a.wearables // 3 + 1, 2 * a.wearables // 3 + 1, a.wearables})
    check_wearables = [f"w{i}" for i in picks]
    expected_rtt = 2 * (5 + 1 + 10)
    timers = Timers()
    instrument(timers)
    rounds = []
    try:
        for r in range(a.rounds):
            res = one_round(topo, timers, check_wearables, servers)
            rounds.append(res)
            print(f"round {r + 1}: up {res['up_s']:.2f} s, down {res['down_s']:.2f} s, "
                  f"pings ok {res['pings_ok']}, clean {res['clean']}", flush=True)
    finally:
        timers.restore()

    n_nodes, n_links = len(topo.nodes), len(topo.links)
    print(f"\nScale: {n_nodes} nodes ({a.wearables} wearables, {a.phones} phones, ap, router, {a.servers} servers), "
          f"{n_links} links = {2 * n_links} shaped veth ends")
    print(table(["round", "up s", "down s", f"up<{UP_TARGET_S:.0f}", f"down<{DOWN_TARGET_S:.0f}", "pings ok",
                 "no leaks", "marked procs up"],
                [[i + 1, r["up_s"], r["down_s"], r["up_s"] < UP_TARGET_S, r["down_s"] < DOWN_TARGET_S,
                  r["pings_ok"], r["clean"], r["processes_marked_while_up"]] for i, r in enumerate(rounds)]))
    last = rounds[-1]
    print(table(["from", "to", "received", f"avg RTT ms (~{expected_rtt})", "route"],
                [[p["from"], p["to"], f"{p['received']}/{p['sent']}", p["avg_rtt_ms"], p["route"]]
                 for p in last["pings"]], title="\nReachability (last round)"))
    print(table(["step", "calls", "total s", "mean ms", "% of up"],
                [[k, v["calls"], v["total_s"], v["mean_ms"], f"{100 * v['total_s'] / last['up_s']:.0f}"]
                 for k, v in last["profile_up"].items() if v["calls"] and not k.startswith("teardown")],
                title=f"\nWhere build time goes (last round, up {last['up_s']:.2f} s; wrapped steps nest: "
                      "Node.cmd calls happen inside Host/Link)"))
    print(table(["step", "calls", "total s", "mean ms", "% of down"],
                [[k, v["calls"], v["total_s"], v["mean_ms"], f"{100 * v['total_s'] / last['down_s']:.0f}"]
                 for k, v in last["profile_down"].items() if v["calls"]],
                title=f"\nWhere teardown time goes (last round, down {last['down_s']:.2f} s)"))
    if not last["clean"]:
        print("LEAKS:", {k: v for k, v in last["leaks"].items() if v})
    doc = {
        "benchmark": "scale", "environment": env,
        "parameters": {"wearables": a.wearables, "phones": a.phones, "servers": a.servers, "rounds": a.rounds,
                       "nodes": n_nodes, "links": n_links, "shaper": "netem"},
        "targets": {"up_s": UP_TARGET_S, "down_s": DOWN_TARGET_S},
        "topology_yaml": yaml_text, "rounds": rounds,
        "pass": all(r["up_s"] < UP_TARGET_S and r["down_s"] < DOWN_TARGET_S and r["pings_ok"] and r["clean"]
                    for r in rounds),
    }
    default = (a.wearables, a.phones, a.servers) == (50, 10, 3)
    path = write_result("scale" if default else f"scale-{a.wearables}w{a.phones}p{a.servers}s", doc)
    print(f"\nwrote {path}")
    return verdict({f"up < {UP_TARGET_S:.0f} s, down < {DOWN_TARGET_S:.0f} s, all pings, nothing left": doc["pass"]})


if __name__ == "__main__":
    sys.exit(main())
