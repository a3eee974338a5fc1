"""The phone's TCP socket queues during a run (the bufferbloat's receive queue), sampled with
`ss` in its namespace."""

from __future__ import annotations

import threading
import time
from typing import Any

QUEUE_SAMPLE_S = 0.2


class QueueSampler:
    """The phone's TCP socket queues (`ss -tn`: Recv-Q, Send-Q) every QUEUE_SAMPLE_S."""

    def __init__(self, net, node: str):
        self.net, self.node = net, node
        self.rows: list[tuple[int, str, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.time_ns()
            out = self.net.run(self.node, ["ss", "-Htn", "state", "established"]).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 4:
                    self.rows.append((t, f"{parts[2]}->{parts[3]}", int(parts[0]), int(parts[1])))
            self._stop.wait(QUEUE_SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def samples(self, t0: int) -> list[dict[str, Any]]:
        return [{"t_s": (t - t0) / 1e9, "node": self.node, "socket": s, "recv_q": rq, "send_q": sq}
                for t, s, rq, sq in self.rows]
