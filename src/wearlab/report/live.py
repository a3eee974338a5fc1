"""The live view's frame (`wearlab top`): what a projector shows during a demo, drawn from the
running experiment's control/live.json (rich, no Grafana needed)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

BARS = "▁▂▃▄▅▆▇█"


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


def render(doc: dict[str, Any]):
    if doc.get("error"):
        return Panel(Text(f"live view: {doc['error']}", style="red"))
    title = f"{doc.get('experiment', '?')}  -  run at {doc['run_s']:.1f} s" if doc.get("run_s") is not None \
        else f"{doc.get('experiment', '?')}  -  between runs"
    streams = Table(title="streams (last second)", expand=True)
    for col in ("stream", "OWD median", "OWD max", "goodput", "messages"):
        streams.add_column(col)
    extra = []
    lines = []
    for name, v in (doc.get("workload") or {}).items():
        if name == "phone queues":
            extra.append(Text(f"phone socket queues: receive {v['recv_q']:,} B, send {v['send_q']:,} B"))
            continue
        if name == "virtual queue":
            extra.append(Text(f"virtual queue {v['vq_bytes'] / 1000:,.0f} kB, BT estimate {v['bw_bps'] / 1e6:.2f} Mbit/s"
                              + (", THROTTLED" if v["throttled"] else ""), style="bold" if v["throttled"] else ""))
            continue
        peak = max(v.get("owd_30s") or [0])
        streams.add_row(name, _s(v.get("owd_s")), _s(v.get("owd_max_s")), f"{v.get('goodput_bps', 0) / 1e6:.2f} Mbit/s",
                        str(v.get("messages", 0)))
        lines.append(Text(f"{name} OWD, last 30 s (peak {_s(peak)}): {sparkline(v.get('owd_30s') or [])}"))
    nodes = Table(title="nodes", expand=True)
    nodes.add_column("node")
    nodes.add_column("state")
    for n, state in (doc.get("nodes") or {}).items():
        if state:
            style = "bold red" if state.get("radio") in ("sniff", "waking") else ""
            nodes.add_row(n, Text(", ".join(f"{k}: {v}" for k, v in state.items()), style=style))
    links = Table(title="links (wearlab link set ... changes them)", expand=True)
    for col in ("direction", "rate", "delay", "loss", "down"):
        links.add_column(col)
    for d, s in (doc.get("links") or {}).items():
        links.add_row(d, str(s.get("rate", "-")), str(s.get("delay", "")), str(s.get("loss", "-")),
                      Text("DOWN", style="bold red") if s.get("down") else "")
    return Panel(Group(streams, *lines, *extra, nodes, links), title=title, subtitle=doc.get("run", ""))
