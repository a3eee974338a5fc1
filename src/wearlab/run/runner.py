"""Run one experiment on the kernel we are on (the host, or inside a UML guest).

The runner only orchestrates; what is measured belongs to the workload kind, what runs on a
node to its node kind, what is recorded to `RunRecord`. Order: build the network, start the
node kinds with what the workload needs of them, start the workload's agents, warm up, then
repetitions × cells with repetitions outermost (interleaving cells spreads slow drifts of the
machine over all cells), a row written and flushed after every run, the summary at the end.
Cells that change a node's settings (`phone.kind`, `phone.rmem_max`, ...) restart that node's
software between them. Whatever happens (a failed run, Ctrl-C, SIGTERM), teardown runs and
what was measured stays on disk.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.errors import EnvironmentProblem
from wearlab.model.experiment import Experiment
from wearlab.nodes.kinds import NodeKind, Relay, node_kinds
from wearlab.nodes.tcpcrypt import Tcpcrypt, TcpcryptDaemon
from wearlab.realize import network
from wearlab.realize.linkctl import LinkControl
from wearlab.report import results
from wearlab.report.metadata import RunRecord
from wearlab.report.summary import ratios, summarize, to_document
from wearlab.report.table import print_reference, print_summary
from wearlab.run.context import RunContext, SeriesFiles
from wearlab.run import timeline
from wearlab.run.control import ControlServer
from wearlab.run.progress import Progress
from wearlab.runtime import probe


def needs_netem(exp: Experiment) -> bool:
    return any(l.forward.needs_netem() or l.reverse.needs_netem() or l.forward.rate_bps
               or l.reverse.rate_bps for l in exp.topology.links)


def check_kernel(exp: Experiment) -> None:
    if needs_netem(exp):
        p = probe.probe_qdisc("netem")
        if not p.works:
            raise EnvironmentProblem(
                f"this kernel ({probe.kernel_release()}) has no sch_netem qdisc ({p.detail}), which "
                f"the links of {exp.topology.name} need for delay/loss/rate; run with `--runtime uml` "
                "(or `--runtime auto`) to use a User-Mode Linux guest whose kernel has it. "
                "wearlab never runs without the configured impairments.")


def columns(exp: Experiment) -> list[str]:
    return ["run", "repetition", *exp.param_columns(), "status", "error",
            *[m.name for m in exp.metrics()], "link_changes", "started_utc", "wall_s"]


class Nodes:
    """The node kinds running on every node, (re)started when a cell changes their settings."""

    def __init__(self, ctx: RunContext, needs: list, record: RunRecord):
        self.ctx, self.needs, self.record = ctx, needs, record
        self.running: dict[str, tuple[tuple, NodeKind]] = {}
        self.facts: dict[str, list[dict[str, Any]]] = {}

    def apply(self, cell: dict[str, Any]) -> list[str]:
        """Bring every node to its settings for `cell`; returns the nodes (re)started."""
        changed = []
        for node in self.ctx.exp.topology.nodes:
            kind_name, options = self.ctx.exp.node_settings(node, cell)
            key = (kind_name, tuple(sorted((k, str(v)) for k, v in options.items())))
            if node in self.running and self.running[node][0] == key:
                continue
            if node in self.running:
                _stop_kind(self.running[node][1])
            kind = node_kinds()[kind_name](self.ctx.net, node, options, self.ctx.workdir(f"{node}-{len(self.facts.get(node, []))}"),
                                           seed=self.ctx.exp.seed)
            mine = [n for n in self.needs if n.node == node and (kind.accepts(n) or not isinstance(n, Relay))]
            crypt = [n for n in mine if isinstance(n, Tcpcrypt)]  # any kind can carry tcpcryptd beside it
            kind.ctx = self.ctx
            kind.configure([n for n in mine if not isinstance(n, Tcpcrypt)])  # a need it cannot provide: KindError
            kind.prepare()
            kind.start()
            if crypt:
                kind.tcpcrypt = TcpcryptDaemon(self.ctx.net, node, kind.workdir, crypt)
                kind.tcpcrypt.start()
            self.running[node] = (key, kind)
            self.ctx.nodes[node] = kind
            changed.append(node)
        for node in changed:
            kind = self.running[node][1]
            kind.ready()
            self.facts.setdefault(node, []).append(kind.facts())
        if changed:
            self.record.set(nodes=self.facts)
        return changed

    def stop(self) -> None:
        for _, kind in self.running.values():
            try:
                _stop_kind(kind)
            except Exception:  # noqa: BLE001 - teardown must go on
                pass


def _stop_kind(kind: NodeKind) -> None:
    if kind.tcpcrypt is not None:
        kind.tcpcrypt.stop()
    kind.stop()


def _node_key(cell: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in cell.items() if "." in k))


def run_experiment(exp: Experiment, out_dir: Path, *, runtime_label: str, shaper: str = "netem",
                   console: Console | None = None) -> int:
    """Run all runs into out_dir (already created). Returns the exit status."""
    console = console or Console()
    # The timeline player, live control and the radio/handover controllers are threads that must
    # act within a few ms; Python hands the GIL over every 5 ms by default, which is the error
    # they would inherit from any busy thread. 0.5 ms bounds it.
    sys.setswitchinterval(0.0005)
    W = exp.workload_class
    run_id = f"{os.getpid()}-{secrets.token_hex(3)}"
    record = RunRecord(out_dir / "metadata.json", exp, run_id=run_id, runtime_label=runtime_label, shaper=shaper,
                       started=datetime.now(timezone.utc).isoformat())
    results.write_yaml(out_dir / "experiment.yaml", exp.to_document())
    results.write_yaml(out_dir / "topology.yaml", exp.topology.to_document())
    param_cols = exp.param_columns()
    runs = results.RunsCsv(out_dir / "runs.csv", columns(exp), units={m.name: m.unit for m in exp.metrics()})
    net = ctx = nodes = workload = live = None
    rows: list[dict[str, Any]] = []
    status = 0
    try:
        t0 = time.monotonic()
        seeded = probe.probe_feature("netem seed")
        if not seeded.works:
            record.note(f"netem on this kernel cannot be seeded ({seeded.detail}): its loss and jitter draws "
                        "differ run to run; wearlab's own randomness (file contents) uses `seed`.")
        # Wearables whose BT radio sleeps in some cell: their BT links get the radio's qdisc order.
        radios = {n for n in exp.topology.nodes for c in exp.cells() if exp.node_settings(n, c)[1].get("radio") == "bt"}
        net = network.build(exp.topology, run_id=run_id, shaper=shaper, seed=exp.seed if seeded.works else None,
                            radio_nodes=radios)
        setup: dict[str, Any] = {"network_s": round(time.monotonic() - t0, 3), "shaping_notes": net.notes}
        record.set(netem_seeds=net.netem_seeds, setup=setup)
        ctx = RunContext(net=net, exp=exp, out_dir=out_dir,
                         series=SeriesFiles(out_dir / "series", {**{s.name: s.columns for s in W.series},
                                                                 **{s.name: s.columns for k in node_kinds().values()
                                                                    for s in k.series},
                                                                 "timeline": timeline.COLUMNS}, param_cols))
        ctx.links = LinkControl(net)
        ctx.changes = timeline.ChangeLog()
        player = timeline.TimelinePlayer(ctx.links, ctx.changes)
        live = ControlServer(out_dir / "control", ctx)
        live.start()
        cells = exp.cells()
        ctx.progress = {"total": len(cells) * exp.repetitions, "done": 0, "failed": 0}
        workload = W(exp.workload, ctx)
        ctx.workload = workload
        t = time.monotonic()
        nodes = Nodes(ctx, workload.needs(cells), record)
        nodes.apply(cells[0])
        setup["services_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        record.set(workload_facts=workload.start(cells))
        setup["workload_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        snap = net.snapshot()
        record.set(qdiscs_before={n: v["qdiscs"] for n, v in snap.items()},
                   sysctls={n: v["sysctls"] for n, v in snap.items()},
                   offloads={n: v["offloads"] for n, v in snap.items()},
                   addresses={n: [vars(i) for i in intfs] for n, intfs in net.addresses.interfaces.items()},
                   routes=net.addresses.routes)
        setup["dumps_s"] = round(time.monotonic() - t, 3)
        setup["total_s"] = round(time.monotonic() - t0, 3)
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for c in cells:
            groups.setdefault(_node_key(c), []).append(c)
        warmups = [workload.warm_up(list(groups.values())[0])]
        record.set(setup=setup, warmup=warmups)
        with Progress(console, len(cells) * exp.repetitions, exp.name, workload.describe_cell, W.headline) as progress:
            n, pending = 0, None
            try:
                for rep in range(1, exp.repetitions + 1):
                    for group in groups.values():
                        if nodes.apply(group[0]):
                            warmups.append(workload.warm_up(group))
                            record.set(warmup=warmups)
                        for cell in group:
                            n += 1
                            nxt = _one_run(workload, ctx, player, cell, rep, n, param_cols)
                            # The previous run's teardown is on the wire by now: finish its row.
                            if pending is not None:
                                rows.append(_finish(pending, runs, progress))
                                _count(ctx, rows[-1])
                            pending = nxt
            finally:
                if pending is not None:
                    rows.append(_finish(pending, runs, progress))
                    _count(ctx, rows[-1])
        record.set(status="complete")
    except KeyboardInterrupt as e:  # errors.Interrupted: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT (runtime.signals)
        record.set(status=f"interrupted ({getattr(e, 'signal_name', 'SIGINT')})")
        console.print(f"[yellow]interrupted: {len(rows)} runs are kept in {out_dir}[/yellow]")
        status = 130
    except Exception as e:
        record.set(status=f"error: {e}")
        raise
    finally:
        try:
            if net is not None:
                try:
                    record.doc["qdiscs_after"] = net.qdisc_dump()
                except Exception as e:  # noqa: BLE001
                    record.doc["qdiscs_after"] = f"unavailable: {e}"
            for c in (ctx.captures.values() if ctx else ()):
                c.stop()
            if workload is not None:
                workload.stop()
            if nodes is not None:
                nodes.stop()
            if ctx is not None and ctx.series is not None:
                ctx.series.close()
            if live is not None:
                live.stop()
            if ctx is not None and getattr(ctx, "links", None) is not None:
                ctx.links.close()
        finally:
            if net is not None:
                net.teardown()
            runs.close()
            record.set(finished_utc=datetime.now(timezone.utc).isoformat())
    _write_summary(out_dir, exp, rows, console)
    failed = sum(1 for r in rows if r["status"] != "ok")
    if failed:
        console.print(f"[red]{failed} of {len(rows)} runs failed; see runs.csv (status, error)[/red]")
    console.print(f"results: {out_dir}")
    return status


def _count(ctx: RunContext, row: dict[str, Any]) -> None:
    ctx.progress["done"] = ctx.progress.get("done", 0) + 1
    if row.get("status") != "ok":
        ctx.progress["failed"] = ctx.progress.get("failed", 0) + 1


def _node_series(ctx: RunContext, row: dict[str, Any], t0_ns: int) -> None:
    """What node kinds recorded (e.g. the BT radio's states), into their series files."""
    for kind in ctx.nodes.values():
        for name, rows in kind.take_series(t0_ns).items():
            ctx.series.append(name, row, rows)


class _Pending:
    def __init__(self, row: dict[str, Any], finish=None):
        self.row, self.finish = row, finish


def _one_run(workload, ctx: RunContext, player: timeline.TimelinePlayer, cell: dict[str, Any], rep: int, n: int,
             param_cols: list[str]) -> _Pending:
    row: dict[str, Any] = {"run": n, "repetition": rep, **{p: cell.get(p, "") for p in param_cols},
                           "started_utc": datetime.now(timezone.utc).isoformat()}
    t0 = time.monotonic()
    finish = None
    exp = ctx.exp
    # Changes between runs (live ones, a radio falling asleep) belong to no run; flush them with
    # this run's prefix.
    ctx.series.append("timeline", row, ctx.changes.take())
    _node_series(ctx, row, time.time_ns())
    horizon = exp.workload_class.run_length(cell) or exp.timeout_s
    ctx.run_start_ns = time.time_ns()
    ctx.progress.update(run=n, cell=workload.describe_cell(cell), repetition=rep)
    player.start(exp.timeline_of(cell), horizon, ctx.run_start_ns)
    try:
        try:
            for kind in ctx.nodes.values():
                kind.run_started(ctx.run_start_ns)
            outcome = workload.run(cell, rep)
        finally:
            for kind in ctx.nodes.values():
                kind.run_ended()
                row.update(kind.run_metrics())
            errors = player.stop()
            changes = ctx.changes.take()
            row["link_changes"] = sum(1 for c in changes if c["source"] != "reset")
            ctx.series.append("timeline", row, changes)
            _node_series(ctx, row, ctx.run_start_ns)
        if errors:
            raise RuntimeError(f"timeline: {errors[0]}")
        row.update(outcome.row)
        for name, samples in outcome.series.items():
            ctx.series.append(name, row, samples)
        finish = outcome.finish
        row["status"] = "ok"
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a failed run is recorded and the rest go on
        row["status"] = "failed"
        row["error"] = str(e).replace("\n", " ")[:500]
    row["wall_s"] = time.monotonic() - t0
    return _Pending(row, finish)


def _finish(p: _Pending, runs: results.RunsCsv, progress) -> dict[str, Any]:
    """Complete the row (e.g. bytes from the capture once the teardown is in), write it, report."""
    row = p.row
    if row["status"] == "ok" and p.finish is not None:
        try:
            row.update(p.finish())
        except Exception as e:  # noqa: BLE001
            row["status"] = "failed"
            row["error"] = f"capture: {e}"[:500]
    runs.append(row)
    progress.advance(row)
    return row


def _write_summary(out_dir: Path, exp: Experiment, rows: list[dict[str, Any]], console: Console) -> None:
    W = exp.workload_class
    param_cols = exp.param_columns()
    varied = [p for p in param_cols if len({str(r.get(p, "")) for r in rows} - {""}) > 1]
    declared = (*W.ratios, *exp.ratios)
    metrics = exp.metrics()
    wanted = {m.name for m in metrics if m.summarised} | {m for r in declared for m in r.metrics}
    if exp.reference:
        wanted |= {m for c in exp.reference.cells for m in c.values}
    cells = summarize(rows, param_cols, [m.name for m in metrics if m.name in wanted])
    ratio_rows = ratios(cells, declared)
    results.write_json(out_dir / "summary.json", to_document(cells, ratio_rows))
    if rows:
        shown = {p.name: p.shown for p in W.params}
        print_summary(console, exp.name, cells, ratio_rows, varied or param_cols[:1], metrics, shown, declared)
        if exp.reference:
            fixed = {**exp.fixed, **{f"{n}.{k}": v for n, opts in exp.nodes.items() for k, v in opts.items()}}
            print_reference(console, exp.reference, cells, metrics, shown, fixed)
