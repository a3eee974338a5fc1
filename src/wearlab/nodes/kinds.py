"""The registry of node kinds. A kind is a small class registered for one or more roles; it
starts the services its role needs for a given workload and reports their versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from wearlab.model.topology import Role

if TYPE_CHECKING:
    from wearlab.realize.network import Network

KINDS: dict[Role, type["NodeKind"]] = {}


def register(*roles: Role):
    def deco(cls):
        for r in roles:
            KINDS[r] = cls
        return cls
    return deco


class NodeKind:
    """Default kind: a plain host with nothing to start (wearables, APs, routers)."""

    roles: ClassVar[tuple[Role, ...]] = ()

    def __init__(self, net: "Network", name: str):
        self.net = net
        self.name = name

    def start(self, **needs) -> None:
        """Start this node's services; `needs` says what the workload requires of it."""

    def stop(self) -> None:
        """Stop services gracefully (teardown kills whatever is left)."""


def kind_for(role: Role) -> type[NodeKind]:
    return KINDS.get(role, NodeKind)


# Importing the modules registers their kinds.
from wearlab.nodes import phone as _phone, server as _server  # noqa: E402,F401  (registers the kinds)
