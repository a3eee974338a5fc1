"""What a workload needs of the nodes it runs on, and what a node kind offers: computed by the
plan for every cell, checked there against the kinds (a server kind without the service a cell
asks for is an input error before anything runs), and handed to the kinds when they start.
"""

from __future__ import annotations

from dataclasses import dataclass

from wearlab.model.features import KernelFeature


@dataclass(frozen=True)
class Service:
    """Something a node offers on the network."""

    protocol: str                        # "http", "https", "tcp"
    port: int
    attrs: tuple[tuple[str, str], ...] = ()

    def matches(self, protocol: str, **attrs: str) -> bool:
        return self.protocol == protocol and all(dict(self.attrs).get(k) == v for k, v in attrs.items())

    def describe(self) -> str:
        return f"{self.protocol}:{self.port}" + "".join(f" {k}={v}" for k, v in self.attrs)


@dataclass(frozen=True)
class Need:
    """What a workload needs of one node; a kind that cannot provide it says so."""

    node: str

    def features(self) -> frozenset[KernelFeature]:
        """What the kernel must offer for the node to provide it (the plan adds these to the run's)."""
        return frozenset()


@dataclass(frozen=True)
class Files(Need):
    """Serve generated files of these sizes (seeded, incompressible)."""

    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class PageContent(Need):
    """Serve a page's objects: generated bodies of each object's size at its path, per host name
    (a node may serve several origins), with each object's content type, each response's first
    byte held for the object's server time (the origin's time to produce it, e.g. to render a page),
    and its Cache-Control (model.page.cache_control)."""

    # (host, path, size, content type[, server time in s[, cache control]]): `served` fills in
    # what is left out (0 s, no-store, what servers sent before either existed).
    objects: tuple[tuple, ...] = ()
    # the TLS versions its https cells pin, in order: it accepts the lowest to the highest
    tls_versions: tuple[str, ...] = ("1.3",)

    @property
    def served(self) -> tuple[tuple[str, str, int, str, float, str], ...]:
        return tuple(tuple(o) + (0.0, "no-store")[len(o) - 4:] for o in self.objects)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o[0] for o in self.objects))

    @property
    def server_time(self) -> bool:
        """Whether any object waits before its first byte."""
        return any(o[4] > 0 for o in self.served)


@dataclass(frozen=True)
class Relay(Need):
    """Proxy connections that the node's clients open to (server address, port). A node whose
    kind does not proxy routes them instead."""

    server: str = ""
    address: str = ""
    port: int = 0
    # The workload reads the relay's own per-read/per-write timestamps (the streams' d2/d3 split).
    # Only then does a relay take them: a clock read is a system call in the UML guest (~11 us,
    # no vDSO there), two per splice, a third of what a relayed round trip costs there.
    timestamps: bool = False


@dataclass(frozen=True)
class Tcpcrypt(Need):
    """Run tcpcryptd on this node for connections to `port`: as the client (`outbound`) or the
    server (`inbound`) end. Any kind can carry it (nodes.tcpcrypt)."""

    port: int = 0
    side: str = "outbound"
    # Reset a connection to `port` that would fall back to plain TCP instead of relaying it
    # (tcpcryptd --require-encryption PORT); a node's `tcpcrypt: require` does it for all.
    require: bool = False
    # Start the daemon resuming (RFC 8548 3.5) whatever the node's `tcpcrypt_resumption` says: a
    # workload whose cells ask for resumption (page-load's `resumption: on`) on the server end.
    resume: bool = False

    def features(self) -> frozenset[KernelFeature]:
        # tcpcryptd writes TCP-ENO's option from a BPF sock_ops program and takes the node's
        # connections to the port with iptables REDIRECT rules (nodes.tcpcrypt)
        return frozenset({KernelFeature.BPF_SOCK_OPS, KernelFeature.IPT_REDIRECT})
