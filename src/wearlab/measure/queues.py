"""Where a proxied download's backlog sits during a run (seed 003 Fig. 10's d1-d4), sampled with
`ss` in the namespaces of the phone and the server, and the proxy's own buffer as its kind tells it.

Per sample, the bytes of the server -> watch stream waiting in each part of the path:
- d1: the server's send queue (`ss` Send-Q of its stream sockets: not yet sent, or sent and not
  yet acknowledged by the phone - the WiFi qdisc and the path included);
- d2: the phone's receive queue on its server-side socket (Recv-Q: acknowledged, not yet read by
  the proxy) - the seed's bufferbloat;
- d3: the proxy's own buffer (read from the server, not yet written to the watch), as its kind
  tells it (nodes.proxies ProxyKind.held_down: wearlab's relay counts its pipes' bytes, HAProxy
  answers its runtime API; a command proxy cannot tell and leaves it unknown);
- d4: the phone's send queue towards the watch (Send-Q: not yet sent over BT, in BT's qdisc, or
  not yet acknowledged by the watch).
Each byte leaves every part at the rate the watch receives, so a part's delay is its bytes over
that rate (Little's law): `split()` gives both, for `wearlab top` and the exporter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

QUEUE_SAMPLE_S = 0.2
PARTS = ("d1", "d2", "d3", "d4")


def _socks(text: str) -> list[tuple[int, int, str, str]]:
    """`ss -Htn state established` lines: (Recv-Q, Send-Q, local, peer)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
            out.append((int(parts[0]), int(parts[1]), parts[2], parts[3]))
    return out


class QueueSampler:
    """The phone's TCP socket queues (`ss -tn`: Recv-Q, Send-Q) every QUEUE_SAMPLE_S, and with
    `server`/`upstream` given, the server's stream sockets and the d1-d4 split of the backlog
    (module doc). `upstream` is the server's (address, port) the phone's proxy connects to."""

    def __init__(self, net, node: str, server: str | None = None, upstream: tuple[str, int] | None = None,
                 held: Callable[[], int | None] | None = None):
        self.net, self.node, self.server, self.upstream = net, node, server, upstream
        self.held = held      # the proxy's own buffer toward the watch now (None: it cannot tell)
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
                     "d3": self.held() if self.held else None,
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
