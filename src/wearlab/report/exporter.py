"""Prometheus metrics of running experiments (`wearlab exporter`).

The runner sits wherever the network lives - the host, a UML guest with no network to the host,
the Compose stack's testbed - so it does not serve HTTP itself: it writes `control/live.json` into
its results directory (which every runtime shares with the host) every half second, and this
collector, run on the host, turns the live runs it finds there into metrics on each scrape.
prometheus_client does the exposition; names follow Prometheus conventions (base units,
`_total` for counters, `_seconds`, `_bytes`), labels say experiment, link, direction, stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from wearlab.model import units
from wearlab.run import control

RADIO_STATES = ("active", "sniff", "waking")


def _num(value: Any, parse) -> float | None:
    if value in (None, "", "-"):
        return None
    try:
        return float(parse(value))
    except (TypeError, ValueError):
        return None


class LiveRuns(Collector):
    """Metrics of every live run under a results directory."""

    def __init__(self, results: Path):
        self.results = results

    def docs(self) -> list[dict[str, Any]]:
        out = []
        for c in control.live_runs(self.results):
            doc = control.read_live(c.parent)
            if doc and not doc.get("error"):
                out.append(doc)
        return out

    def collect(self):
        docs = self.docs()
        exp = ["experiment"]
        up = GaugeMetricFamily("wearlab_experiment_running", "1 for each experiment running now", labels=exp)
        done = GaugeMetricFamily("wearlab_runs_done", "runs finished so far", labels=exp)
        total = GaugeMetricFamily("wearlab_runs", "runs the experiment has in all", labels=exp)
        failed = GaugeMetricFamily("wearlab_runs_failed", "runs that failed so far", labels=exp)
        current = GaugeMetricFamily("wearlab_run_info", "the run in progress (value: its number)",
                                    labels=[*exp, "cell"])
        run_s = GaugeMetricFamily("wearlab_run_elapsed_seconds", "time since the run in progress began", labels=exp)
        lk = [*exp, "link", "direction"]
        rate = GaugeMetricFamily("wearlab_link_rate_bits_per_second", "configured rate (0: unlimited)", labels=lk)
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
        goodput = GaugeMetricFamily("wearlab_stream_goodput_bits_per_second", "delivered over the last second",
                                    labels=st)
        hist = HistogramMetricFamily("wearlab_stream_owd_histogram_seconds", "one-way delay of the run's messages",
                                     labels=st)
        delivered = CounterMetricFamily("wearlab_stream_delivered_bytes", "message bytes delivered in the run",
                                        labels=st)
        queue = GaugeMetricFamily("wearlab_proxy_socket_queue_bytes", "the phone's TCP socket queues",
                                  labels=[*exp, "queue"])
        radio = GaugeMetricFamily("wearlab_radio_state", "1 for the BT radio's current state", labels=[*exp, "node", "state"])
        for d in docs:
            e = str(d.get("experiment", "?"))
            up.add_metric([e], 1)
            p = d.get("progress") or {}
            if "total" in p:
                total.add_metric([e], p["total"])
                done.add_metric([e], p.get("done", 0))
                failed.add_metric([e], p.get("failed", 0))
            if "run" in p:
                current.add_metric([e, str(p.get("cell", ""))], p["run"])
            if d.get("run_s") is not None:
                run_s.add_metric([e], d["run_s"])
            for direction, s in (d.get("links") or {}).items():
                link = "-".join(sorted(direction.split("->")))
                labels = [e, link, direction]
                rate.add_metric(labels, _num(s.get("rate"), units.parse_rate) or 0)
                delay.add_metric(labels, _num(s.get("delay"), units.parse_duration) or 0)
                lp = s.get("loss")
                loss.add_metric(labels, (_num(lp, units.parse_percent) or 0) / 100 if isinstance(lp, str) else 0)
                down.add_metric(labels, 1 if s.get("down") else 0)
            for direction, c in (d.get("link_counters") or {}).items():
                labels = [e, "-".join(sorted(direction.split("->"))), direction]
                sent_b.add_metric(labels, c.get("bytes", 0))
                sent_p.add_metric(labels, c.get("packets", 0))
                drops.add_metric(labels, c.get("drops", 0))
                backlog.add_metric(labels, c.get("backlog_bytes", 0))
            ch = d.get("changes") or {}
            for c in ch.get("changes", []):
                changes.add_metric([e, c["link"], c["source"]], c["count"])
            for link, t_ns in (ch.get("last_change_ns") or {}).items():
                last_change.add_metric([e, link], t_ns / 1e9)
            for name, v in (d.get("workload") or {}).items():
                if name == "phone queues":
                    queue.add_metric([e, "receive"], v.get("recv_q", 0))
                    queue.add_metric([e, "send"], v.get("send_q", 0))
                    continue
                labels = [e, name]
                for fam, key in ((owd, "owd_s"), (owd_max, "owd_max_s"), (goodput, "goodput_bps")):
                    if v.get(key) is not None:
                        fam.add_metric(labels, v[key])
                h = v.get("owd_hist")
                if h:
                    buckets = [(repr(le), n) for le, n in zip(h["le"], h["counts"])] + [("+Inf", h["count"])]
                    hist.add_metric(labels, buckets, h["sum"])
                    delivered.add_metric(labels, h.get("bytes", 0))
            for node, state in (d.get("nodes") or {}).items():
                if state and "radio" in state:
                    for s_ in RADIO_STATES:
                        radio.add_metric([e, node, s_], 1 if state["radio"] == s_ else 0)
        yield from (up, done, total, failed, current, run_s, rate, delay, loss, down, sent_b, sent_p, drops, backlog,
                    changes, last_change, owd, owd_max, goodput, hist, delivered, queue, radio)


def registry(results: Path):
    from prometheus_client import CollectorRegistry
    reg = CollectorRegistry()
    reg.register(LiveRuns(results))
    return reg


def serve(results: Path, host: str, port: int):
    """Serve /metrics in a background thread; returns (server, thread)."""
    from prometheus_client import start_http_server
    return start_http_server(port, addr=host, registry=registry(results))
