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
On each of the workload's servers (plan.servers: http-get's and a stream's one, a page's
origins' nodes): a server agent (MULTIPATH_AGENT), which connects to the app's destination. With
one server the watch agent's paths go to it; with several each app connection's paths go to
the agent on its own destination (path target `*`).

The BT path's TCP connection goes to the server's address through the phone: a phone of kind
`host` routes it; a `relay` phone splits it like any watch connection when its `intercept:`
names MULTIPATH_AGENT's port (7101), so its proxy carries the path as the paper's phone did.

Both agents write their per-path counters (series `multipath`) every SERIES_INTERVAL_S, and
with them the DATA chunks each sent and received since the last time (series `multipath_chunks`,
one row per chunk copy and event): the watch's radios' busy time, the energy model's input
(`busy`: wearlab.measure.chunk_flights joins the two sides into each copy's flight).

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

from wearlab.measure.chunk_flights import CHUNK_COLUMNS, path_busy
from wearlab.model.columns import Series
from wearlab.model.media import Medium
from wearlab.model.ports import MULTIPATH_AGENT, MULTIPATH_LOCAL
from wearlab.nodes.held_file import read_held_file
from wearlab.nodes.multipath_agent import ANY_HOST, SERIES_COLUMNS
from wearlab.nodes.multipath_wire import HEADER_BYTES
from wearlab.nodes.software import KindError, wait_listening

MULTIPATH_TABLE = 110            # the watch's routing table for path i: MULTIPATH_TABLE + i
SERIES_INTERVAL_S = 0.1
FALLBACK_SCHEDULER = "minrtt"    # with an interface policy and no `multipath:`: used only if the policy's path fails
# Where netfilter's REDIRECT delivers an app's connection made on the watch (locally generated:
# the loopback address): the watch agent's socket, as a loopback capture shows the app's packets.
APP_REDIRECT = ("127.0.0.1", MULTIPATH_LOCAL)
LIVE_TAIL_BYTES = 4096           # the series' tail the live view reads: several rows of every path
MULTIPATH_SERIES = Series("multipath", ("t_s", *SERIES_COLUMNS),
                          "the multipath transport's counters per path and side (cumulative over the agent's "
                          "sessions): chunks and bytes sent and received, duplicates dropped, smoothed RTT")
MULTIPATH_CHUNKS_SERIES = Series("multipath_chunks", ("t_s", *CHUNK_COLUMNS),
                                 "the multipath transport's DATA chunk copies: when each side wrote one to a path "
                                 "(sent) and read one from a path (received), t_ns on the nodes' shared clock; "
                                 "joined on (session, seq, path) they are each copy's flight, the radios' busy time")


class MultipathEndpoints:
    """Set up, start and stop both ends for one wearable (`kind`: its NodeKind instance)."""

    def __init__(self, kind) -> None:
        self.kind = kind
        self.net = kind.net
        self.watch = kind.node
        s = kind.settings
        self.plan = kind.ctx.plan
        self.servers = list(self.plan.servers)
        self.server_ips = [self.plan.addresses.address_of(n) for n in self.servers]
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
        lines += [f"iptables -t nat -A OUTPUT {rule}" for rule in self._redirects()]
        return lines

    def _redirects(self) -> list[str]:
        """The app's TCP to each server (but the server agent's port) to the watch agent."""
        return [f"-p tcp -d {ip} ! --dport {MULTIPATH_AGENT} -j REDIRECT --to-ports {MULTIPATH_LOCAL}"
                for ip in self.server_ips]

    def undo(self) -> list[str]:
        lines = [f"iptables -t nat -D OUTPUT {rule}" for rule in self._redirects()]
        for i, (_, _, ip, _, _) in enumerate(self.paths):
            lines += [f"ip rule del from {ip} table {MULTIPATH_TABLE + i}", f"ip route flush table {MULTIPATH_TABLE + i}"]
        return lines

    def prepare(self) -> None:
        self.net.sh(self.watch, " && ".join(self.commands()))

    @property
    def agents(self) -> list[str]:
        """Each agent's name (its files'): `watch`, and `server` - or `server-<node>` per server
        node when there are several."""
        return ["watch", *(["server"] if len(self.servers) == 1 else [f"server-{n}" for n in self.servers])]

    def _node_of(self, agent: str) -> str:
        return self.watch if agent == "watch" else self.servers[0] if agent == "server" else agent.removeprefix("server-")

    def argv(self, agent: str) -> list[str]:
        side = "watch" if agent == "watch" else "server"
        common = ["--scheduler", self.spec, "--chunk", str(self.chunk), "--window", str(self.window),
                  "--series", str(self.series_file(agent)), "--series-interval", str(SERIES_INTERVAL_S),
                  "--chunks", str(self.chunks_file(agent)), "--held", str(self.held_file(agent))]
        if self.active is not None:
            common += ["--active", self.active, "--control", str(self.control[agent])]
        if side == "watch":
            # One server: its address; several: each app connection's own destination host.
            host = self.server_ips[0] if len(self.servers) == 1 else ANY_HOST
            return [sys.executable, "-m", "wearlab.nodes.multipath_agent", "watch",
                    "--listen", f"0.0.0.0:{MULTIPATH_LOCAL}",
                    *[a for medium, _, ip, _, _ in self.paths
                      for a in ("--path", f"{medium}={host}:{MULTIPATH_AGENT}@{ip}")], *common]
        return [sys.executable, "-m", "wearlab.nodes.multipath_agent", "server",
                "--listen", f"0.0.0.0:{MULTIPATH_AGENT}", "--names", ",".join(p[0] for p in self.paths), *common]

    def series_file(self, agent: str) -> Path:
        return self.workdir / f"multipath-{agent}.csv"

    def chunks_file(self, agent: str) -> Path:
        return self.workdir / f"multipath-chunks-{agent}.csv"

    def held_file(self, agent: str) -> Path:
        return self.workdir / f"multipath-held-{agent}"

    def held(self, side: str, medium: str) -> int:
        """Bytes `side`'s agent holds in its own write buffers toward its `medium` path, now (its
        --held file; 0 before the agent has written it)."""
        f = self.held_file(side)
        return read_held_file(f, [p[0] for p in self.paths])[medium] if f.exists() else 0

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # The server agents first: the watch agent's paths connect to them.
        for agent in (*self.agents[1:], "watch"):
            node, port = self._node_of(agent), MULTIPATH_LOCAL if agent == "watch" else MULTIPATH_AGENT
            err = open(self.workdir / f"multipath-{agent}.err", "w")
            proc = self.net.popen(node, self.argv(agent), stdout=subprocess.DEVNULL, stderr=err)
            self.procs.append(proc)
            try:
                wait_listening(self.net, node, {port}, f"multipath {agent} agent", 15.0, proc)
            except KindError as e:
                tail = (self.workdir / f"multipath-{agent}.err").read_text(errors="replace").strip()[-300:]
                raise KindError(f"{e}{'; it said: ' + tail if tail else ''}") from None
        self._read = {agent: 0 for agent in self.agents}
        self._chunks_read = {agent: 0 for agent in self.agents}

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
        for agent in self.agents:
            f = self.series_file(agent)
            if not f.exists():
                continue
            with f.open(newline="") as fh:
                rows = list(csv.DictReader(fh))
            new, self._read[agent] = rows[self._read[agent]:], len(rows)
            for r in new:
                t = int(r["t_ns"])
                if t >= t0_ns:
                    # several server agents: each one's counters under its own name
                    out.append({"t_s": round((t - t0_ns) / 1e9, 6), **r,
                                **({"side": agent} if agent != "watch" else {})})
        return sorted(out, key=lambda r: (int(r["t_ns"]), r["side"], int(r["path_index"])))

    def take_chunks(self, t0_ns: int) -> list[dict[str, Any]]:
        """The chunk records written since the last call (both sides), t_s from the run's start:
        read from where the last call stopped (the files grow by a row per chunk event)."""
        out = []
        for side in self.agents:
            rows, self._chunks_read[side] = self._chunk_rows(side, self._chunks_read[side])
            out += [{"t_s": round((int(r["t_ns"]) - t0_ns) / 1e9, 6), **r} for r in rows if int(r["t_ns"]) >= t0_ns]
        return sorted(out, key=lambda r: (int(r["t_ns"]), r["side"]))

    def _chunk_rows(self, side: str, offset: int) -> tuple[list[dict[str, str]], int]:
        """The complete rows of a side's chunk file from byte `offset` (past its header), and
        the offset after them (a row the agent is still writing waits for the next call)."""
        try:
            with self.chunks_file(side).open("rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return [], offset
        cut = data.rfind(b"\n") + 1
        lines = data[:cut].decode().splitlines()
        if offset == 0 and lines:
            lines = lines[1:]          # the header
        return list(csv.DictReader(lines, fieldnames=CHUNK_COLUMNS)), offset + cut

    def busy(self, t0_ns: int, end_ns: int, timeout_s: float = 2.0) -> dict[str, list[tuple[float, float]]]:
        """Each path's busy intervals (s from t0_ns) between t0_ns and end_ns: the union of its
        chunk copies' flights, from both agents' chunk records (chunk_flights.path_busy) - what
        the watch's radios carried, the energy model's input (workloads.run_energy). Waits until
        both agents have written a counters row at or after end_ns (within one
        SERIES_INTERVAL_S): an agent writes its chunk records before each counters row, so every
        chunk event before end_ns is in the files then. Reads the files without moving
        `take_chunks`' place."""
        deadline = time.monotonic() + timeout_s
        while not all(self._written_past(agent, end_ns) for agent in self.agents) \
                and time.monotonic() < deadline:
            time.sleep(SERIES_INTERVAL_S / 4)   # the agents write every SERIES_INTERVAL_S: poll the files
        rows = [r for agent in self.agents for r in self._chunk_rows(agent, 0)[0]]
        return path_busy(rows, t0_ns, end_ns, paths=[p[0] for p in self.paths])

    def _written_past(self, side: str, t_ns: int) -> bool:
        """Has a side's agent written a counters row at or after t_ns? (the file's last rows)"""
        try:
            with self.series_file(side).open("rb") as fh:
                fh.seek(max(0, fh.seek(0, 2) - LIVE_TAIL_BYTES))
                lines = fh.read().decode(errors="replace").splitlines()[1:]
        except OSError:
            return False
        return any(line.split(",", 1)[0].isdigit() and int(line.split(",", 1)[0]) >= t_ns for line in lines)

    def live(self) -> dict[str, Any]:
        """The live record's MultipathState (report.live_record): the watch agent's last counters
        per path, sent and received, and each one's rate since the previous call (`wearlab top`'s
        split: a download's is what arrived over each path, the server agents' choice)."""
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
                t, sent, received = int(r["t_ns"]), int(r["bytes_sent"]), int(r["bytes_received"])
                srtt = float(r["srtt_s"]) if r["srtt_s"] else None
            except (TypeError, ValueError):
                continue
            self._live_last[i] = (t, sent, received)
            t0, sent0, received0 = last.get(i, (t, sent, received))

            def rate(now: int, before: int) -> float:
                return (now - before) * 8e9 / (t - t0) if t > t0 and now >= before else 0.0

            paths.append({"name": r["path_name"], "bytes_sent": sent, "rate_bps": rate(sent, sent0),
                          "srtt_s": srtt, "bytes_received": received, "rate_in_bps": rate(received, received0)})
        # Under an interface policy (InterfaceSelector sets `active`) the agents send on its one
        # path and the scheduler chooses nothing: the live view says so rather than name it.
        return {"scheduler": self.scheduler if self.active is None else "one path at a time: the interface policy's",
                "paths": paths}

    def facts(self) -> dict[str, Any]:
        """What ran, for metadata.json."""
        return {"scheduler": self.scheduler, "scheduler_class": self.spec, "chunk_bytes": self.chunk,
                "header_bytes": HEADER_BYTES, "window_bytes": self.window,
                "paths": [{"index": i, "medium": m, "via": peer, "source": ip, "device": dev,
                           "table": MULTIPATH_TABLE + i} for i, (m, peer, ip, _, dev) in enumerate(self.paths)],
                "server_agents": [f"{n}:{MULTIPATH_AGENT}" for n in self.servers], "watch_agent_port": MULTIPATH_LOCAL,
                "paths_to": ("the server agent" if len(self.servers) == 1 else
                             "the server agent on each app connection's own destination (path target *)"),
                "interception": f"iptables nat OUTPUT REDIRECT of TCP to {', '.join(self.server_ips)} (but port "
                                f"{MULTIPATH_AGENT}) to the watch agent",
                "argv": {agent: self.argv(agent) for agent in self.agents}}
