"""Run one planned experiment on the kernel we are on (the host, or inside a UML guest).

The runner only orchestrates what the plan says (wearlab.plan): build the network, start each
node's kind with the needs the plan found for it, start the workload's agents, warm up, then
repetitions x cells with repetitions outermost (interleaving cells spreads slow drifts of the
machine over all cells), a row written and flushed after every run, the summary at the end.
Cells of another group (other node settings: `phone.kind`, `phone.rmem_max`, ...) restart the
nodes whose settings differ. Whatever happens (a failed run, Ctrl-C, SIGTERM, a hang-up: see
runtime.signals), teardown runs and what was measured stays on disk.

A run's identity (experiment, cell, repetition, seed) fixes everything random in it (plan.seeds):
before it starts the links are left to go quiet and every netem is re-seeded in place with the
run's own seed; its seeds, with what each direction's netem sent and dropped, go to
series/seeds.csv, the run's seed to runs.csv (`run_seed`). So a results directory can be resumed
(`--resume`, run.resume): the runs not yet finished run with the seeds they would have had.

A network may be held open after the runs (`wearlab run EXP --hold`) or for itself (`wearlab
deploy`, run.deploy): `run_experiment(..., hold=...)` hands the network, with the last cell's node
kinds still running, to `hold` once the results are complete and written; `held_network` builds a
plan's network and starts a cell's node kinds without any run (a deployment). Both start kinds
with `Nodes`, and a hold begins as a run does, without the workload (`begin_hold`/`end_hold`): the
kinds' run_started, the cell's timeline played once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.measure import fidelity
from wearlab.model.needs import Files
from wearlab.nodes.node_kind import NodeContext, NodeKind
from wearlab.nodes.tcpcrypt import key_log_path
from wearlab.plan.plan import CellPlan, NodeSetting, RunPlan
from wearlab.plan.seeds import RunSeeds, file_seed
from wearlab.realize import changelog, netns
from wearlab.realize.coupling import InterferenceController
from wearlab.realize.linkctl import LinkControl
from wearlab.report import results
from wearlab.report.metadata import RunRecord
from wearlab.report.summary import ratios, summarize, to_document
from wearlab.report import check, machine_trust
from wearlab.report.table import print_claims, print_summary
from wearlab.run import timeline_player
from wearlab.run.state import RunState, SeriesFiles
from wearlab.run.control import ControlServer
from wearlab.run.estimate import find_path
from wearlab.run.progress import Progress
from wearlab.run.resume import Kept, keep_finished, schedule, sort_runs
from wearlab.run.shard import Shard
from wearlab.runtime import probe
from wearlab.workloads.workload import Outcome
from wearlab.workloads.context import WorkloadContext


# series/seeds.csv: per run, every seed it used (plan.seeds) and, per netem direction, the packets
# it sent and dropped during the run (what its draws decided).
SEED_COLUMNS = ("what", "target", "seed", "packets", "drops")


class Nodes:
    """The node kinds running on every node, (re)started when a cell's group changes their settings."""

    def __init__(self, state: RunState, record: RunRecord | None = None):
        """`record`: the run's metadata, which gets every node's facts (None: a deployment's)."""
        self.state, self.record = state, record
        self.running: dict[str, tuple[tuple, NodeKind]] = {}
        self.facts: dict[str, list[dict[str, Any]]] = {}

    def apply(self, cell: CellPlan) -> list[str]:
        """Bring every node to its settings for `cell`; returns the nodes (re)started."""
        wctx = self.state.wctx
        changed = []
        for node, setting in cell.nodes.items():
            key = setting.key()
            if node in self.running and self.running[node][0] == key:
                continue
            if node in self.running:
                self.running[node][1].shut_down()
            kind = self._make(node, setting)
            kind.bring_up()
            self.running[node] = (key, kind)
            wctx.nodes[node] = kind
            changed.append(node)
        for node in changed:
            kind = self.running[node][1]
            kind.ready()
            self.facts.setdefault(node, []).append(kind.facts())
        if changed and self.record is not None:
            self.record.set(nodes=self.facts)
        return changed

    def _make(self, node: str, setting: NodeSetting) -> NodeKind:
        plan, wctx = self.state.plan, self.state.wctx
        workdir = wctx.workdir(f"{node}-{len(self.facts.get(node, []))}")
        ctx = NodeContext(net=wctx.net, node=node, settings=dict(setting.options), workdir=workdir,
                          seed=plan.seed, plan=plan, links=self.state.links, changes=self.state.changes,
                          out_dir=wctx.out_dir, peers=wctx.nodes)
        return setting.kind(ctx, plan.needs_of(node, setting))

    def stop(self) -> None:
        for _, kind in self.running.values():
            try:
                kind.shut_down()
            except Exception:  # noqa: BLE001 - teardown must go on
                pass


class CellLinks:
    """The links as a run's cell has them (plan.CellPlan.topology: a matrix's `link.<link>.<field>`
    keys): their shaping set in place before the run (LinkControl.enter_cell, rows of the timeline
    with source `cell`), and the 2.4 GHz coexistence rule of the cell's links running (a band
    decides the couplings: model.interference). Cells with the same links change nothing."""

    SOURCE = "cell"

    def __init__(self, state: RunState):
        self.state = state
        self.rule = None                     # the Interference the running controller applies
        self.controller: InterferenceController | None = None
        self.records: list[dict[str, Any]] = []   # each controller's record (metadata: interference)

    def enter(self, cell: CellPlan) -> None:
        state = self.state
        topo = state.plan.topology_of(cell)
        for applied in state.links.enter_cell(topo.links):
            state.changes.add(applied, applied.change, self.SOURCE)
        if topo.interference == self.rule:
            return
        self._stop_controller()
        self.rule = topo.interference
        if topo.interference.couplings:
            self.controller = InterferenceController(state.links, state.changes, topo.interference, topo.links)
            self.controller.start()

    def _stop_controller(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.records.append(self.controller.record())
            self.controller = None

    def stop(self) -> None:
        self._stop_controller()

    def record(self) -> dict[str, Any] | list[dict[str, Any]] | None:
        """What metadata.json keeps under `interference`: the one rule's record (the experiment's
        links in every cell), a list when cells' links had different rules, None without any."""
        records = self.records + ([self.controller.record()] if self.controller is not None else [])
        return None if not records else records[0] if len(records) == 1 else records


Hold = Callable[[RunState, CellPlan], None]


def _warn_key_logs(plan: RunPlan, out_dir: Path, record: RunRecord, console: Console) -> None:
    """Nodes with `tcpcrypt_key_log: true`: said loudly on the console and recorded in metadata
    (`tcpcrypt_key_logs`, and a note the report shows), because these results will hold every
    tcpcrypt session's keys."""
    nodes = plan.key_log_nodes()
    if not nodes:
        return
    files = {n: str(key_log_path(out_dir, n).relative_to(out_dir)) for n in nodes}
    text = (f"tcpcrypt key log kept on {', '.join(nodes)} (tcpcrypt_key_log: true): these results hold session keys "
            f"({', '.join(files.values())}); anyone with them can decrypt the captures (`wearlab decrypt`)")
    console.print(f"[bold red]WARNING: {text}[/bold red]")
    record.note(text)
    record.set(tcpcrypt_key_logs=files)   # (set saves the file, the note with it)


def run_experiment(plan: RunPlan, out_dir: Path, *, console: Console | None = None,
                   host_plan_sha256: str | None = None, resume: bool = False, hold: Hold | None = None,
                   shard: Shard | None = None) -> int:
    """Run all runs of `plan` on this kernel (the plan's runtime: the host's, or the UML guest's we
    are in) into out_dir (already made, with experiment.yaml and topology.yaml: run.start).
    `host_plan_sha256`: in a guest, the digest of the host's plan (equal to this plan's; recorded).
    `resume`: out_dir holds an interrupted run of this plan (run.start checked it): keep its
    finished runs and run the others. `hold(state, cell)`: once every run is done and the results
    are written (summary printed), called with the network and the node kinds of the last run's
    cell still up; they are stopped and torn down when it returns. `shard`: only that slice of the
    plan's runs (run.shard; the plan is written whole). Returns the exit status."""
    console = console or Console()
    kept = keep_finished(out_dir, plan) if resume else Kept()
    total = len(plan.cells) * plan.repetitions
    mine = shard.runs(total) if shard else range(1, total + 1)
    todo = [(n, rep, cell) for n, rep, cell in schedule(plan) if n in mine and n not in kept.runs]
    total = len(mine)
    # The timeline player, live control and the radio/handover controllers are threads that must
    # act within a few ms; Python hands the GIL over every 5 ms by default, which is the error
    # they would inherit from any busy thread. 0.5 ms bounds it.
    sys.setswitchinterval(0.0005)
    W = plan.workload
    run_id = f"{os.getpid()}-{secrets.token_hex(3)}"
    record = RunRecord(out_dir / "metadata.json", plan, run_id=run_id, started=datetime.now(timezone.utc).isoformat(),
                       host_plan_sha256=host_plan_sha256)
    sizes = sorted({s for n in plan.needs if isinstance(n, Files) for s in n.sizes})
    record.set(seeds={"run": "sha256 of the run's identity (experiment, cell, repetition, seed): runs.csv run_seed; "
                             "every seed a run used, and what each netem sent and dropped: series/seeds.csv",
                      "files": {str(s): file_seed(plan.seed, s) for s in sizes}},
               **({"shard": shard.to_document(len(plan.cells) * plan.repetitions)} if shard else {}),
               **({"sessions": kept.sessions, "resumed": {"runs_kept": len(kept.runs), "runs_to_run": len(todo)}}
                  if resume else {}))
    _warn_key_logs(plan, out_dir, record, console)
    results.write_json(out_dir / "plan.json", plan.to_document())
    param_cols = list(plan.columns.params)
    runs = results.RunsCsv(out_dir / "runs.csv", plan.columns.runs_csv(),
                           units={m.name: m.unit for m in plan.columns.metrics})
    for row in kept.rows:
        runs.append({k: v for k, v in row.items() if k in runs.columns})
    net = state = nodes = workload = live = cell_links = None
    rows: list[dict[str, Any]] = list(kept.rows)
    status = 0
    if resume:
        console.print(f"resuming {out_dir}: {len(kept.runs)} of {total} runs finished, {len(todo)} to run")
    if not todo:
        runs.close()
        sort_runs(out_dir / "runs.csv")
        record.set(status="complete", finished_utc=datetime.now(timezone.utc).isoformat())
        _write_summary(out_dir, plan, rows, console)
        console.print(f"results: {out_dir}")
        return 0
    try:
        try:
            t0 = time.monotonic()
            seeded = probe.probe_feature("netem seed")
            if not seeded.works:
                record.note(f"netem on this kernel cannot be seeded ({seeded.detail}): its loss and jitter draws "
                            "differ run to run; wearlab's own randomness (file contents) uses `seed`.")
            net = netns.build(plan.network, run_id=run_id, seed=plan.seed if seeded.works else None)
            setup: dict[str, Any] = {"network_s": round(time.monotonic() - t0, 3), "shaping_notes": net.notes}
            record.set(netem_seeds=net.netem_seeds, setup=setup)
            wctx = WorkloadContext(plan=plan, net=net, out_dir=out_dir)
            state = RunState(plan=plan, wctx=wctx)
            state.series = SeriesFiles(out_dir / "series", {**{s.name: s.columns for s in plan.columns.series},
                                                             "timeline": changelog.COLUMNS, "seeds": SEED_COLUMNS},
                                       param_cols, append=resume)
            state.links = LinkControl(net)
            state.changes = changelog.ChangeLog()
            player = timeline_player.TimelinePlayer(state.links, state.changes)
            # The first cell's links and its 2.4 GHz coexistence rule (its changes are timeline rows).
            cell_links = CellLinks(state)
            cell_links.enter(todo[0][2])
            if cell_links.record() is not None:
                record.set(interference=cell_links.record())
            live = ControlServer(out_dir / "control", state)
            live.start()
            state.progress = {"total": total, "done": len(kept.runs), "failed": 0}
            workload = W(plan.fields, wctx)
            state.workload = workload
            t = time.monotonic()
            nodes = Nodes(state, record)
            nodes.apply(todo[0][2])
            setup["services_s"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            values = [dict(c.values) for c in plan.cells]
            record.set(workload_facts=workload.start(values))
            setup["workload_s"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            snap = net.snapshot()
            record.set(qdiscs_before={n: v["qdiscs"] for n, v in snap.items()},
                       sysctls={n: v["sysctls"] for n, v in snap.items()},
                       offloads={n: v["offloads"] for n, v in snap.items()},
                       addresses={n: [vars(i) for i in intfs] for n, intfs in net.addresses.interfaces.items()},
                       routes=net.addresses.routes)
            setup["dumps_s"] = round(time.monotonic() - t, 3)
            if shard:
                # A shard may run on a busy cluster node: check its link physics before its runs (flag only).
                t = time.monotonic()
                record.set(fidelity=_fidelity(plan, net, todo[0][2]))
                setup["fidelity_s"] = round(time.monotonic() - t, 3)
            setup["total_s"] = round(time.monotonic() - t0, 3)
            group_of = {c.index: [g for g in plan.groups() if c in g][0] for c in plan.cells}
            warmups = [workload.warm_up([dict(c.values) for c in group_of[todo[0][2].index]])]
            record.set(setup=setup, warmup=warmups)
            with Progress(console, total, plan.name, W.describe_cell, W.headline, done=len(kept.runs)) as progress:
                pending, fresh = None, True
                try:
                    for n, rep, cell in todo:
                        cell_links.enter(cell)
                        if nodes.apply(cell):
                            warmups.append(workload.warm_up([dict(c.values) for c in group_of[cell.index]]))
                            record.set(warmup=warmups)
                            fresh = True
                        nxt = _one_run(state, player, cell, rep, n, settle_first=fresh)
                        fresh = False
                        # The previous run's teardown is on the wire by now: finish its row.
                        if pending is not None:
                            rows.append(_finish(state, pending, runs, progress))
                            _count(state, rows[-1])
                        pending = nxt
                finally:
                    if pending is not None:
                        rows.append(_finish(state, pending, runs, progress))
                        _count(state, rows[-1])
            record.set(status="complete")
        except KeyboardInterrupt as e:  # errors.Interrupted: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT (runtime.signals)
            record.set(status=f"interrupted ({getattr(e, 'signal_name', 'SIGINT')})")
            console.print(f"[yellow]interrupted: {len(rows)} runs are kept in {out_dir}[/yellow]")
            status = 130
        except Exception as e:
            record.set(status=f"error: {e}")
            raise
        finally:
            # What the results need, first: the network and the node kinds stay up for a hold.
            try:
                if cell_links is not None:
                    cell_links.stop()
                    if cell_links.record() is not None:
                        record.doc["interference"] = cell_links.record()
                if net is not None:
                    try:
                        record.doc["qdiscs_after"] = net.qdisc_dump()
                    except Exception as e:  # noqa: BLE001
                        record.doc["qdiscs_after"] = f"unavailable: {e}"
                for c in (state.wctx.captures.values() if state else ()):
                    c.stop()
                if workload is not None:
                    workload.stop()
                if state is not None and state.series is not None:
                    state.series.close()
                if live is not None:
                    live.stop()
            finally:
                runs.close()
                if resume:
                    sort_runs(out_dir / "runs.csv")
                record.set(finished_utc=datetime.now(timezone.utc).isoformat())
        _write_summary(out_dir, plan, rows, console)
        failed = sum(1 for r in rows if r["status"] != "ok")
        if failed:
            console.print(f"[red]{failed} of {len(rows)} runs failed; see runs.csv (status, error)[/red]")
        console.print(f"results: {out_dir}")
        if hold is not None and status == 0 and state is not None:
            state.workload = None   # stopped: a live view asks it nothing more
            hold(state, todo[-1][2])
    finally:
        try:
            if nodes is not None:
                nodes.stop()
            if state is not None and state.links is not None:
                state.links.close()
        finally:
            if net is not None:
                net.teardown()
    return status


@contextlib.contextmanager
def held_network(plan: RunPlan, cell: CellPlan, *, run_id: str, out_dir: Path) -> Iterator[RunState]:
    """The plan's network built and `cell`'s node kinds running on it, started as a run starts
    them, with no workload and no run (what `wearlab deploy` holds). Stopped and torn down on
    leaving."""
    sys.setswitchinterval(0.0005)   # as in a run (run_experiment): the kinds' controllers are threads
    seeded = probe.probe_feature("netem seed").works
    net = netns.build(plan.network, run_id=run_id, seed=plan.seed if seeded else None)
    state = nodes = cell_links = None
    try:
        state = RunState(plan=plan, wctx=WorkloadContext(plan=plan, net=net, out_dir=out_dir),
                         links=LinkControl(net), changes=changelog.ChangeLog())
        # The cell's links, and 2.4 GHz coexistence while the network is up, as in a run: a
        # teacher's or a user's own traffic (`wearlab exec`) is what triggers it here.
        cell_links = CellLinks(state)
        cell_links.enter(cell)
        nodes = Nodes(state)
        nodes.apply(cell)
        yield state
    finally:
        try:
            if cell_links is not None:
                cell_links.stop()
            if nodes is not None:
                nodes.stop()
            if state is not None:
                state.links.close()
        finally:
            net.teardown()


def begin_hold(state: RunState, cell: CellPlan) -> timeline_player.TimelinePlayer:
    """A hold begins as a run of `cell` does, without the workload: the node kinds are told a run
    starts now (a handover walks at its walk_start from now, or on `wearlab handover now`) and the
    cell's timeline plays once from now, up to the run's length (the workload's, else the
    timeout). Returns the player, for end_hold."""
    plan = state.plan
    player = timeline_player.TimelinePlayer(state.links, state.changes)
    t0 = state.wctx.run_start_ns = time.time_ns()
    player.start(cell.timeline, plan.workload.run_length(dict(cell.values)) or plan.timeout_s, t0)
    for kind in state.nodes.values():
        kind.run_started(t0)
    return player


def end_hold(state: RunState, player: timeline_player.TimelinePlayer) -> None:
    """The hold's "run" ends: no more timeline changes, the node kinds told (before they stop)."""
    player.halt()
    for kind in state.nodes.values():
        try:
            kind.run_ended()
        except Exception:  # noqa: BLE001 - teardown must go on
            pass


def _count(state: RunState, row: dict[str, Any]) -> None:
    state.progress["done"] = state.progress.get("done", 0) + 1
    if row.get("status") != "ok":
        state.progress["failed"] = state.progress.get("failed", 0) + 1


def _node_series(state: RunState, row: dict[str, Any], t0_ns: int) -> None:
    """What node kinds recorded (e.g. the BT radio's states), into their series files."""
    for kind in state.nodes.values():
        for name, rows in kind.take_series(t0_ns).items():
            state.series.append(name, row, rows)


class _Pending:
    def __init__(self, row: dict[str, Any], finish=None):
        self.row, self.finish = row, finish


def _one_run(state: RunState, player: timeline_player.TimelinePlayer, cell: CellPlan, rep: int, n: int,
             *, settle_first: bool = True) -> _Pending:
    """Run number `n`: repetition `rep` of `cell`. `settle_first`: traffic other than a run's
    (a warm-up) may still be on the links: let them go quiet before re-seeding."""
    plan, workload, wctx, links = state.plan, state.workload, state.wctx, state.links
    values = dict(cell.values)
    seeds = RunSeeds.of(plan.name, values, rep, plan.seed)
    row: dict[str, Any] = {"run": n, "repetition": rep, **{p: values.get(p, "") for p in plan.columns.params},
                           "run_seed": seeds.run, "started_utc": datetime.now(timezone.utc).isoformat()}
    t0 = time.monotonic()
    finish = None
    # Changes between runs (live ones, a radio falling asleep) belong to no run; flush them with
    # this run's prefix.
    state.series.append("timeline", row, state.changes.take())
    _node_series(state, row, time.time_ns())
    # Everything random in the run from its identity (plan.seeds): netem re-seeded on quiet links.
    seed_rows: list[dict[str, Any]] = [{"what": "run", "target": seeds.identity, "seed": seeds.run}]
    if links.seeded() and settle_first:
        links.settle()
    netem = links.reseed(seeds)
    before = links.counters() if netem else {}
    for node, kind in state.nodes.items():
        kind.run_seed = seeds.node(node)
        seed_rows.append({"what": "node", "target": node, "seed": kind.run_seed})
    wctx.seeds = seeds
    seed_rows.append({"what": "workload", "target": plan.workload.name, "seed": seeds.workload()})
    horizon = plan.workload.run_length(values) or plan.timeout_s
    wctx.run_start_ns = time.time_ns()
    state.progress.update(run=n, cell=cell.label, repetition=rep)
    player.start(cell.timeline, horizon, wctx.run_start_ns)
    after: dict[str, dict[str, int]] = {}
    try:
        completed = False
        try:
            for kind in state.nodes.values():
                kind.run_started(wctx.run_start_ns)
            outcome = workload.run(values, rep)
            completed = True
        finally:
            for kind in state.nodes.values():
                kind.run_ended()
                row.update(kind.run_metrics())
            player.halt()
            if completed and netem:
                # The run's last packets (its teardown) draw from its own sequence, not the next run's.
                links.settle()
                after = links.counters()
            errors = player.stop()
            changes = state.changes.take()
            row["link_changes"] = sum(1 for c in changes if c["source"] != "reset")
            state.series.append("timeline", row, changes)
            for d, seed in netem.items():
                r = {"what": "netem", "target": d, "seed": seed}
                if d in after and d in before:
                    r.update(packets=after[d]["packets"] - before[d]["packets"],
                             drops=after[d]["drops"] - before[d]["drops"])
                seed_rows.append(r)
            seed_rows += links.take_drawn()
            state.series.append("seeds", row, seed_rows)
            for kind in state.nodes.values():
                kind.run_seed = None
            wctx.seeds = None
            _node_series(state, row, wctx.run_start_ns)
        if errors:
            raise RuntimeError(f"timeline: {errors[0]}")
        row.update(outcome.row)
        for name, samples in outcome.series.items():
            state.series.append(name, row, samples)
        finish = outcome.finish
        row["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a failed run is recorded and the rest go on
        row["status"] = "failed"
        row["error"] = str(e).replace("\n", " ")[:500]
    row["wall_s"] = time.monotonic() - t0
    return _Pending(row, finish)


def _finish(state: RunState, p: _Pending, runs: results.RunsCsv, progress) -> dict[str, Any]:
    """Complete the row (e.g. bytes from the capture once the teardown is in), write it, report."""
    row = p.row
    if row["status"] == "ok" and p.finish is not None:
        try:
            done = p.finish()
            if isinstance(done, Outcome):
                row.update(done.row)
                for name, samples in done.series.items():
                    state.series.append(name, row, samples)
            else:
                row.update(done)
        except Exception as e:  # noqa: BLE001
            row["status"] = "failed"
            row["error"] = f"capture: {e}"[:500]
    runs.append(row)
    progress.advance(row)
    return row


def _fidelity(plan: RunPlan, net, cell: CellPlan) -> dict[str, Any]:
    """The shard's fidelity probe (measure.fidelity) on the path its first cell's workload uses."""
    ends = plan.endpoints
    client, server = ends.get("client"), ends.get("server")
    if not client or not server:
        return fidelity.not_probed("the workload names no client and server to probe between")
    path = find_path(plan, client, dict(cell.values).get("path"), server, cell)
    if path is None:
        return fidelity.not_probed(f"no path from {client} to {server} in the topology")
    return fidelity.probe(net, client, server, path.nodes, path.rtt_s)


def _write_summary(out_dir: Path, plan: RunPlan, rows: list[dict[str, Any]], console: Console) -> None:
    W = plan.workload
    param_cols = list(plan.columns.params)
    varied = [p for p in param_cols if len({str(r.get(p, "")) for r in rows} - {""}) > 1]
    declared = plan.ratios
    metrics = plan.columns.metrics
    wanted = {m.name for m in metrics if m.summarised} | {m for r in declared for m in r.metrics}
    cells = summarize(rows, param_cols, [m.name for m in metrics if m.name in wanted])
    ratio_rows = ratios(cells, declared)
    results.write_json(out_dir / "summary.json", to_document(cells, ratio_rows))
    if rows:
        shown = {p.name: p.shown for p in W.params}
        print_summary(console, plan.name, cells, ratio_rows, varied or param_cols[:1], metrics, shown, declared)
    if plan.claims:   # the experiment's `expect:` beside ours, as `wearlab check` scores them
        # The metadata as saved so far: a noisy fidelity probe (this shard's node) flags the claims.
        scored = check.evaluate(plan.to_document(), rows, machine_trust.read_metadata(out_dir))
        check.write_claims(out_dir, scored)
        print_claims(console, scored, f"{plan.name}: claims beside ours",
                     check.headline(scored, plan.name))
