"""Roles: what a node is in the emulated network, which decides addressing and forwarding.

Only phones, access points and routers forward other nodes' packets; what software a node runs
is its kind (wearlab.nodes.node_kind), not its role.
"""

from __future__ import annotations

from enum import Enum


class Role(str, Enum):
    WEARABLE = "wearable"
    PHONE = "phone"
    AP = "ap"
    ROUTER = "router"
    SERVER = "server"


ROLES = [r.value for r in Role]
TRANSIT_ROLES = frozenset({Role.PHONE, Role.AP, Role.ROUTER})
