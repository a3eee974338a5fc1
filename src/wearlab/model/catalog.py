"""The catalog type: every node kind and workload kind wearlab knows, and each role's default
kind. `wearlab.catalog.CATALOG` is the one instance, filled by listing the kinds once; loaders
and the plan receive it as an argument, so the model never imports what runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wearlab.model.kinds import NodeKindDecl, WorkloadDecl
from wearlab.model.roles import Role


@dataclass(frozen=True)
class Catalog:
    node_kinds: Mapping[str, type[NodeKindDecl]]
    workloads: Mapping[str, type[WorkloadDecl]]
    default_kinds: Mapping[Role, str]

    @classmethod
    def of(cls, node_kinds: list[type[NodeKindDecl]], workloads: list[type[WorkloadDecl]],
           default_kinds: Mapping[Role, str]) -> Catalog:
        kinds = {k.name: k for k in node_kinds}
        loads = {w.kind: w for w in workloads}
        if len(kinds) != len(node_kinds) or len(loads) != len(workloads):
            raise ValueError("two kinds share a name")
        missing = set(Role) - set(default_kinds)
        if missing or not set(default_kinds.values()) <= set(kinds):
            raise ValueError(f"every role needs a default kind from the catalog (missing: {missing})")
        return cls(kinds, loads, dict(default_kinds))
