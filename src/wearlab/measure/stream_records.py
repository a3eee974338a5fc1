"""What the stream agents and the phone's relay write during a run, read back: per-message
records (seq, send ns, receive ns, size) and their statistics (one-way delay, goodput per bin,
gaps), the relay's read/write events (the delay decomposition's d2/d3), the virtual queue's
series, and the live tail of the records while they grow (LiveTail: for `wearlab top` and the
exporter)."""

from __future__ import annotations

import bisect
import csv
import statistics
import time
from pathlib import Path
from typing import Any

GOODPUT_BIN_S = 0.2
DIRECTIONS = ("down", "up")


def read_records(path: Path) -> list[tuple[int, int, int, int]]:
    if not path.exists():
        return []
    with path.open() as f:
        next(f, None)
        return [tuple(int(x) for x in line.split(",")) for line in f if line.strip()]  # type: ignore[misc]


def owd_stats(prefix: str, records) -> dict[str, Any]:
    s = sorted((r[2] - r[1]) / 1e9 for r in records)
    span = (records[-1][2] - records[0][2]) / 1e9
    size = sum(r[3] for r in records)
    out = {f"{prefix}_owd_median_s": statistics.median(s), f"{prefix}_owd_p95_s": s[min(len(s) - 1, int(0.95 * len(s)))],
           f"{prefix}_owd_max_s": s[-1], f"{prefix}_messages": len(records)}
    if prefix in DIRECTIONS:
        out[f"{prefix}_owd_mean_s"] = statistics.fmean(s)
        out[f"{prefix}_bytes"] = size
        out[f"{prefix}_transfer_s"] = (records[-1][2] - records[0][1]) / 1e9
        arrivals = sorted(r[2] for r in records)
        out[f"{prefix}_gap_max_s"] = max((b - a for a, b in zip(arrivals, arrivals[1:])), default=0) / 1e9
        out[f"{prefix}_goodput_bps"] = (size - records[0][3]) * 8 / span if span > 0 else None
    return out


def goodput_bins(records, t0: int, spec: dict[str, Any]) -> list[dict[str, Any]]:
    bins: dict[int, int] = {}
    for _, _, recv_ns, size in records:
        b = int((recv_ns - t0) / 1e9 / GOODPUT_BIN_S)
        bins[b] = bins.get(b, 0) + size
    if not bins:
        return []
    return [{"stream": spec.get("role_name", "main"), "direction": spec["direction"], "t_s": b * GOODPUT_BIN_S,
             "goodput_bps": bins.get(b, 0) * 8 / GOODPUT_BIN_S} for b in range(min(bins), max(bins) + 1)]


def file_size(path) -> int:
    try:
        return Path(path).stat().st_size if path else 0
    except OSError:
        return 0


def read_events(path, start: int) -> dict[str, list[tuple[int, float]]]:
    """The relay's (offset, time) per op for the down direction, from this run's part of the file.
    Offsets restart per connection; a run has one down connection through the relay."""
    if not path or not Path(path).exists():
        return {}
    out: dict[str, list[tuple[int, float]]] = {"in": [], "out": []}
    conns: dict[str, int] = {}
    with Path(path).open() as f:
        f.seek(start)
        for row in csv.reader(f):
            if not row or row[0] == "t_ns" or len(row) < 5:
                continue
            t_ns, conn, direction, op, offset = row[:5]
            if direction != "down" or op not in out:
                continue
            conns.setdefault(conn, len(conns))
            if conns[conn] != len(conns) - 1:
                continue  # keep the run's last connection (the stream, not the warm-up)
            out[op].append((int(offset), int(t_ns) / 1e9))
    return out


def at_offset(points: list[tuple[int, float]], offset: int) -> float | None:
    """Time of the first point whose cumulative offset reaches `offset` (points ascend)."""
    if not points:
        return None
    i = bisect.bisect_left(points, (offset, float("-inf")))
    return points[i][1] if i < len(points) else None


def read_vq(path, start: int, t0: int) -> list[dict[str, Any]]:
    if not path or not Path(path).exists():
        return []
    rows = []
    with Path(path).open() as f:
        f.seek(start)
        for row in csv.DictReader(f, fieldnames=["t_ns", "vq_bytes", "bw_bps", "q_ub_bytes", "q_lb_bytes", "throttled"]):
            if row["t_ns"] in (None, "t_ns") or not row["t_ns"]:
                continue
            try:
                rows.append({"t_s": (int(row["t_ns"]) - t0) / 1e9, "vq_bytes": float(row["vq_bytes"]),
                             "bw_bps": float(row["bw_bps"]), "q_ub_bytes": float(row["q_ub_bytes"]),
                             "q_lb_bytes": float(row["q_lb_bytes"]), "throttled": int(float(row["throttled"]))})
            except (TypeError, ValueError):
                continue
    return rows


DRAIN_S = 5.0                # s of deliveries whose rate converts the live backlog into delay
OWD_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # s


class LiveTail:
    """The receiving side's records as they grow (the agent flushes every 0.2 s): the last
    second's one-way delay and goodput, and the run's OWD histogram, for a live view and the
    Prometheus exporter. `sample()` gives the fields of the live record's WorkloadState
    (report.livedoc, which validates them): the streams by role and direction, the phone's
    socket queues and where the download's backlog sits (d1-d4), the relay's virtual queue."""

    def __init__(self, specs: list[dict[str, Any]], sampler, vq_file=None):
        self.specs, self.sampler, self.vq_file = specs, sampler, vq_file
        self.offsets: dict[str, int] = {}
        self.recent: dict[str, list[tuple[int, float, int]]] = {}
        self.totals: dict[str, int] = {}
        self.hist: dict[str, dict[str, Any]] = {}

    def sample(self) -> dict[str, Any]:
        now = time.time_ns()
        streams: list[dict[str, Any]] = []
        out: dict[str, Any] = {"streams": streams}
        for spec in self.specs:
            role, direction = spec.get("role_name", "main"), spec["direction"]
            path, name = spec["out"], f"{role} {direction}"
            try:
                with open(path) as f:
                    f.seek(self.offsets.get(path, 0))
                    text = f.read()
            except OSError:
                continue
            complete = text[: text.rfind("\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            rows = self.recent.setdefault(name, [])
            hist = self.hist.setdefault(name, {"le": list(OWD_BUCKETS), "counts": [0] * len(OWD_BUCKETS),
                                               "sum": 0.0, "count": 0, "bytes": 0})
            for line in complete.splitlines():
                parts = line.split(",")
                if len(parts) == 4 and parts[0].isdigit():
                    owd = (int(parts[2]) - int(parts[1])) / 1e9
                    rows.append((int(parts[2]), owd, int(parts[3])))
                    self.totals[name] = self.totals.get(name, 0) + 1
                    hist["sum"] += owd
                    hist["count"] += 1
                    hist["bytes"] += int(parts[3])
                    for i, le in enumerate(OWD_BUCKETS):
                        if owd <= le:
                            hist["counts"][i] += 1   # cumulative, as Prometheus buckets are
            rows[:] = [r for r in rows if now - r[0] < 30e9]
            last = [r for r in rows if now - r[0] < 1e9]
            streams.append({"role": role, "direction": direction,
                            "owd_s": statistics.median(r[1] for r in last) if last else None,
                            "owd_max_s": max((r[1] for r in last), default=None),
                            "goodput_bps": sum(r[2] for r in last) * 8, "messages": self.totals.get(name, 0),
                            "owd_30s": [round(r[1], 4) for r in rows[-300:]], "owd_hist": hist})
        if self.sampler is not None:
            # The rate the watch receives the main download (the last DRAIN_S): what drains every
            # part of the path, so a part's delay is its bytes over it (measure.queues).
            main = self.recent.get("main down", [])
            recent = [r for r in main if now - r[0] < DRAIN_S * 1e9]
            span = min(DRAIN_S, (now - main[0][0]) / 1e9) if main else 0.0   # a young stream: since its first
            drain = sum(r[2] for r in recent) / span if recent and span > 0.2 else None
            out.update(self.sampler.split(drain))
        if self.vq_file is not None:
            try:
                with open(self.vq_file, "rb") as f:
                    f.seek(max(0, f.seek(0, 2) - 200))
                    last = f.read().decode(errors="replace").strip().splitlines()[-1].split(",")
                if len(last) == 6 and last[0].isdigit():
                    out["virtual_queue"] = {"queue_bytes": float(last[1]), "bt_rate_bps": float(last[2]),
                                            "upper_bound_bytes": float(last[3]), "throttled": bool(int(float(last[5])))}
            except (OSError, IndexError, ValueError):
                pass
        return out
