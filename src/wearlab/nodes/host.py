"""The `host` kind: a node with no software of its own (wearables, access points, routers, and a
phone that routes instead of proxying). Workloads may still start their agents on it."""

from __future__ import annotations

from wearlab.nodes.node_kind import NodeKind


class Host(NodeKind):
    name = "host"
    doc = "no software of its own; forwards if its role forwards"
