"""Live control of a running experiment: `wearlab link show|set|reset`.

The channel is a directory, `control/` in the run's results directory, because that directory is
the one thing every runtime shares with the user's shell (the uml runtime's guest sees it through
hostfs; a Unix socket would not cross that boundary). The CLI drops a request file (written
aside, then renamed: never read half-written) and waits for its answer; the runner polls every
POLL_S, applies the change through the same LinkControl and change log as the timeline (marked
`live`), and answers. `heartbeat` says the run is alive (a run killed with -9 leaves a stale one).
`live.json` is the run's live record (report.livedoc.LiveDoc), which `wearlab top` and the
exporter read; report.livedoc also finds the live runs under a directory (`live_runs`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import LinkAction, NodeAction, values
from wearlab.model.shape import ShapeSpec
from wearlab.model.timeline import LinkChange, resolve_link
from wearlab.report.live_record import (
    HEARTBEAT_FILE,
    LIVE_FILE,
    LinkChanges,
    LinkCounters,
    LinkDirection,
    LiveDoc,
    NodeState,
    RunProgress,
    WorkloadState,
    live_runs,
)

POLL_S = 0.02              # the runner's look at the directory: most of live control's latency
HEARTBEAT_S = 1.0
LIVE_S = 0.5               # live.json: what `wearlab top` and `wearlab exporter` show
COUNTERS_S = 2.0           # qdisc counters: one tc query per node, so not every live.json
ANSWER_TIMEOUT_S = 5.0
ACTIONS = values(LinkAction)
NODE_ACTIONS = values(NodeAction)   # handled by the node kind (NodeKind.control)
WHERE = "<command line>"


def _write_atomic(path: Path, doc: Any) -> None:
    _write_text_atomic(path, json.dumps(doc))


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


class ControlServer:
    """In the runner: answers requests in `directory` until stopped."""

    def __init__(self, directory: Path, ctx, *, poll_s: float = POLL_S, live_s: float = LIVE_S, held: bool = False):
        """`poll_s`, `live_s`: how often it looks for requests and writes live.json (a deployment
        that only holds a network looks less often: its guest's host CPU stays idle); `held`: a
        held network (run.hold), which live.json says."""
        self.dir, self.ctx, self.held = directory, ctx, held
        self.poll_s, self.live_s = poll_s, live_s
        self.dir.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)
        # live.json in its own thread: asking the workload for its state (reading its files)
        # must not delay a request's answer.
        self._live_thread = threading.Thread(target=self._live_loop, name="control-live", daemon=True)

    def start(self) -> None:
        self._beat()
        self._thread.start()
        self._live_thread.start()

    def _live_loop(self) -> None:
        last = 0.0
        while not self._stop.wait(self.live_s):
            if time.monotonic() - last >= COUNTERS_S and self.ctx.links is not None:
                try:
                    self.counters = self.ctx.links.counters()
                except Exception:  # noqa: BLE001 - a live view must never stop a run
                    self.counters = {}
                last = time.monotonic()
            self._write_live()

    def _beat(self) -> None:
        _write_atomic(self.dir / HEARTBEAT_FILE, {"t_ns": time.time_ns(), "pid": os.getpid()})

    def _serve(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.poll_s):
            if time.monotonic() - last_beat >= HEARTBEAT_S:
                self._beat()
                last_beat = time.monotonic()
            try:
                names = sorted(n for n in os.listdir(self.dir) if n.startswith("req-") and n.endswith(".json"))
            except OSError:
                continue
            for name in names:
                req_path = self.dir / name
                try:
                    req = json.loads(req_path.read_text())
                    answer = self.handle(req)
                except Exception as e:  # noqa: BLE001 - a bad request gets an answer, not a dead run
                    answer = {"ok": False, "error": str(e)}
                req_path.unlink(missing_ok=True)
                _write_atomic(self.dir / name.replace("req-", "ans-"), answer)

    def _write_live(self) -> None:
        ctx = self.ctx
        try:
            workload = getattr(ctx, "workload", None)
            doc = LiveDoc(t_ns=time.time_ns(), experiment=ctx.plan.name, held=self.held,
                          run_s=(time.time_ns() - ctx.run_start_ns) / 1e9 if ctx.run_start_ns else None,
                          progress=RunProgress.model_validate(dict(getattr(ctx, "progress", {}) or {})),
                          workload=WorkloadState.model_validate(workload.live() if workload is not None else {}),
                          nodes={n: NodeState.model_validate(k.live()) for n, k in list(ctx.nodes.items())},
                          links=self._links(),
                          changes=LinkChanges.model_validate(ctx.changes.totals()) if ctx.changes is not None
                          else LinkChanges())
            text = doc.to_json()
        except Exception as e:  # noqa: BLE001 - a live view must never stop a run
            text = LiveDoc(t_ns=time.time_ns(), error=str(e)).to_json()
        _write_text_atomic(self.dir / LIVE_FILE, text)

    def _links(self) -> list[LinkDirection]:
        links = self.ctx.links
        if links is None:
            return []
        counters = getattr(self, "counters", {})
        return [LinkDirection(src=src, dst=dst, shape=links.effective((src, dst)), down=(src, dst) in links.down,
                              counters=LinkCounters.model_validate(counters[f"{src}->{dst}"])
                              if f"{src}->{dst}" in counters else None)
                for src, dst in list(links.current)]

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        links = self.ctx.links
        action = req.get("action")
        if action in NODE_ACTIONS:
            return self._node_action(action, req)
        if action == "capture":   # `wearlab capture`: its packets flow on a channel of their own
            from wearlab.run import live_capture
            return live_capture.start(self.ctx, req)
        if action == "show":
            return {"ok": True, "shapes": links.shapes(), "changed": links.is_changed()}
        if action not in ACTIONS:
            return {"ok": False, "error": f"unknown action {action!r}; one of {', '.join(ACTIONS)}"}
        topo = self.ctx.plan.topology
        if action == "reset" and not req.get("link"):
            applied = links.reset_all(live=True)
            for a in applied:
                self.ctx.changes.add(a, a.change, "live")
            return {"ok": True, "applied": [a.change.describe() for a in applied], "shapes": links.shapes()}
        link = resolve_link(topo, req.get("link") or "")
        if link is None:
            names = ", ".join(f"{l.a}-{l.b}" for l in topo.links)
            return {"ok": False, "error": f"no link '{req.get('link')}' (links: {names})"}
        directions = ((link[0], link[1]), (link[1], link[0]))
        if req.get("direction"):
            parts = tuple(p.strip() for p in req["direction"].split("->"))
            if parts not in directions:
                return {"ok": False, "error": f"'{req['direction']}' is not a direction of {link[0]}-{link[1]}; "
                                              f"write {link[0]}->{link[1]} or {link[1]}->{link[0]}"}
            directions = (parts,)
        spec = None
        if action == "set":
            try:
                spec = ShapeSpec.model_validate(req.get("set") or {})
            except ValidationError as e:
                return {"ok": False, "error": "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())}
            if not spec.written():
                return {"ok": False, "error": "nothing to set; give KEY=VALUE pairs (delay=60ms rate=500kbit loss=1%)"}
        change = LinkChange(0.0, link, directions, action, spec, origin=f"live (pid {req.get('pid')})")
        applied = links.apply(change, live=True)
        self.ctx.changes.add(applied, change, "live")
        asked = req.get("t_ns")
        return {"ok": True, "applied": [change.describe()], "t_ns": applied.t_ns, "apply_ms": applied.apply_ms,
                "latency_ms": (applied.t_ns - asked) / 1e6 if isinstance(asked, int) else None,
                "shapes": applied.shapes}

    def _node_action(self, action: str, req: dict[str, Any]) -> dict[str, Any]:
        """`wearlab radio ...` / `wearlab handover now`: the node kind that can, answers."""
        able = {n: k for n, k in list(self.ctx.nodes.items()) if k.controls(action)}
        node = req.get("node")
        if node is None:
            if len(able) != 1:
                return {"ok": False, "error": f"{len(able)} nodes take `{action}` here"
                                              + (f" ({', '.join(able)}); give --node" if able else "")}
            node = next(iter(able))
        if node not in able:
            return {"ok": False, "error": f"node {node!r} takes no `{action}` (nodes that do: {', '.join(able) or 'none'})"}
        said = able[node].control(action, req.get("arg"))
        self.ctx.changes.note(node, f"{action} {req.get('arg')}: {said}", f"live (pid {req.get('pid')})")
        return {"ok": True, "said": said}

    def stop(self) -> None:
        self._stop.set()
        from wearlab.run import live_capture
        live_capture.stop_all()
        for th in (self._thread, self._live_thread):
            if th.is_alive():
                th.join(timeout=5)
        for p in self.dir.glob("*"):
            p.unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError:
            pass


# -- the CLI's side ----------------------------------------------------------------------------


def request(base: Path, req: dict[str, Any]) -> dict[str, Any]:
    runs = live_runs(base)
    if not runs:
        raise EnvironmentProblem(f"no running experiment under {base} (a live run has a fresh control/heartbeat; "
                                 "give its results directory with --results)")
    if len(runs) > 1 and not (base / "control").is_dir():
        raise InputError([Problem(WHERE, None, "--results", "several experiments are running: "
                                  + ", ".join(str(r.parent) for r in runs) + "; name one")])
    control = runs[0]
    name = f"req-{time.time_ns()}-{os.getpid()}.json"
    _write_atomic(control / name, {**req, "pid": os.getpid(), "t_ns": time.time_ns()})
    answer = control / name.replace("req-", "ans-")
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < deadline:
        if answer.exists():
            doc = json.loads(answer.read_text())
            answer.unlink(missing_ok=True)
            return {**doc, "run": str(control.parent)}
        time.sleep(0.005)
    (control / name).unlink(missing_ok=True)
    raise EnvironmentProblem(f"the run in {control.parent} did not answer within {ANSWER_TIMEOUT_S:g} s")


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """delay=60ms rate=500kbit loss=1% -> the `set:` mapping (checked by the runner's ShapeSpec,
    and here first for a clear exit 2)."""
    out: dict[str, Any] = {}
    problems = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(WHERE, None, pair, "not KEY=VALUE (e.g. delay=60ms)"))
            continue
        value = value.strip()
        out[key.strip()] = {"true": True, "false": False}.get(value.lower(), value)
    if not problems:
        try:
            ShapeSpec.model_validate(out)
        except ValidationError as e:
            problems += [Problem(WHERE, None, ".".join(map(str, x["loc"])) or None, x["msg"]) for x in e.errors()]
    if problems:
        raise InputError(problems)
    return out
