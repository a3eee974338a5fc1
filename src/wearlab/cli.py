"""The `wearlab` command: run experiments, change and watch them live, compare and export results.

Exit status: 0 success, 1 an unexpected failure, 2 bad input or a machine that cannot do what
was asked (one line per problem, no traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from wearlab import __version__
from wearlab.errors import EnvironmentProblem, InputError, Problem

RUNTIMES = ("auto", "host", "uml")
# Plain output (no colour, no cursor tricks) when not on a terminal or when a UML host says so.
_PLAIN = {"no_color": True, "force_terminal": False, "width": 120} if os.environ.get("WEARLAB_PLAIN") == "1" else {}
console = Console(highlight=False, soft_wrap=True, **_PLAIN)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, **_PLAIN)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wearlab", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"wearlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an experiment")
    r.add_argument("experiment", type=Path)
    r.add_argument("--runtime", choices=RUNTIMES, help="where the network lives (default: the experiment's)")
    r.add_argument("--repetitions", type=int, help="override the experiment's repetitions")
    r.add_argument("--out", type=Path, default=Path("results"), help="results base directory (default: results)")
    r.add_argument("--shaper", choices=("netem", "htb"), default="netem",
                   help="rate shaping by netem's own rate (default) or an htb class above netem")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a workload parameter or a node setting (node.option), e.g. "
                        "--set size=1KB --set phone.kind=haproxy; repeatable")
    r.add_argument("--into", type=Path, help=argparse.SUPPRESS)  # exact results dir (host -> guest)

    v = sub.add_parser("validate", help="check topology and experiment files")
    v.add_argument("files", type=Path, nargs="+")

    sub.add_parser("doctor", help="what this machine supports and which runtime `auto` picks")
    sub.add_parser("profiles", help="the built-in link profiles, their numbers and sources")
    pl = sub.add_parser("plot", help="(re)draw the plots of results directories")
    pl.add_argument("results", type=Path, nargs="+")
    sub.add_parser("kinds", help="node kinds and workload kinds, with their options and parameters")
    sub.add_parser("clean", help="remove everything wearlab made (namespaces, processes, guests)")

    c = sub.add_parser("compare", help="compare two results directories of one experiment (exit 1 on a regression)")
    c.add_argument("baseline", type=Path)
    c.add_argument("candidate", type=Path)
    c.add_argument("--alpha", type=float, help="significance level (default 0.05)")
    c.add_argument("--threshold", type=float, help="relative change that counts (default 0.05 = 5 %%)")
    c.add_argument("--metric-threshold", action="append", default=[], metavar="METRIC=REL",
                   help="a metric's own relative threshold; repeatable")
    c.add_argument("--metric", action="append", default=[], help="compare only this metric; repeatable")
    c.add_argument("--thresholds", type=Path, help="YAML: alpha, threshold, metrics: {name: {rel, abs}}, only")
    c.add_argument("--markdown", type=Path, help="write the table as Markdown")
    c.add_argument("--junit", type=Path, help="write JUnit XML (one testcase per cell x metric)")
    c.add_argument("--json", type=Path, help="write the comparison as JSON")

    lk = sub.add_parser("link", help="show or change the links of a running experiment (live)")
    lk.add_argument("action", choices=("show", "set", "down", "up", "reset"))
    lk.add_argument("link", nargs="?", help="a link, e.g. watch-phone (reset without one: every link)")
    lk.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="for set: delay=60ms rate=500kbit loss=1%% ...")
    lk.add_argument("--direction", metavar="A->B", help="one direction only (default: both)")
    lk.add_argument("--results", type=Path, default=Path("results"),
                    help="the running experiment's results directory (default: the one live under results/)")

    tp = sub.add_parser("top", help="a live view of a running experiment (OWD, goodput, queues, radio, links)")
    tp.add_argument("--results", type=Path, default=Path("results"),
                    help="the running experiment's results directory (default: the one live under results/)")
    tp.add_argument("--once", action="store_true", help="print one frame and exit")

    ex = sub.add_parser("exporter", help="serve Prometheus metrics of the experiments running under a results directory")
    ex.add_argument("--results", type=Path, default=Path("results"))
    ex.add_argument("--listen", default="127.0.0.1:9469", help="address:port (default 127.0.0.1:9469)")
    ex.add_argument("--once", action="store_true", help="print the metrics once and exit")

    rd = sub.add_parser("radio", help="force a running experiment's BT radio to sleep or wake (wearable kind, radio: bt)")
    rd.add_argument("action", choices=("show", "sleep", "wake"))
    rd.add_argument("--node", help="the wearable (default: the only one with a radio)")
    rd.add_argument("--results", type=Path, default=Path("results"))

    ho = sub.add_parser("handover", help="start a running experiment's walk-away now (wearable kind, walk_start: manual)")
    ho.add_argument("action", choices=("now",))
    ho.add_argument("--node", help="the wearable (default: the only one with a handover)")
    ho.add_argument("--results", type=Path, default=Path("results"))

    e = sub.add_parser("exec", help="run a command where the emulated network would live")
    e.add_argument("--runtime", choices=RUNTIMES, default="auto")
    e.add_argument("argv", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    os.environ.setdefault("WEARLAB_ARGV", shlex.join(["wearlab", *argv]))
    try:
        return {"run": cmd_run, "validate": cmd_validate, "doctor": cmd_doctor, "profiles": cmd_profiles, "plot": cmd_plot,
                "kinds": cmd_kinds, "clean": cmd_clean, "exec": cmd_exec, "link": cmd_link,
                "compare": cmd_compare, "top": cmd_top, "exporter": cmd_exporter, "radio": cmd_node_action, "handover": cmd_node_action}[args.command](args)
    except InputError as e:
        for p in e.problems:
            err_console.print(f"[red]error:[/red] {p}")
        return 2
    except EnvironmentProblem as e:
        err_console.print(f"[red]error:[/red] {e}")
        return 2
    except KeyboardInterrupt as e:  # errors.Interrupted too: SIGTERM, SIGHUP, SIGQUIT
        err_console.print(f"interrupted ({getattr(e, 'signal_name', 'SIGINT')})")
        return 130
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback only on request
        if os.environ.get("WEARLAB_DEBUG"):
            raise
        err_console.print(f"[red]internal error:[/red] {type(e).__name__}: {e} "
                          "(set WEARLAB_DEBUG=1 for the traceback)")
        return 1


def _positive(value: int | None, field: str) -> None:
    if value is not None and value < 1:
        raise InputError([Problem("<command line>", None, field, f"must be at least 1, got {value}")])


def _overrides(pairs: list[str]) -> dict[str, str]:
    out, problems = {}, []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(Problem("<command line>", None, "--set", f"'{pair}' is not KEY=VALUE"))
            continue
        out[key.strip()] = value.strip()
    if problems:
        raise InputError(problems)
    return out


def resolve_runtime(requested: str) -> tuple[str, str]:
    """(runtime, reason)."""
    from wearlab.runtime import probe, uml

    if probe.in_uml_guest():
        return "host", "already inside a UML guest"
    if requested != "auto":
        return requested, "requested"
    p = probe.probe_qdisc("netem")
    if p.works:
        return "host", f"netem works on this kernel ({probe.kernel_release()})"
    try:
        uml.check_ready()
    except EnvironmentProblem as e:
        raise EnvironmentProblem(f"this kernel lacks sch_netem ({p.detail}) and the uml runtime is not "
                                 f"ready: {e}") from None
    return "uml", f"this kernel ({probe.kernel_release()}) lacks sch_netem: {p.detail}"


def _project_paths() -> list[Path]:
    pkg = Path(__file__).resolve().parent
    root = pkg.parent.parent if pkg.parent.name == "src" else pkg.parent
    return [root, Path(sys.prefix).resolve()]


def cmd_run(args) -> int:
    from wearlab.model.experiment import load_experiment
    from wearlab.runtime import cgroup, probe, signals

    _positive(args.repetitions, "--repetitions")
    exp = load_experiment(args.experiment, repetitions=args.repetitions, runtime=args.runtime,
                          overrides=_overrides(args.overrides))
    runtime, reason = resolve_runtime(exp.runtime)
    if runtime == "host" or probe.in_uml_guest():
        # Refuse before anything is created: no results directory for a run that cannot start.
        from wearlab.run.runner import check_kernel

        if os.geteuid() != 0:
            raise EnvironmentProblem("wearlab run needs root (network namespaces, tc)")
        check_kernel(exp)
    images = {n: node.image for n, node in exp.topology.nodes.items() if node.image}
    if images and not probe.in_uml_guest():
        # Container nodes start on this host: Docker and their images, before anything is created.
        from wearlab.realize import containers

        containers.check_docker()
        containers.check_images(images)
    if os.geteuid() == 0:
        # What earlier runs that died (kill -9, a crash) left behind goes first; live runs stay.
        from wearlab.runtime.cleanup import heal

        for line in heal():
            err_console.print(f"removed what a dead run left: {line}")
    with signals.interruptible():
        # Everything this run starts lives in its cgroup, so `wearlab clean` finds it after a kill -9.
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            return _run_in(args, exp, runtime, reason)
        finally:
            cgroup.leave(group)


def _run_in(args, exp, runtime: str, reason: str) -> int:
    from wearlab.report import results
    from wearlab.run.runner import run_experiment
    from wearlab.runtime import probe

    if args.into:
        out_dir = args.into
    else:
        out_dir = results.new_results_dir(args.out, exp.name)
        results.point_latest(out_dir)  # at once: an interrupted run's rows are results too
    label = "uml" if probe.in_uml_guest() else runtime
    if runtime == "uml" and not probe.in_uml_guest():
        from wearlab.runtime.uml import run_in_guest

        console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
        inner = [sys.executable, "-m", "wearlab", "run", str(args.experiment.resolve()), "--runtime", "host",
                 "--into", str(out_dir.resolve()), "--shaper", args.shaper,
                 *[f"--set={o}" for o in args.overrides]]
        if args.repetitions:
            inner += ["--repetitions", str(args.repetitions)]
        mounts = [*_project_paths(), out_dir.resolve(), args.experiment.resolve().parent]
        if exp.topology.file:
            mounts.append(Path(exp.topology.file).resolve().parent)
        attach = None
        if any(n.image for n in exp.topology.nodes.values()):
            from functools import partial

            from wearlab.realize.containers import for_guest
            attach = partial(for_guest, exp.topology)
        rc = run_in_guest(inner, mounts=mounts, cwd=Path.cwd(), env={"WEARLAB_ARGV": os.environ["WEARLAB_ARGV"]},
                          attach=attach)
    else:
        if not probe.in_uml_guest():
            console.print(f"runtime: host ({reason})")
        rc = run_experiment(exp, out_dir, runtime_label=label, shaper=args.shaper, console=console)
    if not probe.in_uml_guest() and (out_dir / "series").is_dir():
        # Drawn here, on the host: the guest's CPU is the expensive one.
        from wearlab.report.plots import plot_results

        for png in plot_results(out_dir):
            console.print(f"plot: {png}")
    return rc


def cmd_validate(args) -> int:
    from wearlab.model.experiment import load_experiment
    from wearlab.model.topology import load_topology
    from wearlab.model.yamlsrc import load_yaml

    problems: list[Problem] = []
    for f in args.files:
        try:
            data = load_yaml(f).data
            # A topology has nodes; an experiment has a workload (it may inline a topology).
            if isinstance(data, dict) and "nodes" in data and "workload" not in data:
                load_topology(f)
            else:
                load_experiment(f)
            console.print(f"ok: {f}")
        except InputError as e:
            problems += e.problems
    if problems:
        raise InputError(problems)
    return 0


def cmd_doctor(args) -> int:
    from rich.table import Table

    from wearlab.runtime import probe, uml

    t = Table(title="wearlab doctor", show_header=True)
    t.add_column("check")
    t.add_column("result")
    t.add_column("why wearlab needs it")
    t.add_row("kernel", probe.kernel_release() + (" (UML guest)" if probe.in_uml_guest() else ""), "")
    t.add_row("root", "yes" if os.geteuid() == 0 else "[red]no: namespaces and tc need root[/red]", "")
    _feature_rows(t, probe.report()["features"], "")
    for tool, path in probe.tool_paths().items():
        t.add_row(f"tool {tool}", path or "[red]missing[/red]", "")
    try:
        import mininet.net

        t.add_row("mininet", f"{mininet.net.VERSION} ({Path(mininet.__file__).parent})", "")
    except ImportError:
        t.add_row("mininet", "[red]not importable by this python[/red]", "")
    guest = None
    try:
        uml.check_ready()
        t.add_row("uml runtime", f"ready: kernel {uml.kernel_version()} ({uml.uml_kernel()}), "
                                 f"root fs {uml.rootfs_path()}", "")
        guest = _guest_report() if not probe.in_uml_guest() else None
    except EnvironmentProblem as e:
        t.add_row("uml runtime", f"[red]not ready[/red]: {e}", "")
    if guest is not None:
        t.add_row("guest kernel", f"{guest['kernel']} (booted to probe), {guest['tc']}", "")
        _feature_rows(t, guest["features"], "guest ")
    try:
        rt, why = resolve_runtime("auto")
        t.add_row("auto picks", f"[bold]{rt}[/bold]: {why}", "")
    except EnvironmentProblem as e:
        t.add_row("auto picks", f"[red]nothing[/red]: {e}", "")
    console.print(t)
    return 0


def _feature_rows(t, features: dict, prefix: str) -> None:
    for name, f in features.items():
        t.add_row(prefix + name, "[green]works[/green]" if f["works"] else f"[red]missing[/red]: {f['detail']}",
                  f["why"])


def _guest_report() -> dict | None:
    """Boot the guest once and probe its kernel (about two seconds)."""
    import io
    import json

    from wearlab.runtime.uml import run_in_guest

    buf = io.BytesIO()
    rc = run_in_guest([sys.executable, "-m", "wearlab.runtime.probe"], mounts=_project_paths(), cwd=_project_paths()[0],
                      out=buf)
    lines = [l for l in buf.getvalue().decode(errors="replace").splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if rc == 0 and lines else None


def cmd_profiles(args) -> int:
    from rich.table import Table

    from wearlab.model.profiles import PROFILES
    from wearlab.model.units import format_duration, format_rate

    t = Table(title="link profiles (forward = between[0] -> between[1])", show_lines=True)
    for col in ("profile", "forward", "reverse", "what and where from"):
        t.add_column(col)
    for p in PROFILES.values():
        def shape(s) -> str:
            return (f"{format_rate(s.rate_bps) if s.rate_bps else 'no rate limit'}, "
                    f"{format_duration(s.delay_s)} one-way")
        t.add_row(p.name, shape(p.forward), shape(p.reverse), f"{p.description}\n{p.citation}")
    console.print(t)
    return 0


def cmd_kinds(args) -> int:
    from rich.table import Table

    from wearlab.nodes.kinds import DEFAULT_KIND, node_kinds
    from wearlab.workloads.base import workload_kinds

    t = Table(title="node kinds (`kind:` on a node; default per role)", show_lines=True)
    for col in ("kind", "roles", "options", "what it is"):
        t.add_column(col)
    defaults = {v: [r.value for r, k in DEFAULT_KIND.items() if k == v] for v in DEFAULT_KIND.values()}
    for k in node_kinds().values():
        roles = ", ".join(sorted(r.value for r in k.roles))
        if k.name in defaults:
            roles += f" (default for {', '.join(defaults[k.name])})"
        t.add_row(k.name, roles, "\n".join(f"{p.name}: {p.doc}" for p in k.options) or "–", k.doc)
    console.print(t)
    w = Table(title="workload kinds (`workload: {kind: ...}`)", show_lines=True)
    for col in ("kind", "fields", "parameters", "what it measures"):
        w.add_column(col)
    for k in workload_kinds().values():
        fields = ", ".join(f for f in k.Fields.model_fields if f != "kind")
        w.add_row(k.kind, fields, "\n".join(f"{p.name}: {p.doc}" for p in k.params), k.doc)
    console.print(w)
    return 0


def cmd_plot(args) -> int:
    from wearlab.report.plots import plot_results

    problems = [Problem(str(d), None, None, "not a results directory (no metadata.json)")
                for d in args.results if not (d / "metadata.json").is_file()]
    if problems:
        raise InputError(problems)
    for d in args.results:
        for png in plot_results(d):
            console.print(str(png))
    return 0


def cmd_top(args) -> int:
    import time as _time

    from rich.live import Live

    from wearlab.report.live import render
    from wearlab.report.livedoc import read_live

    doc = read_live(args.results)
    if doc is None:
        raise EnvironmentProblem(f"no running experiment under {args.results} (give its results directory with --results)")
    if args.once:
        console.print(render(doc))
        return 0
    with Live(render(doc), console=console, refresh_per_second=4, screen=False) as live:
        while True:
            _time.sleep(0.25)
            doc = read_live(args.results)
            if doc is None:
                break
            live.update(render(doc))
    console.print("the experiment has ended")
    return 0


def cmd_exporter(args) -> int:
    import time as _time

    from prometheus_client import generate_latest

    from wearlab.report import exporter

    if args.once:
        sys.stdout.write(generate_latest(exporter.registry(args.results)).decode())
        return 0
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError([Problem("<command line>", None, "--listen", f"'{args.listen}' is not ADDRESS:PORT")])
    try:
        exporter.serve(args.results, host or "127.0.0.1", int(port))
    except OSError as e:
        raise EnvironmentProblem(f"cannot listen on {args.listen}: {e} (is another exporter running? "
                                 "choose another port with --listen)") from None
    console.print(f"serving metrics of experiments under {args.results} on http://{host or '127.0.0.1'}:{port}/metrics")
    while True:
        _time.sleep(3600)


def cmd_node_action(args) -> int:
    from wearlab.run import control

    answer = control.request(args.results, {"action": args.command, "arg": args.action, "node": args.node})
    if not answer.get("ok"):
        raise InputError([Problem("<command line>", None, None, answer.get("error", "refused"))])
    console.print(answer.get("said", "done"))
    return 0


def cmd_compare(args) -> int:
    from rich.table import Table

    from wearlab.report import compare as C

    th = C.load_thresholds(args.thresholds)
    updates: dict = {}
    if args.alpha is not None:
        if not 0 < args.alpha < 1:
            raise InputError([Problem("<command line>", None, "--alpha", f"{args.alpha} is not in (0, 1)")])
        updates["alpha"] = args.alpha
    if args.threshold is not None:
        if args.threshold < 0:
            raise InputError([Problem("<command line>", None, "--threshold", "must be >= 0")])
        updates["threshold"] = args.threshold
    metrics = dict(th.metrics)
    for pair in args.metric_threshold:
        name, sep, value = pair.partition("=")
        try:
            metrics[name] = C.MetricThreshold(rel=float(value))
            assert sep and name
        except (ValueError, AssertionError):
            raise InputError([Problem("<command line>", None, "--metric-threshold", f"'{pair}' is not METRIC=REL")]) from None
    th = th.model_copy(update={**updates, "metrics": metrics})
    base = C.load_side(args.baseline, "BASELINE")
    cand = C.load_side(args.candidate, "CANDIDATE")
    rep = C.compare(base, cand, th, args.metric or None)
    t = Table(title=C.headline(rep))
    for h in C.HEADER:
        t.add_column(h)
    colour = {"regression": "red", "improvement": "green", "inconclusive": "yellow"}
    for row, r in zip(C.table_rows(rep), rep.rows, strict=True):
        t.add_row(*row[:-1], f"[{colour[r.verdict]}]{r.verdict}[/]" if r.verdict in colour else r.verdict)
    console.print(t)
    for d in rep.environment_differences:
        console.print(f"[yellow]environments differ:[/yellow] {d}")
    if rep.only_baseline or rep.only_candidate:
        console.print(f"cells only in the baseline: {', '.join(rep.only_baseline) or 'none'}; "
                      f"only in the candidate: {', '.join(rep.only_candidate) or 'none'}")
    for path, text in ((args.markdown, C.to_markdown), (args.junit, C.to_junit), (args.json, C.to_json)):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(rep))
    return 1 if rep.regressions else 0


def cmd_link(args) -> int:
    from wearlab.run import control

    if args.action != "show" and args.action != "reset" and not args.link:
        raise InputError([Problem("<command line>", None, "link", f"`link {args.action}` needs a link, e.g. watch-phone")])
    if args.action != "set" and args.settings:
        raise InputError([Problem("<command line>", None, args.settings[0], f"`link {args.action}` takes no settings")])
    req = {"action": args.action, "link": args.link, "direction": args.direction}
    if args.action == "set":
        if not args.settings:
            raise InputError([Problem("<command line>", None, "settings", "give KEY=VALUE pairs, e.g. delay=60ms")])
        req["set"] = control.parse_settings(args.settings)
    answer = control.request(args.results, req)
    if not answer.get("ok"):
        raise InputError([Problem("<command line>", None, None, answer.get("error", "refused"))])
    for line in answer.get("applied", []):
        took = f" ({answer['latency_ms']:.1f} ms after the request)" if answer.get("latency_ms") is not None else ""
        console.print(f"applied: {line}{took}")
    from rich.table import Table
    t = Table(title=f"links of {answer['run']}")
    for col in ("direction", "rate", "delay", "jitter", "loss", "queue", "down"):
        t.add_column(col)
    for d, s in answer.get("shapes", {}).items():
        t.add_row(d, str(s.get("rate", "-")), str(s.get("delay", "")), str(s.get("jitter", "")), str(s.get("loss", "-")),
                  str(s.get("queue_packets", s.get("queue_bytes", "-"))), "down" if s.get("down") else "")
    console.print(t)
    return 0


def cmd_clean(args) -> int:
    from wearlab.runtime.cleanup import clean

    removed = clean()
    for line in removed:
        console.print(f"removed: {line}")
    if not removed:
        console.print("nothing to clean")
    return 0


def cmd_exec(args) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise InputError([Problem("<command line>", None, "exec", "give a command after --")])
    runtime, reason = resolve_runtime(args.runtime)
    if runtime == "uml":
        from wearlab.runtime import signals
        from wearlab.runtime.uml import run_in_guest

        err_console.print(f"runtime: uml ({reason})")
        with signals.interruptible():
            return run_in_guest(argv, mounts=_project_paths(), cwd=Path.cwd())
    return subprocess.run(argv, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
