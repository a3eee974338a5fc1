"""The commands a run issues in each node, planned: what realize.netns executes to build the
network, and what `wearlab plan EXP --commands` prints (the same lines, from this one module).

Per node, in the order they are applied: sysctls (written to /proc/sys by the node's shell), the
`ip -batch` lines (addresses, static neighbours, routes), offloads off (`ethtool -K`), and the
`tc -batch` lines that shape each direction of each link on its sending end's egress
(plan.shaping). Then, per group of cells (cells that share node settings), the lines a node's
kind runs before any traffic (`NodeKindDecl.commands`: a proxy's iptables REDIRECTs and buffer
sysctls).

Container nodes on the host beside a UML guest (`remote`) are shaped in their peer's namespace,
on a patch veth: their lines land there (see realize.netns).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wearlab.model.choices import Runtime
from wearlab.model.roles import TRANSIT_ROLES
from wearlab.plan.network import NetworkPlan
from wearlab.plan.shaping import netem_seed, qdisc_plan

if TYPE_CHECKING:
    from wearlab.plan.plan import RunPlan

# Every node gets these: reproducible TCP (no metrics carried between runs), no reverse-path
# filtering (multi-homed wearables receive replies on the interface the path chose), and no IPv6:
# wearlab's links are IPv4, and IPv6's own chatter (router solicitations, MLD reports) would sit
# in captures and consume netem's seeded random draws at timing-dependent moments.
BASE_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}
# Offloads would hand tc 64 KB super-packets and blur the emulated timing.
OFFLOADS_OFF = "gro off gso off tso off"


def patch_devices(link_index: int) -> tuple[str, str]:
    """(vector device, patch veth) of a host container's link, in its peer's namespace."""
    return f"wlvec{link_index}", f"wlpatch{link_index}"


def egress(network: NetworkPlan, src: str, dst: str, remote: Collection[str] = ()) -> tuple[str, str]:
    """Where the direction src -> dst is shaped: (node, device). Each end shapes its own egress,
    except a container on the host beside a UML guest: what it sends is shaped in the peer's
    namespace, on the patch veth that hands it to the peer's interface."""
    if src in remote:
        return dst, patch_devices(network.topology.link_between(src, dst).index)[1]
    return src, network.addresses.interface_to(src, dst).name


@dataclass(frozen=True)
class Shaping:
    lines: dict[str, list[str]]                     # node -> tc batch lines
    notes: list[str] = field(default_factory=list)  # conversions applied (plan.shaping)
    netem_seeds: dict[str, int] = field(default_factory=dict)   # "a->b" -> netem PRNG seed


def shaping(network: NetworkPlan, *, seed: int | None = None, verb: str = "add",
            remote: Collection[str] = ()) -> Shaping:
    """Every direction of every link, as tc batch lines per node. `seed`: the experiment's (each
    direction's netem gets its own derived seed); None where this kernel's netem takes none."""
    out = Shaping({n: [] for n in network.topology.nodes})
    for lp in network.links:
        link = lp.link
        for node, shape in ((link.a, link.forward), (link.b, link.reverse)):
            peer = link.b if node == link.a else link.a
            where, dev = egress(network, node, peer, remote)
            s = None
            if seed is not None and verb == "add":
                s = out.netem_seeds[f"{node}->{peer}"] = netem_seed(seed, node, peer)
            qp = qdisc_plan(dev, shape, shaper=lp.shaper.value, verb=verb, seed=s)
            out.lines[where] += qp.lines
            out.notes.extend(f"{where}:{dev} (link {link.a}-{link.b}): {n}" for n in qp.notes)
    return out


@dataclass(frozen=True)
class NodeSetup:
    """What one node's shell applies when the network is built, in this order."""

    sysctls: dict[str, str]
    ip: list[str]          # `ip -batch` lines
    offloads: list[str]    # devices whose offloads go off
    tc: list[str]          # `tc -batch` lines

    def commands(self, about: dict[str, str] | None = None) -> list[str]:
        """As command lines (what `wearlab plan --commands` prints); `about`: device -> a comment
        put before its first tc line."""
        tc, said = [], set()
        for line in self.tc:
            dev = next((d for d in (about or {}) if f" dev {d} root " in line and d not in said), None)
            if dev is not None:
                said.add(dev)
                tc.append(f"# {about[dev]}")
            tc.append(f"tc {line}")
        return [*(f"sysctl -w {k}={v}" for k, v in self.sysctls.items()), *(f"ip {l}" for l in self.ip),
                *(f"ethtool -K {d} {OFFLOADS_OFF}" for d in self.offloads), *tc]


def node_setups(network: NetworkPlan, *, seed: int | None = None, remote: Collection[str] = ()
                ) -> tuple[dict[str, NodeSetup], Shaping]:
    """Every node's set-up."""
    topo, addresses = network.topology, network.addresses
    shaped = shaping(network, seed=seed, remote=remote)
    out: dict[str, NodeSetup] = {}
    for name, node in topo.nodes.items():
        intfs = addresses.interfaces[name]
        sysctls = {**BASE_SYSCTLS, "net.ipv4.ip_forward": "1" if node.role in TRANSIT_ROLES else "0",
                   **node.sysctls, **{f"net.ipv4.conf.{i.name}.rp_filter": "0" for i in intfs}}
        ip = ["link set lo up"]
        for i in intfs:
            ip += [f"addr add {i.ip}/24 dev {i.name}", f"link set {i.name} up",
                   # Static neighbours: no ARP exchange inflates a run's first round trip.
                   f"neigh replace {i.peer_ip} lladdr {i.peer_mac} dev {i.name} nud permanent"]
        ip += [f"route replace {prefix} via {via}" for prefix, via in addresses.routes[name]]
        patches, patched = [], []  # a host container's link: its vector device <-> the patch veth
        for c in remote:
            link = topo.link_between(name, c)
            if link is not None:
                vec, patch = patch_devices(link.index)
                patched += [vec, patch]
                ip += [f"link set {vec} up", f"link set {patch} up"]
                for a, b in ((vec, patch), (patch, vec)):
                    patches += [f"qdisc add dev {a} clsact",
                                f"filter add dev {a} ingress prio 10 protocol all u32 match u32 0 0 "
                                f"action mirred egress redirect dev {b}"]
        out[name] = NodeSetup(sysctls, ip, [i.name for i in intfs] + patched, patches + shaped.lines[name])
    return out, shaped


def run_commands(p: RunPlan) -> dict[str, list[tuple[str, list[str]]]]:
    """node -> [(when, command lines)]: the network's set-up, then each group's node kind lines
    (only where the kind has any). With the plan's seed: a kernel whose netem takes no seed gets
    the same lines without `seed N`."""
    remote = {n for n, node in p.topology.nodes.items() if node.image} if p.runtime == Runtime.UML else set()
    setups, _ = node_setups(p.network, seed=p.seed, remote=remote)
    about: dict[str, dict[str, str]] = {n: {} for n in p.topology.nodes}
    for lp in p.network.links:
        link = lp.link
        for src, dst, shape in ((link.a, link.b, link.forward), (link.b, link.a, link.reverse)):
            where, dev = egress(p.network, src, dst, remote)
            said = ", ".join(f"{k} {v}" for k, v in shape.to_document().items() if v not in (None, False) and str(v) not in ("0s", "0ms", "0us", "0"))
            about[where][dev] = f"{src}->{dst} (link {link.name}, {lp.shaper.value}): {said or 'unshaped'}"
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for n in p.topology.nodes:
        out[n] = [("network set-up", setups[n].commands(about[n]))]
    groups = p.groups()
    for g, cells in enumerate(groups):
        for n, setting in cells[0].nodes.items():
            lines = setting.kind.commands(setting.options, p.needs_of(n, setting))
            if lines:
                which = "every cell" if len(groups) == 1 else \
                    f"cell{'s' if len(cells) > 1 else ''} {', '.join(str(c.index) for c in cells)}"
                out[n].append((f"kind {setting.kind.name} ({which})", lines))
    return out
