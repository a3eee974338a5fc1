"""Automatic addresses and static routes for a topology.

Every link is its own /24: link i gets 10.(10 + i // 256).(i % 256).0/24, its first node .1 and its
second .2. Routes come from a breadth-first search in which only forwarding roles (phone, ap,
router) may be transit hops: a watch or a server never forwards someone else's packets.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field

from wearlab.model.roles import TRANSIT_ROLES
from wearlab.model.topology import Topology


@dataclass(frozen=True)
class Interface:
    node: str
    name: str          # inside the node's namespace: eth0, eth1, ... in link order
    ip: str
    mac: str
    prefix: str        # the link's subnet, e.g. 10.10.3.0/24
    link_index: int
    peer: str
    peer_ip: str
    peer_mac: str


@dataclass
class AddressPlan:
    interfaces: dict[str, list[Interface]] = field(default_factory=dict)   # node -> its interfaces
    routes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # node -> (prefix, via)

    def interface_to(self, node: str, peer: str) -> Interface:
        for intf in self.interfaces[node]:
            if intf.peer == peer:
                return intf
        raise KeyError(f"{node} has no link to {peer}")

    def address_of(self, node: str) -> str:
        """The node's first address: what others use to reach it by name."""
        return self.interfaces[node][0].ip


def link_subnet(index: int) -> ipaddress.IPv4Network:
    if index >= 256 * 200:
        raise ValueError("too many links for the 10.10.0.0-10.209.255.255 plan")
    return ipaddress.IPv4Network(f"10.{10 + index // 256}.{index % 256}.0/24")


MAC_PREFIX = "02:77:6c"  # locally administered, "wl": how cleanup recognises wearlab's namespaces


def link_mac(index: int, end: int) -> str:
    """Locally administered, deterministic: 02:77:6c:<link hi>:<link lo>:<end>."""
    return f"{MAC_PREFIX}:{index >> 8 & 0xff:02x}:{index & 0xff:02x}:{end:02x}"


def plan_addresses(topo: Topology) -> AddressPlan:
    p = AddressPlan(interfaces={n: [] for n in topo.nodes}, routes={n: [] for n in topo.nodes})
    for link in topo.links:
        net = link_subnet(link.index)
        ip_a, ip_b = str(net.network_address + 1), str(net.network_address + 2)
        mac_a, mac_b = link_mac(link.index, 1), link_mac(link.index, 2)
        for node, peer, ip, mac, peer_ip, peer_mac in ((link.a, link.b, ip_a, mac_a, ip_b, mac_b),
                                                       (link.b, link.a, ip_b, mac_b, ip_a, mac_a)):
            name = f"eth{len(p.interfaces[node])}"
            p.interfaces[node].append(Interface(node, name, ip, mac, str(net), link.index, peer,
                                                peer_ip, peer_mac))
    for node in topo.nodes:
        p.routes[node] = _routes_from(topo, p, node)
    return p


def _routes_from(topo: Topology, p: AddressPlan, src: str) -> list[tuple[str, str]]:
    """(prefix, next-hop ip) for every subnet not attached to src, by BFS over transit nodes."""
    first_hop: dict[str, str] = {}          # reached node -> neighbour of src that leads there
    queue: deque[str] = deque()
    for intf in p.interfaces[src]:
        if intf.peer not in first_hop:
            first_hop[intf.peer] = intf.peer
            queue.append(intf.peer)
    while queue:
        node = queue.popleft()
        if topo.nodes[node].role not in TRANSIT_ROLES:
            continue
        for intf in p.interfaces[node]:
            if intf.peer != src and intf.peer not in first_hop:
                first_hop[intf.peer] = first_hop[node]
                queue.append(intf.peer)
    # A subnet is reachable through the first transit node (in BFS order) attached to it; an
    # endpoint's other subnets are not, since endpoints do not forward.
    seen = {i.prefix for i in p.interfaces[src]}
    routes: list[tuple[str, str]] = []
    for node, hop in first_hop.items():
        if topo.nodes[node].role not in TRANSIT_ROLES:
            continue
        via = p.interface_to(src, hop).peer_ip
        for intf in p.interfaces[node]:
            if intf.prefix not in seen:
                routes.append((intf.prefix, via))
                seen.add(intf.prefix)
    return routes
