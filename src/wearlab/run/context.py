"""What a workload gets to work with during an experiment: the live network, the running node
kinds, captures, routes, and where its files go. The runner owns it; workloads only use it."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wearlab.measure.capture import ClientCapture

if TYPE_CHECKING:
    from wearlab.model.experiment import Experiment
    from wearlab.nodes.kinds import NodeKind
    from wearlab.realize.network import Network


@dataclass
class RunContext:
    net: Network
    exp: Experiment
    out_dir: Path
    nodes: dict[str, NodeKind] = field(default_factory=dict)
    captures: dict[str, ClientCapture] = field(default_factory=dict)
    routes: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, destination) -> via
    series: SeriesFiles | None = None
    cwd: Path = field(default_factory=Path.cwd)
    links: Any = None      # realize.linkctl.LinkControl: the links, changed in place
    changes: Any = None    # run.timeline.ChangeLog: every link change of the run in progress
    workload: Any = None   # the experiment's Workload (a live view asks it for its state)
    progress: dict = field(default_factory=dict)   # runs done/total/failed, the current cell
    run_start_ns: int | None = None  # time.time_ns() at the run's start: t = 0 of its series and timeline

    @property
    def timeout_s(self) -> float:
        return self.exp.timeout_s

    def address(self, node: str) -> str:
        """The node's address as others reach it (its first interface)."""
        return self.net.addresses.address_of(node)

    def capture(self, node: str, snaplen: int = 0) -> ClientCapture:
        """One capture of all of `node`'s interfaces for the whole experiment (kept in captures/);
        snaplen 0 keeps whole packets."""
        if node not in self.captures:
            intfs = [i.name for i in self.net.addresses.interfaces[node]]
            self.captures[node] = ClientCapture(self.net, node, intfs, self.out_dir / "captures", snaplen=snaplen)
        return self.captures[node]

    def select_route(self, node: str, destination: str, via: str) -> None:
        """Send `node`'s packets for `destination` through its neighbour `via` (only when it
        changes). A phone on that path proxies if its kind intercepts, else it routes."""
        if self.routes.get((node, destination)) == via:
            return
        dest_ip = self.address(destination)
        hop = self.net.addresses.interface_to(node, via)
        self.net.sh(node, f"ip route replace {dest_ip}/32 via {hop.peer_ip} dev {hop.name}")
        self.routes[(node, destination)] = via

    def workdir(self, name: str) -> Path:
        d = self.net.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d


class SeriesFiles:
    """Time series under series/<name>.csv, one file per series a workload declares; each row
    starts with the run and its cell's parameters, so `pandas.read_csv` gives a tidy table."""

    def __init__(self, directory: Path, declared: dict[str, tuple[str, ...]], param_columns: list[str]):
        self.directory = directory
        self.declared = declared
        self.head = ["run", "repetition", *param_columns]
        self._files: dict[str, Any] = {}

    def append(self, name: str, run: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        if name not in self.declared:
            raise KeyError(f"series {name!r} is not declared by the workload")
        if name not in self._files:
            self.directory.mkdir(parents=True, exist_ok=True)
            f = (self.directory / f"{name}.csv").open("w", newline="")
            w = csv.DictWriter(f, fieldnames=[*self.head, *self.declared[name]], extrasaction="ignore")
            w.writeheader()
            self._files[name] = (f, w)
        f, w = self._files[name]
        prefix = {k: run.get(k, "") for k in self.head}
        for r in rows:
            w.writerow({**prefix, **{k: _cell(v) for k, v in r.items()}})
        f.flush()
        os.fsync(f.fileno())

    def close(self) -> None:
        for f, _ in self._files.values():
            f.close()
        self._files.clear()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.9g}"
    return v
