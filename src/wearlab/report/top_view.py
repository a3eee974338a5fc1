"""The live view's frame (`wearlab top`): what a projector shows during a demo, drawn from the
running experiment's live record (report.livedoc; rich, no Grafana needed)."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from wearlab.model.choices import RadioState
from wearlab.report.live_record import DELAY_PARTS, DelaySplit, LiveDoc, MultipathState, NodeState

BARS = "▁▂▃▄▅▆▇█"
SHARE_BAR = 20               # characters of a part's share of the delay
SPLIT_BAR = 10               # characters of a path's share of the multipath split (an 80-column terminal)


def sparkline(values: list[float], width: int = 60) -> str:
    """The last `width` values as block characters, scaled to their own maximum."""
    vs = [v for v in values[-width:] if v is not None]
    if not vs:
        return ""
    top = max(vs) or 1.0
    return "".join(BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1)))] for v in vs)


def _s(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def render(doc: LiveDoc):
    if doc.error:
        return Panel(Text(f"live view: {doc.error}", style="red"))
    title = (f"{doc.experiment}  -  held for {doc.run_s:.1f} s" if doc.held
             else f"{doc.experiment}  -  run at {doc.run_s:.1f} s") if doc.run_s is not None \
        else f"{doc.experiment}  -  between runs"
    streams = Table(title="streams (last second)", expand=True)
    for col in ("stream", "OWD median", "OWD max", "goodput", "messages"):
        streams.add_column(col)
    extra = []
    lines = []
    for st in doc.workload.streams:
        peak = max(st.owd_30s or [0])
        streams.add_row(st.key, _s(st.owd_s), _s(st.owd_max_s), f"{st.goodput_bps / 1e6:.2f} Mbit/s", str(st.messages))
        lines.append(Text(f"{st.key} OWD, last 30 s (peak {_s(peak)}): {sparkline(st.owd_30s)}"))
    split = doc.workload.delay_split
    q = doc.workload.phone_queues
    if split is not None:
        extra.append(_split_table(split))
    elif q is not None:
        extra.append(Text(f"phone socket queues: receive {q.receive_bytes:,} B, send {q.send_bytes:,} B"))
    vq = doc.workload.virtual_queue
    if vq is not None:
        extra.append(Text(f"virtual queue {vq.queue_bytes / 1000:,.0f} kB, BT estimate {vq.bt_rate_bps / 1e6:.2f} Mbit/s"
                          + (", THROTTLED" if vq.throttled else ""), style="bold" if vq.throttled else ""))
    nodes = Table(title="nodes", expand=True)
    nodes.add_column("node")
    nodes.add_column("state")
    for n, state in doc.nodes.items():
        if state:
            style = "bold red" if state.radio in (RadioState.SNIFF, RadioState.WAKING) else ""
            nodes.add_row(n, Text(", ".join(_node_state(state)), style=style))
            if state.multipath is not None:
                extra.append(_multipath_table(n, state.multipath))
    links = Table(title="links (wearlab link set ... changes them)", expand=True)
    for col in ("direction", "rate", "delay", "loss", "down"):
        links.add_column(col)
    for ld in doc.links:
        shown = ld.shape.to_document()
        links.add_row(ld.direction, str(shown.get("rate", "-")), str(shown.get("delay", "")), str(shown.get("loss", "-")),
                      Text("DOWN", style="bold red") if ld.down else "")
    # A table with no rows says nothing: no streams (an HTTP workload, a deployment), no table.
    shown = [streams, *lines] if doc.workload.streams else []
    return Panel(Group(*shown, *extra, nodes, links), title=title, subtitle=doc.results_dir or "")


def _split_table(split: DelaySplit) -> Table:
    """Seed 003 Fig. 10, live: each part's backlog and the delay it adds (bytes / delivery rate)."""
    rate = f"{split.drain_bytes_per_s * 8 / 1e6:.2f} Mbit/s" if split.drain_bytes_per_s else "-"
    t = Table(title=f"where the delay sits (queued bytes / the watch's {rate})", expand=True)
    for col in ("part", "queued", "delay", "share"):
        t.add_column(col)
    secs = [getattr(split, f"{p}_s") for p in DELAY_PARTS]
    total = sum(v for v in secs if v) or None
    for (p, where), sec in zip(DELAY_PARTS.items(), secs):
        b = getattr(split, f"{p}_bytes")
        share = sec / total if total and sec is not None else None
        bar = "█" * round(share * SHARE_BAR) if share is not None else ""
        t.add_row(f"{p} {where}", "-" if b is None else f"{b / 1000:,.0f} kB", _s(sec),
                  f"{bar} {share:.0%}" if share is not None else "-", style="bold" if share and share >= 0.5 else "")
    return t


def _multipath_table(node: str, mp: MultipathState) -> Table | Text:
    """The split, live, per direction that carries anything: to the watch (what arrived over each
    path: the server agents' schedulers) and from it (what the watch's scheduler put on each);
    per path what moved in the last record's interval, and since the agent started. A line when
    nothing has moved yet (a deployment before its first connection)."""
    if not any(p.bytes_received or p.bytes_sent for p in mp.paths):
        return Text(f"{node}'s multipath ({mp.scheduler}): nothing carried yet")
    t = Table(title=f"{node}'s multipath ({mp.scheduler}): the split (down: as it arrived; up: as the watch sent)",
              expand=True)
    for col in ("path", "now", "share now", "in all", "share in all", "srtt"):
        t.add_column(col)
    for direction, rate_of, bytes_of in (("down", lambda p: p.rate_in_bps, lambda p: p.bytes_received),
                                         ("up", lambda p: p.rate_bps, lambda p: p.bytes_sent)):
        now, total = sum(map(rate_of, mp.paths)), sum(map(bytes_of, mp.paths))
        if not total:
            continue
        for p in mp.paths:
            share = rate_of(p) / now if now else None
            t.add_row(f"{p.name} {direction}", f"{rate_of(p) / 1e6:.2f} Mbit/s",
                      f"{'█' * round(share * SPLIT_BAR)} {share:.0%}" if share is not None else "-",
                      f"{bytes_of(p) / 1000:,.0f} kB", f"{bytes_of(p) / total:.0%}", _s(p.srtt_s))
    return t


def _node_state(state: NodeState) -> list[str]:
    out = []
    if state.radio is not None:
        out.append(f"radio: {state.radio}")
    if state.handover is not None:
        h = state.handover
        out.append(f"handover: {h.last_event} ({h.at_s:.1f} s)" if h.last_event and h.at_s is not None
                   else f"handover: {h.mode}")
    if state.interface is not None:
        i = state.interface
        since = f" since {i.since_s:.1f} s" if i.since_s is not None else ""
        out.append(f"interface: {i.active.upper()}{since} ({i.policy}, {i.switches} switches)")
        if i.backlog_bytes is not None:   # the selector's inputs, beside the policy's thresholds
            limit = f" (B {i.backlog_limit / 1000:g} kB)" if i.backlog_limit is not None else ""
            low = f" (low <= {i.wifi_low_bps / 1e6:g})" if i.wifi_low_bps is not None else ""
            out.append(f"waiting to cross BT: {i.backlog_bytes / 1000:.1f} kB at the {i.backlog_side}{limit}, "
                       f"WiFi {i.wifi_bps / 1e6:.2f} Mbit/s{low}")
    if state.multipath is not None and state.interface is None:   # a policy's transport: its interface says it
        out.append(f"multipath: {state.multipath.scheduler}")
    return out
