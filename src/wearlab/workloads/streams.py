"""Stream workloads: `stream` (patterns cbr and bulk) and `messages`, with exact one-way delay per
message.

- `stream`, pattern `cbr`: messages of `message_size` at `rate` (a paced sender: video, audio,
  sensor uploads); pattern `bulk`: back-to-back messages for `duration` or `bytes` (a download).
  One kind, so an experiment can sweep the pattern;
- `messages`: small messages every `interval` on their own connection, alongside a `background`
  bulk or CBR stream on another one (seed 003's Telegram case: how long a chat message takes
  while a download saturates the BT link).
`direction` is down (server -> client), up, or both. Each message carries its send time; the
receiver records delivery to the app (all nodes share one kernel clock). A run's row holds the
OWD median, p95 and max and the goodput per direction; the per-message OWD and the goodput per
200 ms go to series/owd.csv and series/goodput.csv.

When the path's first hop is a phone whose kind proxies (CPROXY), the run also says where the
server->watch delay sits (seed 003 Fig. 10): d1 server -> the phone's kernel, d2 the phone's TCP
receive buffer, d3 the proxy's own buffer, d4 the phone -> the watch's app, per message, from
captures on the phone's uplink and the relay's read/write timestamps (series/delay_split.csv);
for proxies that do not report their reads and writes (haproxy, command) d2+d3 are one number.
The phone's and the server's socket queues are sampled during the run (series/queues.csv; live,
the d1-d4 split of the backlog: measure.queues), and a relay with
the virtual-queue mitigation contributes its controller's state (series/vq.csv).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wearlab.errors import Problem
from wearlab.measure.agents import StreamAgent
from wearlab.measure.playout import playout
from wearlab.measure.queues import QueueSampler
from wearlab.measure.stream_records import (
    DIRECTIONS,
    LiveTail,
    at_offset,
    file_size,
    goodput_bins,
    owd_stats,
    read_events,
    read_records,
    read_vq,
)
from wearlab.model import params as P
from wearlab.model import ports
from wearlab.model.columns import Metric, Series
from wearlab.model.features import KernelFeature
from wearlab.model.declarations import PlanView, WorkloadFields
from wearlab.model.needs import Need, Relay, Tcpcrypt
from wearlab.model.params import Param, ParamSet
from wearlab.model.yamlsrc import dotted
from wearlab.model.quantities import format_duration, format_rate, format_size
from wearlab.nodes.tcpcrypt import RunAccount, encrypted
from wearlab.workloads import apps
from wearlab.workloads.workload import Outcome, Workload
from wearlab.workloads.run_energy import ENERGY_SERIES, RunEnergy, energy_metrics
from wearlab.workloads.paths import PATH, check_nodes

STREAM_PORT = ports.STREAM
# The same stream agent on a second port, which the nodes' tcpcryptd intercept in cells with
# `tcpcrypt: true` (nodes/tcpcrypt.py): plain cells stay on STREAM_PORT, untouched.
TCPCRYPT_PORT = ports.STREAM_TCPCRYPT


class StreamFields(WorkloadFields):
    client: str
    server: str


class MessagesFields(WorkloadFields):
    client: str
    server: str


def _direction_param(default: str = "down") -> Param:
    return Param("direction", P.choice("direction", ("down", "up", "both")), default,
                 "down: server -> client; up; both at once")


# App reconnect behaviours: (silence before reconnecting, retry interval), seconds.
RECONNECT: dict[str, tuple[float, float] | None] = {"none": None, "rtapp": (3.0, 5.0), "tinycam": (10.0, 60.0)}

TCPCRYPT = Param("tcpcrypt", P.flag("tcpcrypt"), False,
                 "the stream over wearlab's tcpcrypt (tcpcryptd at client and server; a phone that splits "
                 "the connection makes it fall back to plain TCP)")
DURATION = Param("duration", P.positive_duration, 30.0, "how long the sender sends", to_doc=format_duration,
                 shown=lambda v: format_duration(float(v)))


def _stream_metrics() -> tuple[Metric, ...]:
    out: list[Metric] = []
    for d in DIRECTIONS:
        out += [Metric(f"{d}_owd_median_s", "s", label=f"{d} OWD", summarised=True,
                       doc=f"median one-way delay of the {d} stream's messages"),
                Metric(f"{d}_owd_p95_s", "s", label=f"{d} OWD p95", summarised=True,
                       doc=f"{d}: 95th percentile of the messages' one-way delays"),
                Metric(f"{d}_owd_max_s", "s", label=f"{d} OWD max", doc=f"{d}: the largest message one-way delay"),
                Metric(f"{d}_owd_mean_s", "s", label=f"{d} OWD mean",
                       doc=f"{d}: mean one-way delay of the messages (seed 003 section 5 reports average RTTs)"),
                Metric(f"{d}_goodput_bps", "bit/s", better="higher", label=f"{d} goodput", summarised=True,
                       doc="message bytes delivered / (last - first delivery)"),
                Metric(f"{d}_stall_share", "ratio", label=f"{d} no reception", summarised=True,
                       doc="share of 200 ms bins between the first and last delivery with nothing delivered "
                           "(seed 003 section 3.3: >= 10 % under undesired Sniff)"),
                Metric(f"{d}_gap_max_s", "s", label=f"{d} longest gap", summarised=True,
                       doc="longest time between two deliveries (a handover's delay, as the app sees it)"),
                Metric(f"{d}_transfer_s", "s", label=f"{d} transfer time", summarised=True,
                       doc="first message sent -> last delivered (a download's duration)"),
                Metric(f"{d}_startup_s", "s", label=f"{d} video start-up",
                       doc=f"{d}, cbr with playout_buffer: first send -> playback starts (measure.playout)"),
                Metric(f"{d}_rebuffers", "count", label=f"{d} stalls", summarised=True,
                       doc=f"{d}, cbr with playout_buffer: rebuffering events after the start (measure.playout)"),
                Metric(f"{d}_rebuffer_s", "s", label=f"{d} stalled",
                       doc=f"{d}, cbr with playout_buffer: total time stalled after the start"),
                Metric(f"{d}_messages", "count", better="none", doc=f"{d}: messages delivered in the run"),
                Metric(f"{d}_bytes", "B", better="none", doc=f"{d}: payload bytes delivered in the run")]
    out += [Metric(f"d{i}_median_s", "s", label=f"d{i}", summarised=i == 2,
                   doc=doc) for i, doc in ((1, "server -> phone kernel"), (2, "phone TCP receive buffer"),
                                           (3, "proxy application buffer"), (4, "phone -> watch app"))]
    out += [Metric("tcpcrypt_encrypted", "count", better="none",
                   doc="tcpcrypt cells: 1 when every connection of the run was encrypted end to end: it ran tcpcrypt, "
                       "closed cleanly, and the server's daemon reports the same session ID"),
            Metric("tcpcrypt_cpu_s", "s", label="tcpcrypt CPU", summarised=True,
                   doc="tcpcrypt cells: CPU time of the client's and the server's tcpcryptd during the run "
                       "(the kernel's accounting: 10 ms ticks in the UML guest, whose HZ is 100)")]
    out += [Metric("d23_median_s", "s", label="d2+d3", doc="phone receive buffer + proxy buffer together"),
            Metric("vq_throttled_share", "ratio", better="none", label="throttled",
                   doc="share of the run the virtual-queue mitigation throttled the phone's downlink")]
    out += energy_metrics(handshake=False)
    return tuple(out)


SERIES = (
    Series("owd", ("stream", "direction", "seq", "t_send_s", "owd_s", "size"),
           "one row per message: send time (s since the run began) and one-way delay"),
    Series("goodput", ("stream", "direction", "t_s", "goodput_bps"), "delivered bytes per 200 ms"),
    Series("delay_split", ("stream", "seq", "t_send_s", "d1_s", "d2_s", "d3_s", "d23_s", "d4_s"),
           "where a server->watch message's delay sat (through a proxying phone)"),
    Series("queues", ("t_s", "node", "socket", "recv_q", "send_q"), "the phone's TCP socket queues (ss)"),
    Series("vq", ("t_s", "vq_bytes", "bw_bps", "q_ub_bytes", "q_lb_bytes", "throttled"),
           "the relay's virtual-queue controller (mitigation: virtual-queue)"),
    ENERGY_SERIES,
)


def _proxying_hops(plan, cells: list[Mapping[str, Any]]) -> set[str]:
    """The cells' first hops that proxy the stream: the workload captures them (its uplink and its
    link to the watch time the delay decomposition)."""
    return {c["path"] for c in cells if plan.proxying(c["path"], c)}


class _Streams(Workload):
    """What the three stream kinds share: agents, a run, its statistics and decomposition."""

    rides_transport = True

    metrics = _stream_metrics()
    series = SERIES
    headline = ("down_owd_median_s", "up_owd_median_s")

    @classmethod
    def endpoints(cls, fields) -> dict[str, str]:
        return {"client": fields.client, "server": fields.server}

    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        return check_nodes(fields, topo, fixed, matrix, where, src)

    @classmethod
    def run_length(cls, cell: dict[str, Any]) -> float | None:
        # A stream sends for `duration` (a bulk stream of `bytes` lasts as long as it takes).
        if cell.get("bytes") not in (None, ""):
            return None
        return float(cell["duration"]) if cell.get("duration") not in (None, "") else None

    # -- what a run sends --------------------------------------------------------------------
    def specs(self, cell: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    @staticmethod
    def port(cell: Mapping[str, Any]) -> int:
        return TCPCRYPT_PORT if cell.get("tcpcrypt") else STREAM_PORT

    @classmethod
    def captured(cls, plan) -> set[str]:
        return _proxying_hops(plan, [c.values for c in plan.cells])

    @classmethod
    def needs(cls, fields, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        f = fields
        out: list[Need] = [Relay(hop, f.server, plan.address_of(f.server), port, timestamps=True)
                           for hop, port in sorted({(c["path"], cls.port(c)) for c in cells})]
        if any(c.get("tcpcrypt") for c in cells):
            out += [Tcpcrypt(f.client, TCPCRYPT_PORT, "outbound"), Tcpcrypt(f.server, TCPCRYPT_PORT, "inbound")]
        return out

    @classmethod
    def features(cls, cells: list[Mapping[str, Any]]) -> set[KernelFeature]:
        out = set()
        if any(c.get("mptcp") for c in cells):
            out.add(KernelFeature.MPTCP)   # `mptcp: true` on a kernel without it: refused before the run
        return out

    @classmethod
    def ports(cls, fields, cells: list[Mapping[str, Any]]) -> dict[str, dict[int, str]]:
        used = {STREAM_PORT: "stream agent"}
        if any(c.get("tcpcrypt") for c in cells):
            used[TCPCRYPT_PORT] = "stream agent (tcpcrypt cells)"
        return {fields.server: used}

    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        f = self.fields
        self.server = StreamAgent(self.ctx.net, f.server, ["serve", "--port", str(STREAM_PORT)])
        self.crypt_server = (StreamAgent(self.ctx.net, f.server, ["serve", "--port", str(TCPCRYPT_PORT)])
                             if any(c.get("tcpcrypt") for c in cells) else None)
        self.client = StreamAgent(self.ctx.net, f.client, [])
        self.dir = self.ctx.out_dir / "streams"
        self.dir.mkdir(parents=True, exist_ok=True)
        for hop in sorted(_proxying_hops(self.ctx.plan, cells)):
            self.ctx.capture(hop, snaplen=128)   # headers are enough for the delay decomposition
        self.energy = RunEnergy(self.ctx.plan, f.client, f.server)
        return {"stream_agent": "wearlab.measure.stream_agent (Python, TCP_NODELAY, app-level delivery times)",
                "stream_port": STREAM_PORT,
                "energy": self.energy.experiment_facts(sorted({c["path"] for c in cells}),
                                                       over_transport=self.ctx.carried_in_any_cell(f.client))}

    def warm_up(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        c = cells[0]
        self.ctx.select_route(self.fields.client, self.fields.server, c["path"])
        spec = self._spec(0, "down", "bulk", 1400, bytes_=14_000, out=self.dir / "warmup.csv")
        res = self.client.run([spec], timeout=self.ctx.timeout_s)
        return {"warm_up": "one 14 kB stream", "ok": all(r.get("ok") for r in res)}

    def _spec(self, stream: int, direction: str, pattern: str, size: int, *, rate=None, interval=None,
              duration=None, bytes_=None, out: Path) -> dict[str, Any]:
        return {"stream": stream, "server": self.ctx.address(self.fields.server), "port": STREAM_PORT,
                "client_role": "recv" if direction == "down" else "send", "direction": direction,
                "pattern": pattern, "rate_bps": rate, "message_size": size, "interval_s": interval,
                "duration_s": duration, "bytes": bytes_, "out": str(out)}

    # -- one run -----------------------------------------------------------------------------
    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        f = self.fields
        self.ctx.select_route(f.client, f.server, cell["path"])
        run_dir = self.dir / f"rep{repetition}-{abs(hash(tuple(sorted(map(str, cell.items()))))) % 10**8}"
        run_dir.mkdir(parents=True, exist_ok=True)
        specs = self.specs({**cell, "_dir": run_dir})
        for spec in specs:
            spec["port"] = self.port(cell)
        crypt = {n: self.ctx.nodes[n].tcpcrypt for n in (f.client, f.server)
                 if cell.get("tcpcrypt") and self.ctx.nodes[n].tcpcrypt is not None}
        account = RunAccount(crypt) if crypt else None
        proxy = self.ctx.nodes.get(cell["path"])
        proxying = self.ctx.plan.proxying(cell["path"], cell)
        sampler = QueueSampler(self.ctx.net, cell["path"], f.server, (self.ctx.address(f.server), self.port(cell)),
                               getattr(proxy, "held_down", None)) if proxying else None
        vq_start = file_size(getattr(proxy, "series_file", None))
        events_start = file_size(getattr(proxy, "events_file", None))
        t0 = self.ctx.run_start_ns or time.time_ns()   # shared with the timeline's log
        if sampler:
            sampler.start()
        self._live = LiveTail(specs, sampler, getattr(proxy, "series_file", None) if proxying else None)
        try:
            results = self.client.run(specs, timeout=_timeout(specs, self.ctx.timeout_s))
        finally:
            self._live = None
            if sampler:
                sampler.stop()
        failed = [r for r in results if not r.get("ok")]
        if failed:
            raise RuntimeError("; ".join(f"stream {r['stream']}: {r.get('error')}" for r in failed))
        row: dict[str, Any] = {}
        series: dict[str, list[dict[str, Any]]] = {"owd": [], "goodput": []}
        flights: list[tuple[int, int]] = []
        if account:
            records = account.records(lambda out: all(len(rs) >= len(specs) for rs in out.values()))
            row["tcpcrypt_cpu_s"] = account.cpu_s()
            mine = records.get(f.client, [])
            theirs = {r.get("session_id"): r for r in records.get(f.server, []) if r.get("session_id")}
            row["tcpcrypt_encrypted"] = int(bool(mine) and all(encrypted(r, theirs.get(r.get("session_id"))) for r in mine))
        for spec, result in zip(specs, results):
            records = read_records(Path(spec["out"]))
            if not records:
                # A reconnecting app says how often it tried: an app that never connected (its
                # SYN lost to a link already down) is told apart from a stream that went silent.
                tries = (f" ({result['connections']} connections in {result['attempts']} attempts"
                         + "".join(f"; {e}" for e in result.get("connect_errors", [])) + ")"
                         if "attempts" in result else "")
                raise RuntimeError(f"stream {spec['stream']} ({spec['direction']}) delivered no message{tries}")
            flights += [(r[1], r[2]) for r in records]
            name = spec.get("role_name", "main")
            series["owd"] += [{"stream": name, "direction": spec["direction"], "seq": r[0],
                               "t_send_s": (r[1] - t0) / 1e9, "owd_s": (r[2] - r[1]) / 1e9, "size": r[3]}
                              for r in records]
            bins = goodput_bins(records, t0, spec)
            series["goodput"] += bins
            row.update(owd_stats(spec["direction"] if name == "main" else "msg", records))
            if name == "main" and bins:
                row[f"{spec['direction']}_stall_share"] = sum(1 for b in bins if b["goodput_bps"] == 0) / len(bins)
            if name == "main" and cell.get("playout_buffer") and _is_cbr(cell):
                row.update(playout(records, float(cell["rate"]), float(cell["playout_buffer"])).row(spec["direction"]))
        if self.ctx.transport(f.client) is not None:
            # The flow rode the multipath transport: each radio's energy from what its path carried.
            erow, erows = self.energy.over_transport(self.ctx.nodes[f.client], t0,
                                                     encrypted=bool(row.get("tcpcrypt_encrypted")))
        else:
            erow, erows = self.energy.activity(cell["path"], flights, encrypted=bool(row.get("tcpcrypt_encrypted")))
        row.update(erow)
        if erows:
            series["energy"] = erows
        if sampler:
            series["queues"] = sampler.samples(t0)
        if proxying:
            split = self._decompose(cell, specs, proxy, t0, events_start)
            if split:
                series["delay_split"] = split["rows"]
                row.update(split["medians"])
            vq = read_vq(getattr(proxy, "series_file", None), vq_start, t0)
            if vq:
                series["vq"] = vq
                row["vq_throttled_share"] = sum(1 for v in vq if v["throttled"]) / len(vq)
        return Outcome(row=row, series=series)

    def _decompose(self, cell, specs, proxy, t0: int, events_start: int) -> dict[str, Any] | None:
        """Where the down stream's delay sat through a proxying phone (module doc): per message,
        its last byte's arrival on the phone's uplink and departure towards the watch (captures
        on the phone, taps before its qdiscs), and for the relay its own read and write."""
        down = next((s for s in specs if s["direction"] == "down" and s.get("role_name", "main") == "main"), None)
        if down is None:
            return None
        records = read_records(Path(down["out"]))
        size = max(20, int(down["message_size"]))
        phone, server_ip = cell["path"], self.ctx.address(self.fields.server)
        uplink = self.ctx.net.sh(phone, f"ip -o route get {server_ip}").split(" dev ")[1].split()[0]
        towards_watch = self.ctx.net.addresses.interface_to(phone, self.fields.client).name
        cap = self.ctx.capture(phone)
        arrivals = cap.stream_offsets(uplink, server_ip, self.port(cell), t0 / 1e9)
        departures = cap.stream_offsets(towards_watch, server_ip, self.port(cell), t0 / 1e9)
        events = read_events(getattr(proxy, "events_file", None), events_start)
        rows, d = [], {k: [] for k in ("d1", "d2", "d3", "d23", "d4")}
        for seq, send_ns, recv_ns, _ in records:
            end = (seq + 1) * size  # the message's last byte, as an offset in the down stream
            t_arr, t_dep = at_offset(arrivals, end), at_offset(departures, end)
            if t_arr is None or t_dep is None:
                continue
            r = {"stream": "main", "seq": seq, "t_send_s": (send_ns - t0) / 1e9, "d1_s": t_arr - send_ns / 1e9,
                 "d23_s": t_dep - t_arr, "d4_s": recv_ns / 1e9 - t_dep}
            t_in, t_out = at_offset(events.get("in", []), end), at_offset(events.get("out", []), end)
            if t_in is not None and t_out is not None:
                r.update(d2_s=t_in - t_arr, d3_s=t_out - t_in)
            rows.append(r)
            for k in d:
                if f"{k}_s" in r:
                    d[k].append(r[f"{k}_s"])
        if not rows:
            return None
        return {"rows": rows, "medians": {f"{k}_median_s": statistics.median(v) for k, v in d.items() if v}}

    @classmethod
    def describe_cell(cls, cell: Mapping[str, Any]) -> str:
        return " ".join(f"{p.name}={p.shown(cell[p.name])}" for p in cls.params if cell.get(p.name) not in (None, ""))

    def live(self) -> dict[str, Any]:
        tail = getattr(self, "_live", None)
        return tail.sample() if tail is not None else {}

    def stop(self) -> None:
        for a in (getattr(self, "client", None), getattr(self, "server", None), getattr(self, "crypt_server", None)):
            if a is not None:
                a.stop()


def _timeout(specs: list[dict[str, Any]], timeout_s: float) -> float:
    longest = max((s.get("duration_s") or 0) for s in specs)
    return longest + timeout_s


def _is_cbr(cell: dict[str, Any]) -> bool:
    return cell.get("pattern") == "cbr"


def _is_bulk(cell: dict[str, Any]) -> bool:
    return cell.get("pattern") == "bulk"


class Stream(_Streams):
    name = "stream"
    Fields = StreamFields
    doc = ("a timestamped stream: cbr (messages at a rate) or bulk (back to back, for a duration or a "
           "number of bytes); one-way delay per message, goodput per 200 ms")
    params = ParamSet((
        Param("pattern", P.choice("pattern", ("cbr", "bulk")), "cbr", "cbr: paced at `rate`; bulk: back to back"),
        Param("rate", P.rate, 1_000_000, "the cbr sender's rate (application bytes)", to_doc=format_rate,
              shown=lambda v: format_rate(int(v)), applies=_is_cbr, applies_doc="pattern is cbr"),
        Param("message_size", P.positive_size, 1000, "bytes per timestamped message (>= 20)", to_doc=format_size,
              shown=lambda v: format_size(int(v))),
        _direction_param(), DURATION,
        Param("bytes", P.positive_size, None, "bulk: stop after this many bytes instead of after duration",
              to_doc=format_size, shown=lambda v: format_size(int(v)), applies=_is_bulk,
              applies_doc="pattern is bulk"),
        Param("playout_buffer", P.positive_duration, None, "cbr as live video: a player that starts once this "
              "much media is buffered and stalls until it is again (start-up delay, stalls, stalled time: "
              "measure.playout); none: no player", to_doc=format_duration,
              shown=lambda v: format_duration(float(v)), applies=_is_cbr, applies_doc="pattern is cbr"),
        PATH,
        Param("reconnect", P.choice("reconnect", tuple(RECONNECT)), "none",
              "a down-stream app's reaction to silence (seed 003 section 6, P4): rtapp reconnects "
              "after 3 s of silence and retries every 5 s; tinycam after 10 s, every 60 s "
              "(ASSUMPTIONS shaped on the paper's handover delays 38.6 s and 70.2 s); none: one connection",
              applies=lambda c: c.get("direction") == "down", applies_doc="direction is down"),
        Param("mptcp", P.flag("mptcp"), False, "Multipath TCP end to end (needs MPTCP in the kernel: the "
              "uml runtime's has it); a wearable's proactive handover moves the flow to a WiFi subflow"),
        TCPCRYPT,
        Param("app", P.choice("app", (apps.NONE, *apps.BY_NAME)), apps.NONE,
              "one of seed 003's four app workloads, filling in the stream's pattern, rate, message size, "
              "bytes, duration, playout buffer and direction (workloads.apps: " + "; ".join(
                  f"{a.name}: {a.doc}" for a in apps.APPS) + "); none: the parameters as written"),
        Param("app_scale", apps.scale, 1.0, "an app's sizes and durations times this (0 < scale <= 1; 1: the "
              "paper's)", applies=lambda c: (c.get("app") or apps.NONE) != apps.NONE, applies_doc="app is set"),
    ))

    @classmethod
    def expand_cell(cls, cell: dict[str, Any]) -> dict[str, Any]:
        return apps.expand(cell)

    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems = super().check(fields, fixed, matrix, where, topo, src)
        uses_app = any(a != apps.NONE for a in matrix.get("app", [fixed.get("app", apps.NONE)]))
        if not uses_app:
            return problems
        for name in apps.SETS:
            written = [at for (k, _), at in where.items() if k == name]
            for at in written[:1]:
                problems.append(Problem(src.file, src.line(at), dotted(at),
                                        f"'{name}' is set by app: (workloads.apps); remove it here, or scale "
                                        "the app with app_scale"))
        return problems

    def specs(self, cell: dict[str, Any]) -> list[dict[str, Any]]:
        dirs = DIRECTIONS if cell["direction"] == "both" else (cell["direction"],)
        by_bytes = cell.get("bytes") not in (None, "")
        specs = [self._spec(i, d, cell["pattern"], cell["message_size"], rate=cell.get("rate") or None,
                            duration=None if by_bytes else cell["duration"], bytes_=cell["bytes"] if by_bytes else None,
                            out=cell["_dir"] / f"{d}.csv") for i, d in enumerate(dirs)]
        app = RECONNECT.get(cell.get("reconnect") or "none")
        for spec in specs:
            if app is not None:
                spec["reconnect"] = {"silence_s": app[0], "retry_s": app[1]}
            spec["mptcp"] = bool(cell.get("mptcp"))
        return specs


def _messages_metrics() -> tuple[Metric, ...]:
    return (*_stream_metrics(),
            Metric("msg_owd_median_s", "s", label="message OWD", summarised=True,
                   doc="median delivery time of the small messages"),
            Metric("msg_owd_p95_s", "s", label="message OWD p95", summarised=True,
                   doc="95th percentile of the messages' one-way delays (send -> whole message delivered)"),
            Metric("msg_owd_max_s", "s", label="message OWD max", doc="the largest message one-way delay"),
            Metric("msg_messages", "count", better="none", doc="messages delivered in the run"))


class Messages(_Streams):
    name = "messages"
    Fields = MessagesFields
    doc = "small messages at an interval beside a bulk or CBR stream (seed 003's Telegram case)"
    metrics = _messages_metrics()
    headline = ("msg_owd_median_s",)
    params = ParamSet((
        Param("interval", P.positive_duration, 1.0, "time between messages", to_doc=format_duration,
              shown=lambda v: format_duration(float(v))),
        Param("message_size", P.positive_size, 200, "bytes per message (>= 20)", to_doc=format_size,
              shown=lambda v: format_size(int(v))),
        Param("background", P.choice("background", ("bulk", "cbr", "none")), "bulk",
              "the stream beside the messages, same direction"),
        Param("background_rate", P.rate, 1_500_000, "rate of a cbr background", to_doc=format_rate,
              applies=lambda c: c.get("background") == "cbr", applies_doc="background is cbr",
              shown=lambda v: format_rate(int(v))),
        Param("direction", P.choice("direction", ("down", "up")), "down", "down: server -> client; or up"),
        DURATION, PATH, TCPCRYPT,
    ))

    def specs(self, cell: dict[str, Any]) -> list[dict[str, Any]]:
        d = cell["direction"]
        msg = self._spec(0, d, "messages", cell["message_size"], interval=cell["interval"],
                         duration=cell["duration"], out=cell["_dir"] / "messages.csv")
        msg["role_name"] = "msg"
        out = [msg]
        if cell["background"] == "bulk":
            out.append(self._spec(1, d, "bulk", 16_000, duration=cell["duration"], out=cell["_dir"] / f"{d}.csv"))
        elif cell["background"] == "cbr":
            out.append(self._spec(1, d, "cbr", 1000, rate=cell["background_rate"], duration=cell["duration"],
                                  out=cell["_dir"] / f"{d}.csv"))
        return out


# ---------------------------------------------------------------------------------------------
# helpers
