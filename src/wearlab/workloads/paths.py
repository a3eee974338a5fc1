"""A client's path to its server, shared by the workloads that have one (http-get and the stream
kinds): the `path` parameter - the client's first hop, where a phone proxies and an AP routes -
and the load-time check that every path is a real first hop that leads to the server."""

from __future__ import annotations

from typing import Any

from wearlab.errors import Problem
from wearlab.model.params import Param
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted


def _path(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"path is the name of the client's first-hop node (e.g. ap or phone), got {value!r}")


PATH = Param("path", _path, None, "the client's first hop (a phone proxies, an AP routes); default: "
             "the client's first neighbour")


def check_nodes(fields, topo, fixed: dict[str, Any], matrix: dict[str, list[Any]],
                 where: dict[tuple[str, Any], YamlPath], src: YamlSource) -> list[Problem]:
    """Client and server exist; every path is a first hop that leads to the server. Fills in
    the default path: the client's first neighbour in link order."""
    problems: list[Problem] = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    client, server = fields.client, fields.server
    nodes = ", ".join(topo.nodes)
    for role_name, node in (("client", client), ("server", server)):
        if node not in topo.nodes:
            problem(("workload", role_name), f"unknown node '{node}'{did_you_mean(node, topo.nodes)} (nodes: {nodes})")
    if client == server:
        problem(("workload", "server"), f"client and server are both '{client}'; they must differ")
    if problems:
        return problems

    neighbors = topo.neighbors(client)
    if "path" not in fixed and "path" not in matrix:
        if not neighbors:
            problem(("workload", "client"), f"client '{client}' has no links, so no path to the server")
            return problems
        fixed["path"] = neighbors[0]
        where[("path", fixed["path"])] = ("workload", "client")

    for hop in matrix.get("path", []) + ([fixed["path"]] if "path" in fixed else []):
        at = where[("path", hop)]
        if hop not in neighbors:
            problem(at, f"'{hop}' is not next to the client '{client}' (its neighbours: "
                        f"{', '.join(neighbors) or 'none'}){did_you_mean(hop, neighbors)}")
        elif not topo.reachable(hop, server, avoiding=(client,)):
            problem(at, f"the server '{server}' cannot be reached through '{hop}' without passing "
                        f"back through the client '{client}'")
    return problems




def check_paths_to(client: str, servers: list[str], topo, fixed: dict[str, Any], matrix: dict[str, list[Any]],
                   where: dict[tuple[str, Any], YamlPath], src: YamlSource) -> list[Problem]:
    """`path` for a workload with several servers (page-load's origins): every path is a first hop
    of the client that leads to every one of them. Fills in the default path as check_nodes does
    (the client's first neighbour). The client and servers are checked by the caller."""
    problems: list[Problem] = []
    neighbors = topo.neighbors(client)
    if "path" not in fixed and "path" not in matrix:
        if not neighbors:
            return [Problem(src.file, src.line(("workload", "client")), "workload.client",
                            f"client '{client}' has no links, so no path to its servers")]
        fixed["path"] = neighbors[0]
        where[("path", fixed["path"])] = ("workload", "client")
    for hop in matrix.get("path", []) + ([fixed["path"]] if "path" in fixed else []):
        at = where[("path", hop)]
        if hop not in neighbors:
            problems.append(Problem(src.file, src.line(at), dotted(at),
                                    f"'{hop}' is not next to the client '{client}' (its neighbours: "
                                    f"{', '.join(neighbors) or 'none'}){did_you_mean(hop, neighbors)}"))
            continue
        cut_off = [s for s in servers if s in topo.nodes and not topo.reachable(hop, s, avoiding=(client,))]
        if cut_off:
            problems.append(Problem(src.file, src.line(at), dotted(at),
                                    f"the server{'s' if len(cut_off) > 1 else ''} {', '.join(cut_off)} cannot be "
                                    f"reached through '{hop}' without passing back through the client '{client}'"))
    return problems
