"""Running the chunked multipath transport for a wearable (`multipath: <scheduler>` on a
`wearable` node; the transport itself: wearlab.nodes.multipath_agent): what each end's node
needs, and the two agent processes.

On the watch:
- one routing table per path (MULTIPATH_TABLE + i): a socket bound to the watch's address on a
  path's link leaves through that link (`ip rule from <address>`), so the WiFi path goes
  straight to the AP and the BT path through the phone, whatever the main table's default;
- netfilter: the app's TCP to the server (any port but the server agent's) is REDIRECTed to the
  watch agent (MULTIPATH_LOCAL), which reads its original destination (SO_ORIGINAL_DST) and
  hands it to the server agent in each path's HELLO: apps connect to the server as they would
  without the transport (as the paper's framework intercepts them with netfilter);
- the watch agent, one `--path` per medium of `multipath_paths`, in order.
On the server: the server agent (MULTIPATH_AGENT), which connects to the app's destination.

The BT path's TCP connection goes to the server's address through the phone: a phone of kind
`host` routes it; a `relay` phone splits it like any watch connection when its `intercept:`
names MULTIPATH_AGENT's port (7101), so its proxy carries the path as the paper's phone did.

Both agents write their per-path counters (series `multipath`) every SERIES_INTERVAL_S.

With an interface policy (`interface_policy:`, wearlab.nodes.interface_selection) both agents
send on one path at a time (`--active`) and take switches on a control socket each (`control`):
the policy's choice holds for both directions. The scheduler then only carries the flow when
the chosen path has failed (FALLBACK_SCHEDULER).
"""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from wearlab.measure.energy_model import path_busy
from wearlab.model.columns import Series
from wearlab.model.media import Medium
from wearlab.model.ports import MULTIPATH_AGENT, MULTIPATH_LOCAL
from wearlab.nodes.multipath_agent import SERIES_COLUMNS
from wearlab.nodes.multipath_wire import HEADER_BYTES
from wearlab.nodes.software import KindError, wait_listening

MULTIPATH_TABLE = 110            # the watch's routing table for path i: MULTIPATH_TABLE + i
SERIES_INTERVAL_S = 0.1
FALLBACK_SCHEDULER = "minrtt"    # with an interface policy and no `multipath:`: used only if the policy's path fails
LIVE_TAIL_BYTES = 4096           # the series' tail the live view reads: several rows of every path
MULTIPATH_SERIES = Series("multipath", ("t_s", *SERIES_COLUMNS),
                          "the multipath transport's counters per path and side (cumulative over the agent's "
                          "sessions): chunks and bytes sent and received, duplicates dropped, smoothed RTT")


class MultipathEndpoints:
    """Set up, start and stop both ends for one wearable (`kind`: its NodeKind instance)."""

    def __init__(self, kind) -> None:
        self.kind = kind
        self.net = kind.net
        self.watch = kind.node
        s = kind.settings
        self.plan = kind.ctx.plan
        self.server = self.plan.endpoints["server"]
        self.server_ip = self.plan.addresses.address_of(self.server)
        self.scheduler = s["multipath"] if s["multipath"] != "none" else FALLBACK_SCHEDULER
        self.spec = self.plan.schedulers[self.scheduler]
        self.chunk, self.window = s["multipath_chunk"], s["multipath_window"]
        self.paths = []   # (medium, peer, local ip, peer ip, device)
        for medium in s["multipath_paths"]:
            (end,) = [l for l in self.plan.link_ends(self.watch) if l.medium == Medium(medium)]
            intf = self.plan.addresses.interface_to(self.watch, end.peer)
            self.paths.append((medium, end.peer, intf.ip, intf.peer_ip, intf.name))
        self.procs: list[subprocess.Popen] = []
        # An interface policy's (set by InterfaceSelector): the path both agents start on, and
        # side -> the Unix socket that side's agent takes switches on.
        self.active: str | None = None
        self.control: dict[str, Path] = {}

    @property
    def workdir(self) -> Path:
        return self.kind.workdir

    def commands(self) -> list[str]:
        lines = []
        for i, (_, _, ip, peer_ip, dev) in enumerate(self.paths):
            table = MULTIPATH_TABLE + i
            lines += [f"(ip rule del from {ip} table {table} 2>/dev/null; true)",
                      f"ip rule add from {ip} table {table}",
                      f"ip route replace default via {peer_ip} dev {dev} table {table}"]
        lines.append(f"iptables -t nat -A OUTPUT -p tcp -d {self.server_ip} ! --dport {MULTIPATH_AGENT} "
                     f"-j REDIRECT --to-ports {MULTIPATH_LOCAL}")
        return lines

    def undo(self) -> list[str]:
        lines = [f"iptables -t nat -D OUTPUT -p tcp -d {self.server_ip} ! --dport {MULTIPATH_AGENT} "
                 f"-j REDIRECT --to-ports {MULTIPATH_LOCAL}"]
        for i, (_, _, ip, _, _) in enumerate(self.paths):
            lines += [f"ip rule del from {ip} table {MULTIPATH_TABLE + i}", f"ip route flush table {MULTIPATH_TABLE + i}"]
        return lines

    def prepare(self) -> None:
        self.net.sh(self.watch, " && ".join(self.commands()))

    def argv(self, side: str) -> list[str]:
        common = ["--scheduler", self.spec, "--chunk", str(self.chunk), "--window", str(self.window),
                  "--series", str(self.series_file(side)), "--series-interval", str(SERIES_INTERVAL_S)]
        if self.active is not None:
            common += ["--active", self.active, "--control", str(self.control[side])]
        if side == "watch":
            return [sys.executable, "-m", "wearlab.nodes.multipath_agent", "watch",
                    "--listen", f"0.0.0.0:{MULTIPATH_LOCAL}",
                    *[a for medium, _, ip, _, _ in self.paths
                      for a in ("--path", f"{medium}={self.server_ip}:{MULTIPATH_AGENT}@{ip}")], *common]
        return [sys.executable, "-m", "wearlab.nodes.multipath_agent", "server",
                "--listen", f"0.0.0.0:{MULTIPATH_AGENT}", "--names", ",".join(p[0] for p in self.paths), *common]

    def series_file(self, side: str) -> Path:
        return self.workdir / f"multipath-{side}.csv"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for side, node, port in (("server", self.server, MULTIPATH_AGENT), ("watch", self.watch, MULTIPATH_LOCAL)):
            err = open(self.workdir / f"multipath-{side}.err", "w")
            proc = self.net.popen(node, self.argv(side), stdout=subprocess.DEVNULL, stderr=err)
            self.procs.append(proc)
            try:
                wait_listening(self.net, node, {port}, f"multipath {side} agent", 15.0, proc)
            except KindError as e:
                tail = (self.workdir / f"multipath-{side}.err").read_text(errors="replace").strip()[-300:]
                raise KindError(f"{e}{'; it said: ' + tail if tail else ''}") from None
        self._read = {side: 0 for side in ("watch", "server")}

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        self.net.sh(self.watch, "; ".join(self.undo()), check=False)

    def take(self, t0_ns: int) -> list[dict[str, Any]]:
        """The counters' rows written since the last call (both sides), t_s from the run's start."""
        out = []
        for side in ("watch", "server"):
            f = self.series_file(side)
            if not f.exists():
                continue
            with f.open(newline="") as fh:
                rows = list(csv.DictReader(fh))
            new, self._read[side] = rows[self._read[side]:], len(rows)
            for r in new:
                t = int(r["t_ns"])
                if t >= t0_ns:
                    out.append({"t_s": round((t - t0_ns) / 1e9, 6), **r})
        return sorted(out, key=lambda r: (int(r["t_ns"]), r["side"], int(r["path_index"])))

    def busy(self, t0_ns: int, end_ns: int, timeout_s: float = 2.0) -> dict[str, list[tuple[float, float]]]:
        """Each path's busy intervals (s from t0_ns) between t0_ns and end_ns, from the watch
        agent's counters (what the watch's radios carried: the energy model's input,
        workloads.run_energy). Waits until the agent has written a row at or after end_ns (within
        one SERIES_INTERVAL_S), so the run's last interval is in; reads the file without moving
        `take`'s place."""
        f = self.series_file("watch")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with f.open(newline="") as fh:
                    rows = [r for r in csv.DictReader(fh) if r["side"] == "watch" and r["t_ns"] and r["srtt_s"] is not None]
            except OSError:
                rows = []
            if any(int(r["t_ns"]) >= end_ns for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(SERIES_INTERVAL_S / 4)   # the agent writes every SERIES_INTERVAL_S: poll the file
        return path_busy([{**r, "t_s": (int(r["t_ns"]) - t0_ns) / 1e9} for r in rows], 0.0, (end_ns - t0_ns) / 1e9)

    def live(self) -> dict[str, Any]:
        """The live record's MultipathState (report.live_record): the watch agent's last counters
        per path, and each path's send rate since the previous call (`wearlab top`'s split)."""
        f = self.series_file("watch")
        rows: dict[int, dict[str, str]] = {}
        try:
            with f.open("rb") as fh:      # only the tail: the file grows all run long
                fh.seek(max(0, fh.seek(0, 2) - LIVE_TAIL_BYTES))
                lines = fh.read().decode(errors="replace").splitlines()[1:]   # the first may be cut
        except OSError:
            lines = []
        for r in csv.DictReader(lines, fieldnames=SERIES_COLUMNS):
            # (the last line may be half written: it has fewer fields, or a number cut short)
            if r["side"] == "watch" and r["srtt_s"] is not None and str(r["path_index"]).isdigit():
                rows[int(r["path_index"])] = r
        last, self._live_last = getattr(self, "_live_last", {}), {}
        paths = []
        for i, r in sorted(rows.items()):
            try:
                t, sent = int(r["t_ns"]), int(r["bytes_sent"])
                srtt = float(r["srtt_s"]) if r["srtt_s"] else None
            except ValueError:
                continue
            self._live_last[i] = (t, sent)
            t0, sent0 = last.get(i, (t, sent))
            rate = (sent - sent0) * 8e9 / (t - t0) if t > t0 and sent >= sent0 else 0.0
            paths.append({"name": r["path_name"], "bytes_sent": sent, "rate_bps": rate,
                          "srtt_s": srtt})
        return {"scheduler": self.scheduler, "paths": paths}

    def facts(self) -> dict[str, Any]:
        """What ran, for metadata.json."""
        return {"scheduler": self.scheduler, "scheduler_class": self.spec, "chunk_bytes": self.chunk,
                "header_bytes": HEADER_BYTES, "window_bytes": self.window,
                "paths": [{"index": i, "medium": m, "via": peer, "source": ip, "device": dev,
                           "table": MULTIPATH_TABLE + i} for i, (m, peer, ip, _, dev) in enumerate(self.paths)],
                "server_agent": f"{self.server}:{MULTIPATH_AGENT}", "watch_agent_port": MULTIPATH_LOCAL,
                "interception": f"iptables nat OUTPUT REDIRECT of TCP to {self.server_ip} (but port "
                                f"{MULTIPATH_AGENT}) to the watch agent",
                "argv": {"watch": self.argv("watch"), "server": self.argv("server")}}
