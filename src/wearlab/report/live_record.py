"""The live record of a running experiment: what its `control/live.json` holds, and how readers
find it.

The runner (run.control.ControlServer) writes the record every half second into the run's results
directory, the one thing every runtime shares with the host; `wearlab top` (report.live) and the
exporter (report.exporter) read it. It is one typed model so that writer and readers agree on
every field: the parts lower layers produce - a workload's `live()` (workloads), a node kind's
`live()` (nodes), the link counters (realize) - come as mappings with these models' field names
and are validated when the record is written, so an entry nobody declared fails there (the
record then says why in `error`) instead of being matched by its display text downstream.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wearlab.model.choices import RadioState
from wearlab.model.shape import Shape

CONTROL_DIR = "control"
LIVE_FILE = "live.json"
HEARTBEAT_FILE = "heartbeat"
STALE_S = 5.0              # a heartbeat older than this is a dead run's (killed with -9)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunProgress(_Record):
    total: int | None = None           # runs the experiment has in all, once the runner knows
    done: int = 0
    failed: int = 0
    run: int | None = None             # the run in progress: its number,
    cell: str | None = None            # its cell as the workload describes it,
    repetition: int | None = None      # and its repetition


class LinkCounters(_Record):
    """A direction's root qdisc (`tc -s`), since the network was built."""

    bytes: int = 0
    packets: int = 0
    drops: int = 0
    backlog_bytes: int = 0
    backlog_packets: int = 0


class LinkDirection(_Record):
    src: str
    dst: str
    shape: Shape                       # in effect now; a direction that is down has loss 100 %
    down: bool = False
    counters: LinkCounters | None = None   # refreshed less often than the record (one tc query per node)

    @property
    def direction(self) -> str:
        return f"{self.src}->{self.dst}"

    @property
    def link(self) -> str:
        """The link's name, the same for both directions."""
        return "-".join(sorted((self.src, self.dst)))


class ChangeCount(_Record):
    link: str
    source: str                        # timeline, live, reset, handover
    count: int


class LinkChanges(_Record):
    changes: list[ChangeCount] = Field(default_factory=list)
    last_change_ns: dict[str, int] = Field(default_factory=dict)   # link -> time of its last change


class OwdHistogram(_Record):
    """One-way delay of the run's messages so far: cumulative counts per bound (seconds), as
    Prometheus buckets are."""

    le: list[float]
    counts: list[int]
    sum: float = 0.0
    count: int = 0
    bytes: int = 0                     # message bytes delivered


class StreamState(_Record):
    """One stream of the run, keyed by (role, direction): e.g. the main download, or the
    messages workload's small messages (`msg`)."""

    role: str
    direction: Literal["down", "up"]
    owd_s: float | None = None         # median over the last second
    owd_max_s: float | None = None     # largest in the last second
    goodput_bps: float = 0.0           # delivered in the last second
    messages: int = 0                  # delivered in the run
    owd_30s: list[float] = Field(default_factory=list)   # the last 30 s of deliveries, for a sparkline
    owd_hist: OwdHistogram

    @property
    def key(self) -> str:
        """How the stream is named in labels and tables: 'main down'."""
        return f"{self.role} {self.direction}"


class SocketQueues(_Record):
    """The proxying phone's TCP socket queues at the last sample (`ss`): the receive queue of its
    socket towards the server, the send queue of its sockets towards the watch."""

    receive_bytes: int
    send_bytes: int


# The parts of a proxied download's path (seed 003 Fig. 10), as views name them.
DELAY_PARTS = {"d1": "server send queue", "d2": "phone TCP receive buffer", "d3": "proxy's own buffer",
               "d4": "phone send queue (BT)"}


class DelaySplit(_Record):
    """Where a proxied download's backlog sits now (measure.queues): bytes per part, and the
    delay each adds at the rate the watch receives (None while it receives nothing; d3 None for
    a proxy that cannot tell what it holds: a command proxy)."""

    drain_bytes_per_s: float | None = None
    d1_bytes: int | None = None        # the server's send queue
    d2_bytes: int | None = None        # the phone's TCP receive queue (server side)
    d3_bytes: int | None = None        # the proxy's own buffer (relay: its pipes; HAProxy: its buffers)
    d4_bytes: int | None = None        # the phone's send queue towards the watch (BT)
    d1_s: float | None = None
    d2_s: float | None = None
    d3_s: float | None = None
    d4_s: float | None = None


class VirtualQueue(_Record):
    """The relay's virtual-queue mitigation (nodes.vqueue) at its last decision."""

    queue_bytes: float
    bt_rate_bps: float                 # its estimate of the BT link's rate
    upper_bound_bytes: float           # Q_UB: above it the downlink is throttled
    throttled: bool


class WorkloadState(_Record):
    streams: list[StreamState] = Field(default_factory=list)
    phone_queues: SocketQueues | None = None
    delay_split: DelaySplit | None = None
    virtual_queue: VirtualQueue | None = None


class HandoverState(_Record):
    mode: str                          # the wearable's `interface_policy` (reactive, wifi-always, proactive)
    last_event: str | None = None      # what the handover did last in this run,
    at_s: float | None = None          # and when (s from the run's start)


class InterfaceState(_Record):
    policy: str                        # the wearable's `interface_policy`
    active: str                        # the interface carrying the flow now (bt, wifi)
    since_s: float | None = None       # since when (s from the run's start)
    switches: int = 0                  # in this run
    # What the policy decides on, as its selector's last poll read it, and the thresholds it has:
    backlog_bytes: int | None = None   # bytes waiting to cross BT (the larger side's)
    backlog_side: str | None = None    # where: phone (a download's) or watch (an upload's)
    wifi_bps: float | None = None      # the watch's WiFi throughput (the selector's trailing window)
    backlog_limit: int | None = None   # policy_backlog, B
    wifi_low_bps: float | None = None  # policy_wifi_low


class MultipathPath(_Record):
    """One path of a wearable's multipath transport, as the watch's agent counts it: what its own
    scheduler put on the path (the watch's uploads) and what arrived over it (downloads, which the
    server agents' schedulers split)."""

    name: str                          # the path's medium: wifi, bt
    bytes_sent: int = 0                # chunk payload bytes the watch's scheduler put on it, since the agent started
    rate_bps: float = 0.0              # of those, per second since the record before
    srtt_s: float | None = None        # the transport's smoothed RTT on it (from the watch's chunks' ACKs)
    bytes_received: int = 0            # chunk payload bytes that arrived over it (first copies and duplicates)
    rate_in_bps: float = 0.0           # of those, per second since the record before


class MultipathState(_Record):
    """A wearable's multipath transport (nodes.multipath_endpoints): the scheduler and its split."""

    scheduler: str
    paths: list[MultipathPath] = Field(default_factory=list)


class NodeState(_Record):
    radio: RadioState | None = None    # a wearable with `radio: bt`
    handover: HandoverState | None = None
    interface: InterfaceState | None = None   # a wearable with `interface_policy:`
    multipath: MultipathState | None = None   # a wearable with `multipath:`

    def __bool__(self) -> bool:
        return any(x is not None for x in (self.radio, self.handover, self.interface, self.multipath))


class LiveDoc(_Record):
    t_ns: int = 0
    experiment: str = "?"
    error: str | None = None           # the runner could not assemble the record: why
    run_s: float | None = None         # since the run in progress began (a hold's: since it was held); None between runs
    held: bool = False                 # a held network (wearlab deploy, run --hold): no workload of wearlab's runs
    progress: RunProgress = Field(default_factory=RunProgress)
    workload: WorkloadState = Field(default_factory=WorkloadState)
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    links: list[LinkDirection] = Field(default_factory=list)
    changes: LinkChanges = Field(default_factory=LinkChanges)
    # Where the record was found: filled by the reader, never written.
    results_dir: str | None = None

    def to_json(self) -> str:
        return self.model_dump_json(exclude={"results_dir"})


# -- readers ------------------------------------------------------------------------------------


def live_runs(base: Path) -> list[Path]:
    """Control directories of runs under `base` (a results directory, an experiment's, or the
    results base) whose heartbeat is fresh, newest first."""
    candidates = [base / CONTROL_DIR] if (base / CONTROL_DIR).is_dir() else \
        list(base.glob(f"*/{CONTROL_DIR}")) + list(base.glob(f"*/*/{CONTROL_DIR}"))
    candidates = list({c.resolve(): None for c in candidates})   # `latest` is a second name of one
    live = []
    for c in candidates:
        try:
            beat = json.loads((c / HEARTBEAT_FILE).read_text())
        except (OSError, ValueError):
            continue
        age = (time.time_ns() - beat["t_ns"]) / 1e9
        if age < STALE_S:
            live.append((beat["t_ns"], c))
    return [c for _, c in sorted(live, reverse=True)]


def read_record(control: Path) -> LiveDoc:
    """The record in a control directory. Not written yet: an empty one (between runs); not a
    record of this wearlab's: one whose `error` says so."""
    results = str(control.parent)
    try:
        text = (control / LIVE_FILE).read_text()
    except OSError:
        return LiveDoc(results_dir=results)
    try:
        doc = LiveDoc.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return LiveDoc(results_dir=results, error=f"{control / LIVE_FILE} is not a live record this wearlab reads "
                                                  f"({where}: {first['msg']})")
    return doc.model_copy(update={"results_dir": results})


def read_live(base: Path) -> LiveDoc | None:
    """The record of the newest live run under `base`; None when nothing runs there."""
    runs = live_runs(base)
    return read_record(runs[0]) if runs else None
