"""How long an experiment will take, from its plan alone (`wearlab reproduce` prints it first).

    experiment = SET-UP + RESTARTS x (restarts of nodes between groups of cells)
                 + sum over runs of (the run's own time + PER-RUN)

- a run's own time, by what the workload does (`work`):
  - a workload that lasts by design (`run_length`: a stream's `duration`) that long, plus the
    time its backlog takes to drain when it sends faster than the path carries (a bulk stream
    always does): what the path's buffers hold (`backlog`) at the path's rate of payload;
  - a transfer of `size` (http-get) or `bytes` (a bulk stream): TCP's handshake and, for HTTPS,
    TLS's round trips, then the bytes as TCP sends them - slow start from 10 segments, then the
    path's bottleneck rate, at most what loss lets through (Mathis et al.: MSS/RTT x 1.22/sqrt(p));
    a client with a device (`device:`) takes its handshake's time too, and - where the workload's
    agent charges it (`client_pays_per_byte`: http-get, page-load; a stream's agents do not) -
    receives no faster than its per-byte cost allows (the network fills the socket meanwhile: the
    slower of the two);
  - anything else: ELSE_S.
  Never more than the workload's limit (the experiment's `timeout`, after a stream's duration).
- the path: from the workload's client through the cell's first hop (`path`) to its server, the
  fewest links; its rate is the slowest direction on it, its RTT the sum of both directions' delays.
  A wearable's `interface_policy` moves the flow to its WiFi neighbour's path (`_policy_path`).
- SET-UP, RESTARTS and PER-RUN: measured on this machine (CONSTANTS: a 2-vCPU VM, UML guest), and
  printed with every estimate.

What it does not know: a device's other CPU costs, a timeline's link changes, a radio's blackouts,
a policy's rule other than `wifi`'s and `adaptive`'s.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wearlab.model.choices import Runtime
from wearlab.model.media import Medium
from wearlab.plan.plan import CellPlan, RunPlan

MSS = 1448                 # TCP payload of a full frame (timestamps on)
FRAME = 1514               # ... on the wire
INITIAL_WINDOW = 10        # segments (Linux)
ELSE_S = 5.0               # a run whose workload says nothing of its length
# What a path's buffers hold when a stream sends faster than the path carries, if no node says
# otherwise: Linux's default tcp_wmem max (the sender's socket) and tcp_rmem max (a relaying
# proxy's receive side).
DEFAULT_WMEM_MAX = 4_194_304
DEFAULT_RMEM_MAX = 6_291_456


@dataclass(frozen=True)
class Constants:
    """What an experiment costs beyond its runs' own time, per runtime."""

    set_up_s: float        # per experiment: guest boot, network, nodes, agents, warm-up, teardown, summary, plots
    restart_s: float       # per restart of the nodes between groups of cells (and its warm-up)
    per_run_s: float       # per run: links settled and re-seeded, agents, capture read, row written
    measured: str          # where and how the numbers were measured

    def describe(self) -> str:
        return (f"set-up {self.set_up_s:g} s per experiment, {self.restart_s:g} s per restart of the nodes, "
                f"{self.per_run_s:g} s per run beyond its own time ({self.measured})")


# Measured with `wearlab reproduce` on experiments/seeds/ on a 2-vCPU VM (UML guest). Quiet machine
# (the default tier's http-get experiments, 450 runs): set-up 13-15 s per experiment (host start
# and guest boot 5.6-6.4 s, network, nodes and agents 2.6-5.6 s, teardown 0.3-0.5 s, summary and
# plots 3-4 s); 0.04-0.13 s per run beyond the model's own time (links settled and re-seeded,
# capture read, row written); a restart of the nodes with its warm-up 3.4 s. Beside another
# session's tests (load 4 on 2 CPUs): set-up 35-57 s, 0.15-0.6 s per run.
CONSTANTS: dict[Runtime, Constants] = {
    Runtime.UML: Constants(set_up_s=14.0, restart_s=3.5, per_run_s=0.1,
                           measured="2-vCPU VM, UML guest, quiet machine; Nov 2026"),
    Runtime.HOST: Constants(set_up_s=8.0, restart_s=2.0, per_run_s=0.2,
                            measured="guessed from the UML figures without the guest's boot"),
}


@dataclass(frozen=True)
class Path:
    nodes: tuple[str, ...]
    rate_bps: float | None        # the slowest direction on the path (None: no rate anywhere)
    rtt_s: float
    loss: float                   # the highest random loss on it, as a fraction


@dataclass(frozen=True)
class CellEstimate:
    cell: int
    label: str
    work_s: float                 # the run's own time
    how: str                      # how it was worked out


@dataclass
class Estimate:
    experiment: str
    runtime: Runtime
    repetitions: int
    constants: Constants
    cells: list[CellEstimate] = field(default_factory=list)
    groups: int = 1

    @property
    def runs(self) -> int:
        return len(self.cells) * self.repetitions

    @property
    def restarts(self) -> int:
        return self.repetitions * self.groups - 1 if self.groups > 1 else 0

    def run_s(self, cell: int) -> float:
        """One run of cell `cell`, everything included."""
        return self.cells[cell].work_s + self.constants.per_run_s

    @property
    def runs_s(self) -> float:
        return self.repetitions * sum(self.run_s(c.cell) for c in self.cells)

    @property
    def total_s(self) -> float:
        return self.constants.set_up_s + self.restarts * self.constants.restart_s + self.runs_s


def estimate(plan: RunPlan, constants: Constants | None = None) -> Estimate:
    runtime = plan.runtime if plan.runtime in CONSTANTS else Runtime.UML
    c = constants or CONSTANTS[runtime]
    out = Estimate(plan.name, runtime, plan.repetitions, c, groups=len(plan.groups()))
    for cell in plan.cells:
        work, how = work_s(plan, cell)
        out.cells.append(CellEstimate(cell.index, cell.label, work, how))
    return out


def work_s(plan: RunPlan, cell: CellPlan) -> tuple[float, str]:
    """A run's own time, and how it was worked out."""
    values = dict(cell.values)
    ends = plan.endpoints
    limit = plan.timeout_s
    duration = plan.workload.run_length(values)
    path = find_path(plan, ends.get("client"), values.get("path"), ends.get("server"), cell) \
        if "client" in ends and "server" in ends else None
    path, before, policy = _policy_path(plan, cell, path, duration)
    if duration is not None:
        limit += duration
        t, how = duration, f"{duration:g} s by design"
        drain = _drain_s(plan, cell, path, duration)
        if drain > 0:
            t += drain
            how += f" + {drain:.1f} s draining the path's buffers at {_rate(path.rate_bps)}'s payload"
    else:
        size = _size(values)
        if size is None or path is None:
            return min(ELSE_S, limit), f"{ELSE_S:g} s (the workload says nothing of its length)"
        rtts = 2.0 + _handshake_rtts(values)        # TCP's, the request's, and TLS's
        t = rtts * path.rtt_s + transfer_s(size, path)
        how = f"{size:,} B over {_rate(path.rate_bps)}, RTT {path.rtt_s * 1e3:.0f} ms" + \
              (f", loss {path.loss:.1%}" if path.loss else "")
        device = plan.devices.get(ends["client"]) if plan.workload.client_pays_per_byte else None
        if device is not None:
            encrypted = values.get("protocol") in ("https", "tcpcrypt")
            per_byte = device.per_byte.get("encrypted" if encrypted else "plain")
            cpu = per_byte.seconds(size) if per_byte is not None else 0.0
            hs = device.handshake.seconds() if values.get("protocol") == "https" else 0.0
            t = rtts * path.rtt_s + hs + max(transfer_s(size, path), cpu)
            how += f", {device.name}'s handshake {hs * 1e3:.0f} ms and {cpu:.2f} s for its bytes"
    if policy:
        t += before if duration is None else 0.0     # a duration holds the time before the switch
        how += f" ({policy})"
    if t > limit:
        return limit, how + f" (capped at the limit, {limit:g} s)"
    return t, how


def _policy_path(plan: RunPlan, cell: CellPlan, path: Path | None, duration: float | None
                 ) -> tuple[Path | None, float, str]:
    """The path a wearable's `interface_policy` puts the flow on instead of the workload's, the
    time spent on the first one before it moves, and a note; (path, 0, "") without a policy.
    `wifi`: the WiFi neighbour's path from the start. `adaptive` (seed 003's rule): a flow that
    outruns the workload's path (a transfer bigger than B, a bulk or CBR stream faster than the
    path carries) fills the queue before BT (the phone's; the watch's for an upload) past B and
    moves to WiFi after T1 - the time to pass B (~60 ms at BT's rate) left out, and what BT
    carries meanwhile counted on WiFi; any other stays.
    Another policy: the workload's path (its rule is its own)."""
    if path is None:
        return path, 0.0, ""
    client = path.nodes[0]
    options = cell.nodes[client].options if client in cell.nodes else {}
    policy = options.get("interface_policy", "none")
    if policy not in ("wifi", "adaptive"):
        return path, 0.0, ""
    wifi = [end.peer for end in plan.link_ends(client) if end.medium == Medium.WIFI]
    if len(wifi) != 1:
        return path, 0.0, ""
    if policy == "adaptive" and not _outruns(cell, path, duration, float(options.get("policy_backlog") or 0)):
        return path, 0.0, "adaptive: stays on its path"
    on_wifi = find_path(plan, client, wifi[0], path.nodes[-1], cell)
    if on_wifi is None:
        return path, 0.0, ""
    if policy == "wifi":
        return on_wifi, 0.0, f"interface_policy wifi: via {wifi[0]}"
    t1 = float(options.get("policy_t1") or 0)
    return on_wifi, t1, f"adaptive: T1 {t1:g} s on the first path, then via {wifi[0]}"


def _outruns(cell: CellPlan, path: Path, duration: float | None, backlog: float) -> bool:
    """Would the flow fill a queue on `path` (past `backlog` bytes, the policy's B)?"""
    values = cell.values
    if path.rate_bps is None:
        return False
    if duration is None:
        size = _size(values)
        return size is not None and size > backlog
    pattern = values.get("pattern") or values.get("background")
    if pattern == "bulk":
        return True
    if pattern == "cbr":
        try:
            return float(values.get("rate") or values.get("background_rate")) > path.rate_bps * MSS / FRAME
        except (TypeError, ValueError):
            return False
    return False


def _rate(bps: float | None) -> str:
    return "an unlimited rate" if bps is None else f"{bps / 1e6:g} Mbit/s"


def _size(values: Mapping[str, Any]) -> int | None:
    for key in ("size", "bytes"):
        v = values.get(key)
        if v not in (None, ""):
            try:
                return int(v)
            except (TypeError, ValueError):
                return None
    return None


def _handshake_rtts(values: Mapping[str, Any]) -> float:
    protocol = values.get("protocol")
    if protocol == "https":
        return 1.0 if str(values.get("tls_version") or "1.3") == "1.3" else 2.0
    if protocol == "tcpcrypt":
        return 1.0
    return 0.0


def transfer_s(size: int, path: Path) -> float:
    """`size` bytes of payload as TCP sends them on `path`: slow start from the initial window,
    each round trip doubling it, until the window fills the path (rate x RTT); then the rate."""
    rate = path.rate_bps
    if path.loss > 0:
        mathis = MSS * 8 / max(path.rtt_s, 1e-3) * 1.22 / math.sqrt(path.loss)
        rate = mathis if rate is None else min(rate, mathis)
    segments = math.ceil(size / MSS)
    if rate is None:
        return max(0.0, math.ceil(math.log2(segments / INITIAL_WINDOW + 1))) * path.rtt_s
    per_segment = FRAME * 8 / rate
    bdp = max(1.0, path.rtt_s / per_segment)       # segments the path holds
    t, window, left = 0.0, float(INITIAL_WINDOW), segments
    while left > 0 and window < bdp:
        sent = min(left, window)
        left -= sent
        t += path.rtt_s if left > 0 else sent * per_segment
        window *= 2
    return t + left * per_segment


def _drain_s(plan: RunPlan, cell: CellPlan, path: Path | None, duration: float) -> float:
    """A stream that sent faster than the path carries leaves a backlog in the path's buffers,
    delivered after its duration at the path's rate of payload (full segments: MSS of each frame)."""
    values = cell.values
    if path is None or path.rate_bps is None:
        return 0.0
    pattern = values.get("pattern") or values.get("background")
    if pattern == "bulk":
        excess = math.inf
    elif pattern == "cbr":
        rate = values.get("rate") or values.get("background_rate")
        try:
            excess = float(rate) - path.rate_bps * MSS / FRAME
        except (TypeError, ValueError):
            return 0.0
    else:
        return 0.0
    if excess <= 0:
        return 0.0
    backlog = min(excess * duration / 8, backlog_bytes(plan, cell, path))
    return backlog * 8 / (path.rate_bps * MSS / FRAME)


def backlog_bytes(plan: RunPlan, cell: CellPlan, path: Path) -> float:
    """What the path's buffers hold in front of its bottleneck, full: the sender's socket send
    buffer (its tcp_wmem max), on a relaying node its receive buffer (tcp_rmem max, or the kind's
    `rmem_max`), its own `app_buffer` and its send buffer, and the bottleneck's queue. (Full: the
    guest's kernel, 6.12, fits nearly a whole buffer of data - measured: 8.06 MB drained from a
    phone whose rmem_max is 8,291,456.) A relay whose virtual queue throttles it holds next to
    nothing."""
    values = cell.values
    sender = path.nodes[-1] if values.get("direction", "down") != "up" else path.nodes[0]
    total = float(_buffer_max(plan, cell, sender, "wmem"))
    for node in path.nodes[1:-1]:
        if plan.proxying(node, values):
            options = cell.nodes[node].options
            if options.get("mitigation") == "virtual-queue":
                continue
            total += _buffer_max(plan, cell, node, "rmem") + _buffer_max(plan, cell, node, "wmem")
            total += int(options.get("app_buffer") or 0)
    total += bottleneck_queue(plan, path, cell)
    return total


def bottleneck_queue(plan: RunPlan, path: Path, cell: CellPlan | None = None) -> float:
    """The bytes the slowest direction's queue holds (its queue_packets of full frames, or
    queue_bytes), on `cell`'s links (its link settings) or the experiment's."""
    topo = plan.topology_of(cell) if cell is not None else plan.topology
    for a, b in zip(path.nodes, path.nodes[1:]):
        for shape in (topo.link_between(a, b).shape(b, a), topo.link_between(a, b).shape(a, b)):
            if shape.rate_bps == path.rate_bps:
                if shape.queue_bytes:
                    return float(shape.queue_bytes)
                return float((shape.queue_packets or 0) * FRAME)
    return 0.0


def _buffer_max(plan: RunPlan, cell: CellPlan, node: str, which: str) -> int:
    option = cell.nodes[node].options.get(f"{which}_max") if node in cell.nodes else None
    if option not in (None, ""):
        return int(option)
    text = plan.topology.nodes[node].sysctls.get(f"net.ipv4.tcp_{which}")
    try:
        return int(str(text).split()[-1]) if text else (DEFAULT_WMEM_MAX if which == "wmem" else DEFAULT_RMEM_MAX)
    except ValueError:
        return DEFAULT_WMEM_MAX if which == "wmem" else DEFAULT_RMEM_MAX


def find_path(plan: RunPlan, client: str | None, first_hop: Any, server: str | None,
              cell: CellPlan | None = None) -> Path | None:
    """The fewest links from client to server, through `first_hop` when the cell names one; its
    rate, RTT and loss from `cell`'s links (its link settings), else the experiment's."""
    topo = plan.topology_of(cell) if cell is not None else plan.topology
    if client not in topo.nodes or server not in topo.nodes:
        return None
    start = [client]
    if isinstance(first_hop, str) and first_hop in topo.nodes and first_hop != client:
        if topo.link_between(client, first_hop) is None:
            return None
        start = [client, first_hop]
    if start[-1] == server:
        nodes = start
    else:
        seen = set(start)
        queue = deque([start])
        nodes = None
        while queue and nodes is None:
            p = queue.popleft()
            for link in topo.links:
                if p[-1] in (link.a, link.b):
                    nxt = link.other(p[-1])
                    if nxt not in seen:
                        seen.add(nxt)
                        if nxt == server:
                            nodes = [*p, nxt]
                            break
                        queue.append([*p, nxt])
        if nodes is None:
            return None
    rates, rtt, loss = [], 0.0, 0.0
    for a, b in zip(nodes, nodes[1:]):
        link = topo.link_between(a, b)
        for shape in (link.shape(a, b), link.shape(b, a)):
            if shape.rate_bps:
                rates.append(shape.rate_bps)
            rtt += shape.delay_s
            if shape.loss is not None and shape.loss.model == "random":
                loss = max(loss, shape.loss.p / 100)
    return Path(tuple(nodes), min(rates) if rates else None, rtt, loss)


def format_s(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s" if m else f"{s} s"
