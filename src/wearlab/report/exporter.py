"""Prometheus metrics of running experiments (`wearlab exporter`).

The runner sits wherever the network lives - the host, a UML guest with no network to the host,
the Compose stack's testbed - so it does not serve HTTP itself: it writes its live record
(report.livedoc) into its results directory (which every runtime shares with the host) every half
second, and this collector, run on the host, turns the live runs it finds there into metrics on
each scrape. prometheus_client does the exposition; labels say experiment, link, direction,
stream, cell.

Names pass `promtool check metrics`: values in base units with the unit as the name's suffix
(`_seconds`, `_bytes`, `_bytes_per_second`: a rate in bit/s is exported /8), counters end in
`_total`, the `_info` gauge is 1 with its facts as labels. The per-run values of a run's row are
one histogram per declared metric, named `wearlab_run_<metric in base units>` by the unit table
(model.quantities: `wire_connect_s` -> `wearlab_run_wire_connect_seconds`, `bytes_up_total` (B) ->
`wearlab_run_bytes_up_total_bytes`, `down_goodput_bps` -> `wearlab_run_down_goodput_bytes_per_second`,
`http_code` (count) -> `wearlab_run_http_code`), labelled by cell, over the runs that succeeded.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from wearlab.model import quantities
from wearlab.model.choices import RadioState
from wearlab.model.media import Medium
from wearlab.report.live_record import DELAY_PARTS, LiveDoc, live_runs, read_record

BIT_RATE = quantities.UNITS["bit/s"]
RUN_PREFIX = "wearlab_run_"
# The exporter's own families about the run in progress: no per-run histogram may take their names.
RUN_INFO, RUN_NUMBER, RUN_ELAPSED = "wearlab_run_info", "wearlab_run_number", "wearlab_run_elapsed_seconds"


def run_family(metric: str, unit: str) -> str | None:
    """The histogram a declared metric's per-run values go to; None when its unit is not one this
    wearlab knows (results of another version) or its name would be one of the exporter's own."""
    if unit not in quantities.UNITS:
        return None
    try:
        name = RUN_PREFIX + quantities.UNITS[unit].prometheus_name(metric)
    except ValueError:      # declared by a wearlab that did not check names
        return None
    return None if name in (RUN_INFO, RUN_NUMBER, RUN_ELAPSED) else name


def _value(text: str | None) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


class LiveRuns(Collector):
    """Metrics of every live run under a results directory."""

    def __init__(self, results: Path):
        self.results = results

    def docs(self) -> list[LiveDoc]:
        return [doc for doc in map(read_record, live_runs(self.results)) if not doc.error]

    @staticmethod
    def run_rows(d: Path) -> tuple[list[str], dict[str, Any], list[dict[str, str]]]:
        """(parameter columns, metric declarations, finished rows) of a results directory."""
        try:
            cols = json.loads((d / "metadata.json").read_text())["columns"]
            with (d / "runs.csv").open(newline="") as f:
                return cols["params"], cols["metrics"], list(csv.DictReader(f))
        except (OSError, ValueError, KeyError):
            return [], {}, []

    def per_run(self, docs: list[LiveDoc]) -> list[HistogramMetricFamily]:
        """One histogram per declared metric of the live runs (present from the first scrape, before
        any row), the values of the runs that succeeded, per experiment and cell, in base units."""
        families: dict[str, HistogramMetricFamily] = {}
        for d in docs:
            params, declared, rows = self.run_rows(Path(d.results_dir))
            for metric, decl in declared.items():
                unit = decl.get("unit", "")
                name = run_family(metric, unit)
                if name is None:
                    continue
                u = quantities.UNITS[unit]
                if name not in families:
                    families[name] = HistogramMetricFamily(
                        name, f"{decl.get('label') or metric}: {metric} ({unit}) of each run that succeeded, "
                        f"in {u.base or 'its unit'}, by cell", labels=["experiment", "cell"])
                by_cell: dict[str, list[float]] = {}
                for r in rows:
                    v = _value(r.get(metric)) if r.get("status") == "ok" else None
                    if v is not None:
                        cell = " ".join(f"{p}={r[p]}" for p in params if r.get(p) not in (None, ""))
                        by_cell.setdefault(cell, []).append(u.to_prometheus(v))
                for cell, values in by_cell.items():
                    buckets = [(repr(le), sum(1 for v in values if v <= le)) for le in u.buckets]
                    families[name].add_metric([d.experiment, cell], [*buckets, ("+Inf", len(values))], sum(values))
        return [families[n] for n in sorted(families)]

    def collect(self):
        docs = self.docs()
        exp = ["experiment"]
        up = GaugeMetricFamily("wearlab_experiment_running", "1 for each experiment running now", labels=exp)
        done = CounterMetricFamily("wearlab_runs_done", "runs finished so far", labels=exp)
        total = GaugeMetricFamily("wearlab_runs", "runs the experiment has in all", labels=exp)
        failed = CounterMetricFamily("wearlab_runs_failed", "runs that failed so far", labels=exp)
        info = GaugeMetricFamily(RUN_INFO, "1 for the run in progress, its cell as a label", labels=[*exp, "cell"])
        number = GaugeMetricFamily(RUN_NUMBER, "the number of the run in progress (1, 2, ...)", labels=exp)
        run_s = GaugeMetricFamily(RUN_ELAPSED, "time since the run in progress began", labels=exp)
        lk = [*exp, "link", "direction"]
        rate = GaugeMetricFamily("wearlab_link_rate_bytes_per_second", "configured rate (0: unlimited)", labels=lk)
        delay = GaugeMetricFamily("wearlab_link_delay_seconds", "configured one-way delay", labels=lk)
        loss = GaugeMetricFamily("wearlab_link_loss_ratio", "configured random loss (0..1)", labels=lk)
        down = GaugeMetricFamily("wearlab_link_down", "1 while the direction carries nothing", labels=lk)
        sent_b = CounterMetricFamily("wearlab_link_sent_bytes", "bytes the direction's qdisc sent", labels=lk)
        sent_p = CounterMetricFamily("wearlab_link_sent_packets", "packets the direction's qdisc sent", labels=lk)
        drops = CounterMetricFamily("wearlab_link_dropped_packets", "packets the direction's qdisc dropped", labels=lk)
        backlog = GaugeMetricFamily("wearlab_link_backlog_bytes", "bytes waiting in the direction's qdisc", labels=lk)
        changes = CounterMetricFamily("wearlab_link_changes", "link changes applied (timeline, live, handover)",
                                      labels=[*exp, "link", "source"])
        last_change = GaugeMetricFamily("wearlab_link_last_change_timestamp_seconds",
                                        "when the link last changed (Grafana annotations: changes() of it)",
                                        labels=[*exp, "link"])
        st = [*exp, "stream"]
        owd = GaugeMetricFamily("wearlab_stream_owd_seconds", "median one-way delay over the last second", labels=st)
        owd_max = GaugeMetricFamily("wearlab_stream_owd_max_seconds", "largest one-way delay in the last second",
                                    labels=st)
        goodput = GaugeMetricFamily("wearlab_stream_goodput_bytes_per_second", "delivered over the last second",
                                    labels=st)
        messages = HistogramMetricFamily("wearlab_stream_message_owd_seconds",
                                         "one-way delay of each message of the run in progress", labels=st)
        delivered = CounterMetricFamily("wearlab_stream_delivered_bytes", "message bytes delivered in the run",
                                        labels=st)
        queue = GaugeMetricFamily("wearlab_proxy_socket_queue_bytes", "the phone's TCP socket queues",
                                  labels=[*exp, "queue"])
        part = [*exp, "part", "where"]
        backlog_b = GaugeMetricFamily("wearlab_proxy_backlog_bytes", "a proxied download's bytes waiting in each "
                                      "part of the path now (d1-d4, measure.queues)", labels=part)
        backlog_s = GaugeMetricFamily("wearlab_proxy_backlog_delay_seconds", "the delay each part adds now: its "
                                      "bytes over the rate the watch receives (Little's law)", labels=part)
        vq = GaugeMetricFamily("wearlab_proxy_virtual_queue_bytes", "the relay's virtual queue (mitigation)", labels=exp)
        vq_bw = GaugeMetricFamily("wearlab_proxy_bt_rate_estimate_bytes_per_second", "the relay's BT rate estimate",
                                  labels=exp)
        throttled = GaugeMetricFamily("wearlab_proxy_throttled", "1 while the relay throttles server->phone",
                                      labels=exp)
        radio = GaugeMetricFamily("wearlab_radio_state", "1 for the BT radio's current state", labels=[*exp, "node", "state"])
        nd = [*exp, "node"]
        active = GaugeMetricFamily("wearlab_interface_active", "1 for the interface a wearable's policy uses now",
                                   labels=[*nd, "interface"])
        switches = CounterMetricFamily("wearlab_interface_switches", "the policy's switches in the run in progress",
                                       labels=nd)
        waiting = GaugeMetricFamily("wearlab_interface_backlog_bytes", "bytes waiting to cross BT as the policy read "
                                    "them last (side: phone for a download, watch for an upload)", labels=[*nd, "side"])
        wifi = GaugeMetricFamily("wearlab_interface_wifi_bytes_per_second", "the wearable's WiFi throughput as the "
                                 "policy read it last (its trailing window)", labels=nd)
        carried = CounterMetricFamily("wearlab_multipath_bytes", "chunk payload over each path of a wearable's "
                                      "multipath transport, as its agent counts it (down: received, up: sent)",
                                      labels=[*nd, "path", "direction"])
        for d in docs:
            e = d.experiment
            up.add_metric([e], 1)
            p = d.progress
            if p.total is not None:
                total.add_metric([e], p.total)
                done.add_metric([e], p.done)
                failed.add_metric([e], p.failed)
            if p.run is not None:
                info.add_metric([e, p.cell or ""], 1)
                number.add_metric([e], p.run)
            if d.run_s is not None:
                run_s.add_metric([e], d.run_s)
            for ld in d.links:
                labels = [e, ld.link, ld.direction]
                shape = ld.shape
                rate.add_metric(labels, BIT_RATE.to_prometheus(shape.rate_bps or 0))
                delay.add_metric(labels, shape.delay_s)
                # Gilbert-Elliott loss has no single probability: 0 as before.
                loss.add_metric(labels, shape.loss.p / 100 if shape.loss is not None and shape.loss.model == "random"
                                else 0)
                down.add_metric(labels, 1 if ld.down else 0)
                if ld.counters is not None:
                    sent_b.add_metric(labels, ld.counters.bytes)
                    sent_p.add_metric(labels, ld.counters.packets)
                    drops.add_metric(labels, ld.counters.drops)
                    backlog.add_metric(labels, ld.counters.backlog_bytes)
            for c in d.changes.changes:
                changes.add_metric([e, c.link, c.source], c.count)
            for link, t_ns in d.changes.last_change_ns.items():
                last_change.add_metric([e, link], t_ns / 1e9)
            w = d.workload
            if w.phone_queues is not None:
                queue.add_metric([e, "receive"], w.phone_queues.receive_bytes)
                queue.add_metric([e, "send"], w.phone_queues.send_bytes)
            if w.delay_split is not None:
                for p_, where in DELAY_PARTS.items():
                    b, sec = getattr(w.delay_split, f"{p_}_bytes"), getattr(w.delay_split, f"{p_}_s")
                    if b is not None:
                        backlog_b.add_metric([e, p_, where], b)
                    if sec is not None:
                        backlog_s.add_metric([e, p_, where], sec)
            if w.virtual_queue is not None:
                vq.add_metric([e], w.virtual_queue.queue_bytes)
                vq_bw.add_metric([e], BIT_RATE.to_prometheus(w.virtual_queue.bt_rate_bps))
                throttled.add_metric([e], 1 if w.virtual_queue.throttled else 0)
            for s in w.streams:
                labels = [e, s.key]
                if s.owd_s is not None:
                    owd.add_metric(labels, s.owd_s)
                if s.owd_max_s is not None:
                    owd_max.add_metric(labels, s.owd_max_s)
                goodput.add_metric(labels, BIT_RATE.to_prometheus(s.goodput_bps))
                h = s.owd_hist
                messages.add_metric(labels, [(repr(le), n) for le, n in zip(h.le, h.counts)] + [("+Inf", h.count)],
                                    h.sum)
                delivered.add_metric(labels, h.bytes)
            for node, state in d.nodes.items():
                if state.radio is not None:
                    for s_ in RadioState:
                        radio.add_metric([e, node, s_.value], 1 if state.radio == s_ else 0)
                i = state.interface
                if i is not None:
                    for medium in sorted({Medium.BT.value, Medium.WIFI.value, i.active}):   # a policy's two paths
                        active.add_metric([e, node, medium], 1 if i.active == medium else 0)
                    switches.add_metric([e, node], i.switches)
                    if i.backlog_bytes is not None:
                        waiting.add_metric([e, node, i.backlog_side or ""], i.backlog_bytes)
                    if i.wifi_bps is not None:
                        wifi.add_metric([e, node], BIT_RATE.to_prometheus(i.wifi_bps))
                if state.multipath is not None:
                    for path in state.multipath.paths:
                        carried.add_metric([e, node, path.name, "down"], path.bytes_received)
                        carried.add_metric([e, node, path.name, "up"], path.bytes_sent)
        yield from (up, done, total, failed, info, number, run_s, rate, delay, loss, down, sent_b, sent_p, drops,
                    backlog, changes, last_change, owd, owd_max, goodput, messages, delivered, queue, backlog_b,
                    backlog_s, vq, vq_bw,
                    throttled, radio, active, switches, waiting, wifi, carried)
        yield from self.per_run(docs)


def registry(results: Path):
    from prometheus_client import CollectorRegistry
    reg = CollectorRegistry()
    reg.register(LiveRuns(results))
    return reg


def serve(results: Path, host: str, port: int):
    """Serve /metrics in a background thread; returns (server, thread)."""
    from prometheus_client import start_http_server
    return start_http_server(port, addr=host, registry=registry(results))
