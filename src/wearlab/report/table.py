"""The end-of-experiment table on the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from wearlab.model.units import format_size
from wearlab.report.summary import Cell


def _fmt_s(q) -> str:
    q1, med, q3 = q
    return f"{med * 1000:.1f} ms [{(q3 - q1) * 1000:.1f}]" if med < 10 else f"{med:.2f} s [{q3 - q1:.2f}]"


def _param(name: str, value) -> str:
    if value in ("", None):
        return "–"
    if name == "size":
        return format_size(int(value))
    return str(value)


def _fmt_b(q) -> str:
    return f"{q[1]:,.0f}"


def print_summary(console: Console, title: str, cells: list[Cell], ratios: list[dict],
                  varied: list[str]) -> None:
    t = Table(title=f"{title}: median [IQR] per cell", title_justify="left")
    for p in varied:
        t.add_column(p)
    t.add_column("ok/n", justify="right")
    cols = [("wire_connect_s", "connect", _fmt_s), ("wire_tls_handshake_s", "TLS hs", _fmt_s),
            ("wire_total_s", "total", _fmt_s), ("bytes_down_total", "bytes down", _fmt_b),
            ("bytes_up_total", "bytes up", _fmt_b)]
    for _, label, _f in cols:
        t.add_column(label, justify="right")
    for c in cells:
        row = [_param(p, c.params.get(p, "")) for p in varied] + [f"{c.ok}/{c.ok + c.failed}"]
        row += [f(c.stats[m]) if m in c.stats else "–" for m, _l, f in cols]
        t.add_row(*row)
    console.print(t)
    if ratios:
        r = Table(title="HTTPS / HTTP (ratio of medians)", title_justify="left")
        keys = [p for p in varied if p != "protocol"]
        for p in keys:
            r.add_column(p)
        r.add_column("total time", justify="right")
        r.add_column("bytes (up+down)", justify="right")
        for x in ratios:
            r.add_row(*[_param(p, x["params"].get(p, "")) for p in keys],
                      f"{x['wire_total_s']:.3f}" if "wire_total_s" in x else "–",
                      f"{x['bytes_total']:.4f}" if "bytes_total" in x else "–")
        console.print(r)
