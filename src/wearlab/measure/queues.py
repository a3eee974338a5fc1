"""Where a proxied download's backlog sits during a run (seed 003 Fig. 10's d1-d4), sampled with
`ss` in the namespaces of the phone and the server, and the relay's own buffer from its events.

Per sample, the bytes of the server -> watch stream waiting in each part of the path:
- d1: the server's send queue (`ss` Send-Q of its stream sockets: not yet sent, or sent and not
  yet acknowledged by the phone - the WiFi qdisc and the path included);
- d2: the phone's receive queue on its server-side socket (Recv-Q: acknowledged, not yet read by
  the proxy) - the seed's bufferbloat;
- d3: the relay's own buffer (read from the server, not yet written to the watch: its events'
  `in` minus `out`; proxies that do not report them leave it unknown);
- d4: the phone's send queue towards the watch (Send-Q: not yet sent over BT, in BT's qdisc, or
  not yet acknowledged by the watch).
Each byte leaves every part at the rate the watch receives, so a part's delay is its bytes over
that rate (Little's law): `split()` gives both, for `wearlab top` and the exporter.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

QUEUE_SAMPLE_S = 0.2
EVENTS_TAIL = 16384          # bytes of the relay's events file read for its last offsets
PARTS = ("d1", "d2", "d3", "d4")


def _socks(text: str) -> list[tuple[int, int, str, str]]:
    """`ss -Htn state established` lines: (Recv-Q, Send-Q, local, peer)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
            out.append((int(parts[0]), int(parts[1]), parts[2], parts[3]))
    return out


def relay_buffer_bytes(events_file: str | Path | None) -> int | None:
    """The relay's down buffer now: the last `in` minus the last `out` offset of its newest
    connection in the tail of its events file (it flushes them at least every half second)."""
    if not events_file:
        return None
    try:
        with open(events_file, "rb") as f:
            end = f.seek(0, 2)
            f.seek(max(0, end - EVENTS_TAIL))
            lines = f.read().decode(errors="replace").splitlines()[1:]   # the first may be cut
    except OSError:
        return None
    last: dict[str, int] = {}
    conn = None
    for line in reversed(lines):
        row = line.split(",")
        if len(row) < 5 or row[2] != "down" or row[3] not in ("in", "out") or not row[4].isdigit():
            continue
        if conn is None:
            conn = row[1]
        if row[1] != conn:
            continue
        last.setdefault(row[3], int(row[4]))
        if len(last) == 2:
            break
    if "in" not in last:
        return None
    return max(0, last["in"] - last.get("out", 0))


class QueueSampler:
    """The phone's TCP socket queues (`ss -tn`: Recv-Q, Send-Q) every QUEUE_SAMPLE_S, and with
    `server`/`upstream` given, the server's stream sockets and the d1-d4 split of the backlog
    (module doc). `upstream` is the server's (address, port) the phone's proxy connects to."""

    def __init__(self, net, node: str, server: str | None = None, upstream: tuple[str, int] | None = None,
                 events_file: str | Path | None = None):
        self.net, self.node, self.server, self.upstream = net, node, server, upstream
        self.events_file = events_file
        self.rows: list[tuple[int, str, str, int, int]] = []     # t, node, socket, recv_q, send_q
        self.last: dict[str, Any] | None = None                   # the newest sample's split, in bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(QUEUE_SAMPLE_S)

    def sample_once(self) -> None:
        t = time.time_ns()
        phone = _socks(self.net.run(self.node, ["ss", "-Htn", "state", "established"]).stdout)
        server = _socks(self.net.run(self.server, ["ss", "-Htn", "state", "established"]).stdout) \
            if self.server and self.upstream else []
        self.rows += [(t, self.node, f"{lo}->{pe}", rq, sq) for rq, sq, lo, pe in phone]
        self.rows += [(t, self.server or "", f"{lo}->{pe}", rq, sq) for rq, sq, lo, pe in server]
        if self.upstream is None:
            # Without the server's address: the phone's queues summed over its sockets.
            self.last = {"t_ns": t, "receive": sum(s[0] for s in phone), "send": sum(s[1] for s in phone)}
            return
        target = f"{self.upstream[0]}:{self.upstream[1]}"
        towards_server = [s for s in phone if s[3] == target]
        towards_watch = [s for s in phone if s[3] != target]
        self.last = {"t_ns": t,
                     "receive": sum(s[0] for s in towards_server), "send": sum(s[1] for s in towards_watch),
                     "d1": sum(s[1] for s in server if s[2].endswith(f":{self.upstream[1]}")) if self.server else None,
                     "d2": sum(s[0] for s in towards_server),
                     "d3": relay_buffer_bytes(self.events_file),
                     "d4": sum(s[1] for s in towards_watch)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def samples(self, t0: int) -> list[dict[str, Any]]:
        return [{"t_s": (t - t0) / 1e9, "node": n, "socket": s, "recv_q": rq, "send_q": sq}
                for t, n, s, rq, sq in self.rows]

    def split(self, drain_bytes_per_s: float | None) -> dict[str, Any]:
        """The live record's fields: the phone's queues (its server-side receive queue, its send
        queue towards the watch) and, with the server known, the d1-d4 split: bytes, and seconds
        at `drain_bytes_per_s` (the rate the watch receives; None while it receives nothing)."""
        last = self.last
        if last is None:
            return {}
        out: dict[str, Any] = {"phone_queues": {"receive_bytes": last["receive"], "send_bytes": last["send"]}}
        if "d2" in last:
            rate = drain_bytes_per_s if drain_bytes_per_s and drain_bytes_per_s > 0 else None
            out["delay_split"] = {"drain_bytes_per_s": rate,
                                  **{f"{p}_bytes": last[p] for p in PARTS},
                                  **{f"{p}_s": (last[p] / rate if rate and last[p] is not None else None)
                                     for p in PARTS}}
        return out
