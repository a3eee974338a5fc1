"""Changing links while traffic flows: in place, fast, and logged.

Every change is `tc qdisc change` (and `tc class change` for the htb shaper) on the sending end's
egress - never delete and re-add, which would drop the queue, reset counters and leave a moment
without shaping (Mininet's runtime change does that; see its PR #650). Each node keeps one
`tc -batch` process for the whole run, so a change costs a pipe write instead of a process start
(~30 ms in a UML guest); tc answers on a pty (line by line), and a `qdisc show` after each change
tells us when the kernel has taken it: that moment is the change's logged time.

State per direction: the shape in effect (`current`) and whether the link is down. Down is netem
loss 100 % on top of the current shape; up restores it. Each run starts from `start` - the
topology's shaping plus any live change (a teacher's `wearlab link set` outlasts the run it was
made in); a timeline's changes last for their run. A live `reset` returns to the topology's - the
cell's links where the matrix sets them (`enter_cell`).

Seeds (plan.seeds): at a run's start, once the links are quiet (`settle`: nothing queued or in
flight, nothing sent for a while), `reseed` gives every direction's netem the run's own seed by a
`change` in place with the shape it has, and the n-th change of a direction during the run passes
the run's n-th seed: a run's draws depend on its identity, never on the runs before it.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import threading
import time
import tty
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem
from wearlab.model.shape import Loss, Shape, ShapeSpec
from wearlab.model.timeline import LinkChange
from wearlab.plan.seeds import RunSeeds
from wearlab.plan.shaping import netem_seed, qdisc_plan

DOWN_LOSS = Loss(model="random", p=100.0)
ANSWER_TIMEOUT_S = 5.0
# Quiet links (settle): no packet queued in any netem, no TCP socket in any node that will still
# send (a handshake or a close under way, data or a FIN not yet acknowledged: a lost FIN is sent
# again after a timeout, and would draw from the next run's sequence), and no packet sent for
# QUIET_S - longer than a delayed ACK (40 ms) or a proxy's hand-over between its two connections.
# At most SETTLE_MAX_S (a watch's keepalive may never let a link be quiet that long). Links that
# draw nothing are not waited for.
QUIET_S = 0.06
SETTLE_MAX_S = 3.0
# /proc/net/tcp states of a socket that will still send: SYN_SENT, SYN_RECV, FIN_WAIT1, FIN_WAIT2
# (the peer's FIN is to come), CLOSE_WAIT (ours is), LAST_ACK, CLOSING.
SENDING_STATES = frozenset({"02", "03", "04", "05", "08", "09", "0B"})


class LinkControlError(EnvironmentProblem):
    """tc refused a change (the message says which and why)."""


class TcBatch:
    """One `tc -s -j -force -batch -` in a node, fed line by line; its answers come back on a pty
    (tc's stdout to a pipe would be block-buffered and arrive only at exit)."""

    TOOL = "tc"
    SENTINEL = {"tc": "qdisc show dev lo", "ip": "link show dev lo"}

    def __init__(self, net, node: str):
        self.node = node
        master, slave = pty.openpty()
        tty.setraw(slave)
        self.proc = net.popen(node, [self.TOOL, "-s", "-j", "-force", "-batch", "-"], stdin=subprocess.PIPE,
                              stdout=slave, stderr=slave)
        os.close(slave)
        self.fd = master
        self.lock = threading.Lock()

    def run(self, lines: list[str]) -> str:
        """Send `lines` (changes: silent when they work), wait until tc has processed them;
        returns what tc said about them (empty when all went well)."""
        said, _ = self._exchange(lines, 0)
        return said

    def query(self, lines: list[str]) -> list[Any]:
        """Send `show` lines (each answers one JSON line, -j); returns their answers."""
        said, answers = self._exchange(lines, len(lines))
        if said:
            raise LinkControlError(f"{self.node}: tc said: {said[:300]}")
        return answers

    def _exchange(self, lines: list[str], shows: int) -> tuple[str, list[Any]]:
        # A final `qdisc show dev lo` marks the end: tc answers each show with one JSON line,
        # so after shows + 1 such lines, everything else it printed is about our lines (errors).
        with self.lock:
            self.proc.stdin.write(("\n".join([*lines, self.SENTINEL[self.TOOL]]) + "\n").encode())
            self.proc.stdin.flush()
            buf = b""
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            while True:
                text = buf.decode(errors="replace").replace("\r", "")
                done = [l for l in text.split("\n")[:-1] if l.startswith("[")]
                if len(done) >= shows + 1:
                    break
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
                if not ready:
                    raise LinkControlError(f"{self.node}: tc did not answer within {ANSWER_TIMEOUT_S:g} s "
                                           f"(said: {text[-300:]!r})")
                buf += os.read(self.fd, 65536)
            said = "\n".join(l for l in text.split("\n") if l.strip() and not l.startswith("[")).strip()
            return said, [json.loads(l) for l in done[:shows]]

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        os.close(self.fd)


@dataclass
class Applied:
    """A change as it happened: when the kernel had it (ns, shared clock), how long tc took."""

    t_ns: int
    apply_ms: float
    change: LinkChange
    shapes: dict[str, dict[str, Any]]     # "src->dst" -> the shape now in effect (YAML keys)


class LinkControl:
    """The links of a built network, changed in place. Thread-safe (a timeline player and live
    control may both change links)."""

    def __init__(self, net):
        self.net = net
        self.topology: dict[tuple[str, str], Shape] = {}
        for link in net.topo.links:
            self.topology[(link.a, link.b)] = link.forward
            self.topology[(link.b, link.a)] = link.reverse
        self.start = dict(self.topology)          # where each run begins (topology + live changes)
        self.start_down: set[tuple[str, str]] = set()
        self.current = dict(self.topology)
        self.down: set[tuple[str, str]] = set()
        self.changes: dict[tuple[str, str], int] = {}
        self.seeds: RunSeeds | None = None         # the run's (reseed); None before the first run
        self.drawn: list[dict[str, Any]] = []      # seeds passed by changes since the last take_drawn
        self._batches: dict[str, TcBatch] = {}
        self._monitors: dict[str, TcBatch] = {}   # for counters: a query must never delay a change
        self._lock = threading.Lock()

    def _batch(self, node: str) -> TcBatch:
        if node not in self._batches:
            self._batches[node] = TcBatch(self.net, node)
            self._batches[node].run([])   # tc loaded and answering: the first change pays no start-up
        return self._batches[node]

    def prepare(self, changes: list[LinkChange]) -> None:
        """Start the tc processes these changes will use now, not at the first change's time."""
        for c in changes:
            for src, _ in c.directions:
                self._batch(src)

    def effective(self, direction: tuple[str, str]) -> Shape:
        shape = self.current[direction]
        if direction in self.down:
            shape = shape.model_copy(update={"loss": DOWN_LOSS})
        return shape

    def is_changed(self) -> bool:
        return self.current != self.topology or bool(self.down)

    def apply(self, change: LinkChange, *, live: bool = False) -> Applied:
        """Apply a change now. `live`: it also changes where later runs begin (and a live reset
        goes back to the topology's shaping, not to the run's start)."""
        with self._lock:
            for d in change.directions:
                if change.action == "set":
                    self.current[d] = change.spec.over(self.current[d])
                elif change.action == "down":
                    self.down.add(d)
                elif change.action == "up":
                    self.down.discard(d)
                elif change.action == "reset":
                    self.current[d] = self.topology[d] if live else self.start[d]
                    if live or d not in self.start_down:
                        self.down.discard(d)
                    else:
                        self.down.add(d)
                else:
                    raise ValueError(f"unknown link action {change.action!r}")
                if live:
                    self.start[d] = self.current[d]
                    if d in self.down:
                        self.start_down.add(d)
                    else:
                        self.start_down.discard(d)
            by_node: dict[str, list[str]] = {}
            for src, dst in change.directions:
                where, dev = self.net.egress(src, dst)
                n = self.changes[(src, dst)] = self.changes.get((src, dst), 0) + 1
                seed = None
                if self.net.seed is not None:
                    seed = self.seeds.netem(src, dst, n) if self.seeds else netem_seed(self.net.seed, src, dst, n)
                    self.drawn.append({"what": "netem change", "target": f"{src}->{dst} #{n}", "seed": seed})
                link = self.net.topo.link_between(src, dst)
                plan = qdisc_plan(dev, self.effective((src, dst)), shaper=self.net.link_shaper(link), verb="change",
                                  seed=seed)
                by_node.setdefault(where, []).extend(plan.lines)
            t = time.monotonic_ns()
            for node, lines in by_node.items():
                said = self._batch(node).run(lines)
                if said:
                    raise LinkControlError(f"{change.describe()}: tc on {node} said: {said[:400]}")
            done = time.time_ns()
            return Applied(done, (time.monotonic_ns() - t) / 1e6, change,
                           {f"{s}->{d}": self.effective((s, d)).to_document() for s, d in change.directions})

    def seeded(self) -> bool:
        """Whether this kernel's netem takes seeds (realize.netns.build was given one)."""
        return self.net.seed is not None

    def reseed(self, seeds: RunSeeds) -> dict[str, int]:
        """A run begins: every direction's netem re-seeded in place with the run's seed (its shape
        unchanged), changes counted from 0 again. Returns "src->dst" -> seed ({} where netem takes
        no seed)."""
        with self._lock:
            self.seeds, self.changes, self.drawn = seeds, {}, []
            if self.net.seed is None:
                return {}
            out: dict[str, int] = {}
            by_node: dict[str, list[str]] = {}
            for link in self.net.topo.links:
                for d in ((link.a, link.b), (link.b, link.a)):
                    where, dev = self.net.egress(*d)
                    out[f"{d[0]}->{d[1]}"] = seed = seeds.netem(*d)
                    plan = qdisc_plan(dev, self.effective(d), shaper=self.net.link_shaper(link), verb="change",
                                      seed=seed)
                    by_node.setdefault(where, []).extend(plan.lines)
            for node, lines in by_node.items():
                said = self._batch(node).run(lines)
                if said:
                    raise LinkControlError(f"re-seeding netem for the run: tc on {node} said: {said[:400]}")
            return out

    def enter_cell(self, links) -> list[Applied]:
        """A run of a cell with its own links (a matrix's `link.<link>.<field>`: plan.CellPlan.topology)
        or of one with the experiment's, after one that had its own: the links whose shaping
        differs become that cell's, in place, as a live reset to it - so its runs, a timeline's
        `reset` and a live `reset` all start from the cell's links. `links`: the cell's resolved
        links (the plan's; the same ends as the built network's)."""
        out = []
        for link in links:
            dirs = tuple(d for d, shape in (((link.a, link.b), link.forward), ((link.b, link.a), link.reverse))
                         if self.topology[d] != shape)
            if not dirs:
                continue
            with self._lock:
                for d, shape in (((link.a, link.b), link.forward), ((link.b, link.a), link.reverse)):
                    self.topology[d] = shape
            out.append(self.apply(LinkChange(0.0, (link.a, link.b), dirs, "reset", origin="cell's link settings"),
                                  live=True))
        return out

    def take_drawn(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self.drawn = self.drawn, []
        return out

    def draws(self) -> bool:
        """Whether any direction draws random numbers now (loss or jitter)."""
        shapes = [self.effective(d) for d in self.current]
        return any((s.loss is not None and (s.loss.p or 0) > 0) or s.jitter_s > 0 for s in shapes)

    def sending_sockets(self) -> int:
        """TCP sockets in the nodes that will still send (SENDING_STATES, or a retransmission timer
        armed: data or a FIN not acknowledged). Read from each node's /proc/PID/net/tcp, no process
        started; a node whose namespace this kernel cannot see (a container beside a guest) counts
        none."""
        n = 0
        for node in self.net.hosts:
            if node in self.net.remote:      # a container on the host, beside this guest: not ours to see
                continue
            try:
                lines = Path(f"/proc/{self.net.pid(node)}/net/tcp").read_text().splitlines()[1:]
            except (OSError, AttributeError, TypeError):
                continue
            for line in lines:
                f = line.split()
                if len(f) > 5 and (f[3] in SENDING_STATES or f[5].startswith("01:")):
                    n += 1
        return n

    def settle(self, *, quiet_s: float = QUIET_S, max_s: float = SETTLE_MAX_S) -> float:
        """Wait until the links are quiet: no packet queued or delayed in any netem, no socket that
        will still send, and no packet sent for `quiet_s`. Links that draw no random numbers are
        not waited for. Returns the seconds waited (max_s: they never were)."""
        if not self.draws():
            return 0.0
        t0 = time.monotonic()
        last = None
        while True:
            now = self.counters()
            idle = all(c["backlog_packets"] == 0 for c in now.values()) and self.sending_sockets() == 0
            sent = {d: c["packets"] for d, c in now.items()}
            if idle and last is not None and sent == last[1]:
                if time.monotonic() - last[0] >= quiet_s:
                    return time.monotonic() - t0
            else:
                last = (time.monotonic(), sent) if idle else None
            if time.monotonic() - t0 >= max_s:
                return time.monotonic() - t0
            time.sleep(min(0.05, quiet_s / 3))

    def reset_all(self, *, live: bool = False) -> list[Applied]:
        """Every direction back to where runs begin (between runs), or with `live` to the
        topology's shaping."""
        out = []
        target, target_down = (self.topology, set()) if live else (self.start, self.start_down)
        for link in self.net.topo.links:
            dirs = tuple(d for d in ((link.a, link.b), (link.b, link.a))
                         if self.current[d] != target[d] or (d in self.down) != (d in target_down))
            if dirs:
                out.append(self.apply(LinkChange(0.0, (link.a, link.b), dirs, "reset",
                                                 origin="live" if live else "end of run"), live=live))
        return out

    def counters(self, only: set[tuple[str, str]] | None = None) -> dict[str, dict[str, int]]:
        """Per direction (all, or `only` these), what its root qdisc has sent, dropped and holds
        (`tc -s -j`, one query per node)."""
        out: dict[str, dict[str, int]] = {}
        by_node: dict[str, list[tuple[str, str]]] = {}
        for src, dst in self.current:
            if only is not None and (src, dst) not in only:
                continue
            by_node.setdefault(self.net.egress(src, dst)[0], []).append((src, dst))
        for node, dirs in by_node.items():
            # One `show dev X` per interface: in tc's batch mode a `show dev` filter sticks to
            # later plain `show` lines (iproute2 keeps it in a static), so never rely on those.
            devs = [self.net.egress(src, dst)[1] for src, dst in dirs]
            if node not in self._monitors:
                self._monitors[node] = TcBatch(self.net, node)
            answers = self._monitors[node].query([f"qdisc show dev {d}" for d in devs])
            for (src, dst), qdiscs in zip(dirs, answers, strict=True):
                q = next((x for x in qdiscs if x.get("root")), {})
                out[f"{src}->{dst}"] = {"bytes": q.get("bytes", 0), "packets": q.get("packets", 0),
                                        "drops": q.get("drops", 0), "backlog_bytes": q.get("backlog", 0),
                                        "backlog_packets": q.get("qlen", 0)}
        return out

    def shapes(self) -> dict[str, dict[str, Any]]:
        return {f"{s}->{d}": {**self.effective((s, d)).to_document(), "down": (s, d) in self.down}
                for (s, d) in self.current}

    def close(self) -> None:
        for b in [*self._batches.values(), *self._monitors.values()]:
            b.close()
        self._batches.clear()
        self._monitors.clear()


def spec_from(values: dict[str, Any]) -> ShapeSpec:
    """A `set:` from key=value pairs (live control)."""
    return ShapeSpec.model_validate(values)
