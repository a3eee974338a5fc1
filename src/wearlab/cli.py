"""The `wearlab` command: run experiments, change and watch them live, compare and export results.

This module only parses and dispatches; each command's work lives where its data does (run/,
report/, runtime/). Exit status: 0 success, 1 an unexpected failure, 2 bad input or a machine
that cannot do what was asked (one line per problem, no traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from wearlab import __version__
from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import LinkAction, Runtime, Shaper, values
from wearlab.model.ports import EXPORTER

# Plain output (no colour, no cursor tricks) when not on a terminal or when a UML host says so.
_PLAIN = {"no_color": True, "force_terminal": False, "width": 120} if os.environ.get("WEARLAB_PLAIN") == "1" else {}
console = Console(highlight=False, soft_wrap=True, **_PLAIN)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, **_PLAIN)
WHERE = "<command line>"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wearlab", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"wearlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an experiment")
    r.add_argument("experiment", type=Path)
    _experiment_options(r)
    r.add_argument("--runtime", choices=values(Runtime), help="where the network lives (default: the experiment's)")
    r.add_argument("--out", type=Path, default=Path("results"), help="results base directory (default: results)")
    r.add_argument("--resume", type=Path, metavar="DIR",
                   help="continue an interrupted run in its results directory (e.g. results/EXP/latest): its "
                        "finished runs are kept, the others run with the same seeds (same experiment and options)")
    r.add_argument("--shard", metavar="I/N",
                   help="run only the I-th of N slices of the plan's runs (the seeds are each run's own, as in one "
                        "run straight through); `wearlab merge` makes one results directory of the N")
    r.add_argument("--hold", action="store_true",
                   help="after the last run, keep the network with its nodes' kinds up as a deployment (`wearlab "
                        "exec`, `shell`, `link`, ...) until `wearlab destroy` or Ctrl-C; the results are written first")
    r.add_argument("--name", help="the held network's name (with --hold; default: the experiment's)")

    rp = sub.add_parser("reproduce", help="run a suite (experiments/seeds/) to the end, resumably: its estimate first, "
                                          "a progress bar with the time left, then `wearlab check` and `wearlab report`")
    rp.add_argument("suite", type=Path, nargs="*", help="directories of experiment files, or files "
                                                          "(default: experiments/seeds)")
    rp.add_argument("--repetitions", type=int, help="every experiment's repetitions (default: each file's tier)")
    rp.add_argument("--only", default="", metavar="PATTERN", help="comma-separated: experiments whose name or file "
                                                                  "matches (wildcards, or a part of it)")
    rp.add_argument("--full", action="store_true", help="the papers' own tier: each file's `full:` "
                                                        "(repetitions, set)")
    rp.add_argument("--out", type=Path, default=Path("results/seeds"), help="results base (default: results/seeds)")
    rp.add_argument("--runtime", choices=values(Runtime), help="where the networks live (default: each experiment's)")
    rp.add_argument("--estimate", action="store_true", help="print the estimate and stop")
    rp.add_argument("--fresh", action="store_true", help="new results directories, even where an earlier run of "
                                                         "the same plan could be resumed")
    rp.add_argument("--slurm", action="store_true", help="submit each experiment as a Slurm job array with its merge, "
                                                         "then the suite's check and report as a job after them")
    rp.add_argument("--tasks", type=int, help="with --slurm: array tasks per experiment (default: one per run, at "
                                              "most 16)")
    rp.add_argument("--builds", action="store_true", help="only what `make` must build for the suite, one per line")

    pl = sub.add_parser("plan", help="what a run of an experiment would be: cells, node settings, links, needs, "
                                     "kernel features, columns (checks it whole, like validate)")
    pl.add_argument("experiment", type=Path)
    _experiment_options(pl)
    pl.add_argument("--json", action="store_true", help="the plan as JSON (what results/.../plan.json holds)")
    pl.add_argument("--builds", action="store_true", help="only what `make` must build for it, one per line "
                                                          "(make experiment asks: tcpcrypt)")
    pl.add_argument("--commands", action="store_true", help="per node, the sysctl, ip, ethtool, tc and iptables "
                                                            "lines a run issues (where a link's delay goes)")
    pl.add_argument("--runtime", choices=values(Runtime), help="as `run` takes it; the plan says the runtime chosen")
    pl.add_argument("--out", type=Path, help="as `run` takes it (ignored)")
    pl.add_argument("--resume", type=Path, metavar="DIR", help="as `run` takes it (ignored)")
    pl.add_argument("--hold", action="store_true", help="as `run` takes it (ignored)")
    pl.add_argument("--shard", metavar="I/N", help="as `run` takes it (ignored)")
    pl.add_argument("--name", help="as `run` takes it (ignored)")

    v = sub.add_parser("validate", help="check topology and experiment files: everything a run would check "
                                        "before it starts, the kernel's features included")
    v.add_argument("files", type=Path, nargs="+")
    v.add_argument("--no-kernel", action="store_true", help="skip the kernel feature check")

    sub.add_parser("doctor", help="what this machine supports and which runtime `auto` picks")
    sub.add_parser("profiles", help="the built-in link profiles, their media, numbers and sources")
    dv = sub.add_parser("devices", help="the devices a node may name (`device:`): per-operation costs, handshake, "
                                        "CPU factor, power figures, each with its source")
    dv.add_argument("names", nargs="*", metavar="NAME", help="show these devices' every number (default: an overview)")
    dv.add_argument("--in", dest="source", type=Path, metavar="FILE",
                    help="also the devices a topology, experiment or devices file defines")
    cb = sub.add_parser("crypto-bench", help="a device's cryptographic operations through wearlab's device mechanism "
                                             "(openssl speed, where experiments compute) beside the papers' tables")
    cb.add_argument("--device", required=True, help="a device (`wearlab devices` lists them)")
    cb.add_argument("--in", dest="source", type=Path, metavar="FILE",
                    help="a topology, experiment or devices file defining the device")
    cb.add_argument("--only", default="", help="comma-separated groups (rsa2048, ecdhp256, sha256, aes-128-gcm, ...)")
    cb.add_argument("--seconds", type=int, default=1, help="openssl speed's time per measurement (default 1)")
    cb.add_argument("--pad", default="sleep", help="how the device's time is made: sleep (default) or spin")
    cb.add_argument("--runtime", choices=values(Runtime), default=Runtime.AUTO.value)
    pt = sub.add_parser("plot", help="(re)draw the plots of results directories")
    pt.add_argument("results", type=Path, nargs="+")
    rpt = sub.add_parser("report", help="an HTML page per results directory (claims beside the paper's, figures, "
                                         "what makes it reproducible) and an index of them")
    rpt.add_argument("results", type=Path, nargs="+", metavar="RESULTS", help="results directories: a run, an "
                     "experiment's (its latest), or a suite's (each experiment's latest)")
    rpt.add_argument("--out", type=Path, default=Path("results/report"),
                     help="where the pages go (default: results/report)")
    pg = sub.add_parser("page", help="pages as data (experiments/pages/): import a browser's HAR, check page files")
    pgs = pg.add_subparsers(dest="page_cmd", required=True)
    pgi = pgs.add_parser("import", help="a browser's HAR (developer tools: save all as HAR) as a page file")
    pgi.add_argument("har", metavar="FILE.har")
    pgi.add_argument("-o", "--out", help="the page file to write (default: the YAML to standard output)")
    pgi.add_argument("--name", help="the page's name (default: from the HAR)")
    pgc = pgs.add_parser("check", help="check page files and summarise them (objects, origins, bytes, critical path)")
    pgc.add_argument("files", nargs="+", metavar="FILE")
    sub.add_parser("kinds", help="node kinds and workload kinds, with their options and parameters")
    sub.add_parser("clean", help="remove everything wearlab made (namespaces, processes, guests), live runs too")

    sb = sub.add_parser("submit", help="an experiment as a Slurm job array (or a Kubernetes Indexed Job), one shard "
                                       "per task, and a merge job after it (the scripts are written first)")
    sb.add_argument("experiment", type=Path)
    where = sb.add_mutually_exclusive_group(required=True)
    where.add_argument("--slurm", action="store_true", help="submit to Slurm (sbatch)")
    where.add_argument("--k8s", action="store_true", help="print the shards as a Kubernetes Indexed Job and its "
                                                           "merge Job (not applied)")
    sb.add_argument("--tasks", type=int, help="array tasks = shards (default: one per run, at most 16)")
    sb.add_argument("--partition", help="sbatch --partition")
    sb.add_argument("--time", help="sbatch --time per task, e.g. 30:00")
    sb.add_argument("--dry-run", action="store_true", help="write and print the scripts, submit nothing")
    sb.add_argument("--out", type=Path, default=Path("results"), help="results base directory (default: results)")
    sb.add_argument("--runtime", choices=values(Runtime), help="as `run` takes it")
    _experiment_options(sb)
    st = sub.add_parser("status", help="a Slurm submission's progress: each shard's runs, the jobs, the merge")
    st.add_argument("submission", type=Path, metavar="DIR", help="the directory `wearlab submit` printed")

    mg = sub.add_parser("merge", help="one results directory from the shards of one experiment (`run --shard I/N`): "
                                      "runs, series, summary, claims; exit 1 when runs are missing")
    mg.add_argument("out", type=Path, metavar="OUT", help="the merged results directory (new or empty)")
    mg.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR")

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

    ck = sub.add_parser("check", help="are the experiments' claims (expect:) reproduced by their runs? "
                                      "(exit 1 when a calibration or prediction is not; runs from a noisy shard are "
                                      "flagged, not re-judged)")
    ck.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                    help="results directories: a run, an experiment's (its latest), or a suite's (each experiment's latest)")
    ck.add_argument("--json", action="store_true", help="print the verdicts as JSON (claims.json of each directory)")

    lk = sub.add_parser("link", help="show or change the links of a running experiment (live)")
    lk.add_argument("action", choices=values(LinkAction))
    lk.add_argument("link", nargs="?", help="a link, e.g. watch-phone (reset without one: every link)")
    lk.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="for set: delay=60ms rate=500kbit loss=1%% ...")
    lk.add_argument("--direction", metavar="A->B", help="one direction only (default: both)")
    _results_option(lk)

    tp = sub.add_parser("top", help="a live view of a running experiment (OWD, goodput, queues, radio, links)")
    _results_option(tp)
    tp.add_argument("--once", action="store_true", help="print one frame and exit")

    ex = sub.add_parser("exporter", help="serve Prometheus metrics of the experiments running under a results directory")
    ex.add_argument("--results", type=Path, default=None,
                    help="a results directory or base (default: results; /run/wearlab/deploy: every deployment)")
    ex.add_argument("--name", help="a deployment (wearlab deploy, run --hold) instead of a run")
    ex.add_argument("--listen", default=f"127.0.0.1:{EXPORTER}", help=f"address:port (default 127.0.0.1:{EXPORTER})")
    ex.add_argument("--once", action="store_true", help="print the metrics once and exit")

    rd = sub.add_parser("radio", help="force a running experiment's BT radio to sleep or wake (wearable kind, radio: bt)")
    rd.add_argument("action", choices=("show", "sleep", "wake"))
    rd.add_argument("--node", help="the wearable (default: the only one with a radio)")
    _results_option(rd)

    ho = sub.add_parser("handover", help="start a running experiment's walk-away now (wearable kind, walk_start: manual)")
    ho.add_argument("action", choices=("now",))
    ho.add_argument("--node", help="the wearable (default: the only one with a handover)")
    _results_option(ho)

    dp = sub.add_parser("deploy", help="build a topology (or an experiment's) with its nodes' kinds running and keep "
                                       "it up until `wearlab destroy` or Ctrl-C (then `wearlab exec NODE -- CMD`, "
                                       "`wearlab shell NODE`, `wearlab inspect`)")
    dp.add_argument("file", type=Path, metavar="TOPOLOGY|EXPERIMENT",
                    help="a topology file, or an experiment file (its first cell's node settings and timeline)")
    dp.add_argument("--name", help="the deployment's name (default: the topology's or the experiment's)")
    dp.add_argument("--runtime", choices=values(Runtime), default=None,
                    help="where the network lives (default: auto; an experiment's own)")
    dp.add_argument("--shaper", choices=values(Shaper), default=Shaper.NETEM.value,
                    help="rate shaping by netem's own rate (default) or an htb class above netem")
    dp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="LINK.KEY=VALUE changes a link's shaping (--set watch-phone.delay=50ms), NODE.OPTION=VALUE a "
                         "node's kind or option (--set phone.kind=haproxy); for an experiment, also its parameters "
                         "as `run --set` (the first cell left is deployed); repeatable")
    ds = sub.add_parser("destroy", help="end a deployed topology (removes everything it made)")
    ds.add_argument("name", nargs="?", help="the deployment (default: the only one)")
    ins = sub.add_parser("inspect", help="what is deployed: names, nodes, interfaces, addresses, links and shapes")
    ins.add_argument("--name", help="one deployment (default: all)")
    ins.add_argument("--json", action="store_true", help="as JSON (docs/deploy.md describes it)")
    nx = sub.add_parser("exec", help="run a command in a node of a deployed topology: wearlab exec NODE -- CMD "
                                     "(stdin, stdout, stderr passed through; its exit status)")
    nx.add_argument("--name", help="the deployment (default: the only one)")
    nx.add_argument("node")
    nx.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD")
    sh = sub.add_parser("shell", help="an interactive shell in a node of a deployed topology (a real terminal)")
    sh.add_argument("--name", help="the deployment (default: the only one)")
    sh.add_argument("node")

    _add_capture_parser(sub)
    _add_decrypt_parser(sub)

    # `runtime-exec` runs a command in the runtime (the UML guest here), outside every node; `exec
    # NODE -- CMD` (a command in one node of a deployed topology) is a different verb.
    e = sub.add_parser("runtime-exec", help="run a command in the runtime where the emulated network would live "
                                            "(a fresh UML guest where the host lacks netem), outside every node")
    e.add_argument("--runtime", choices=values(Runtime), default=Runtime.AUTO.value)
    e.add_argument("argv", nargs=argparse.REMAINDER)

    # Internal: a `wearlab run`'s job inside the UML guest its host booted (run.start). Left out
    # of the help: nobody types it.
    g = sub.add_parser("guest-run")
    g.add_argument("job", type=Path)
    gd = sub.add_parser("guest-deploy")   # internal too: `wearlab deploy`'s job in its guest (run.deploy)
    gd.add_argument("job", type=Path)
    sub.metavar = "{" + ",".join(c for c in sub.choices if c not in ("guest-run", "guest-deploy")) + "}"
    return p


# -- wearlab capture (run/live_capture.py) ------------------------------------------------------

def _add_capture_parser(sub) -> None:
    cp = sub.add_parser("capture", help="one pcapng stream of a live topology's interfaces, to a file or to "
                                        "stdout: wearlab capture watch-phone -w - | wireshark -k -i -")
    cp.add_argument("targets", nargs="*", metavar="NODE[:IF] | LINK",
                    help="a node (all its interfaces), NODE:IF (IF: eth0, a peer node or a link), a link "
                         "(a-b: both ends); none: every interface")
    cp.add_argument("-w", dest="write", default="-", metavar="FILE|-", help="where the pcapng goes (default -: stdout)")
    cp.add_argument("--name", help="a deployed topology (default: the experiment running under --results, "
                                   "else the only deployment)")
    cp.add_argument("--results", type=Path, help="the running experiment's results directory (default: results)")
    cp.add_argument("-c", "--count", type=int, help="stop after this many packets")
    cp.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    cp.add_argument("-s", "--snaplen", type=int, default=0, help="bytes kept of each packet (default: all)")
    cp.add_argument("-f", "--filter", default="", metavar="BPF", help="a tcpdump filter, e.g. 'tcp port 80'")


def _capture(args: argparse.Namespace) -> int:
    from wearlab.run import control, live_capture

    _positive(args.count, "--count")
    if args.duration is not None and args.duration <= 0:
        raise InputError([Problem(WHERE, None, "--duration", f"must be positive, got {args.duration:g}")])
    results = _live_dir(args.results, args.name)
    return live_capture.capture(lambda req: control.request(results, req), args.targets, args.write,
                                count=args.count, duration=args.duration, snaplen=args.snaplen, bpf=args.filter,
                                say=lambda m: err_console.print(escape(m)))


# -- wearlab decrypt (report/decrypt.py) ---------------------------------------------------------

def _add_decrypt_parser(sub) -> None:
    dc = sub.add_parser("decrypt", help="the application bytes of a results directory's tcpcrypt connections, from "
                                        "its captures and the key logs of nodes with tcpcrypt_key_log: true")
    dc.add_argument("results", type=Path, metavar="RESULTS", help="a results directory (or an experiment's: its latest)")
    dc.add_argument("--run", type=int, metavar="N", help="only run N's connections (runs.csv's run)")
    dc.add_argument("--pcap", type=Path, action="append", default=[], metavar="FILE",
                    help="a capture to decrypt instead of the results' captures/ (e.g. `wearlab capture -w FILE` "
                         "of the run); repeatable")
    dc.add_argument("--out", type=Path, metavar="DIR", help="write each connection's bytes raw to "
                    "DIR/<capture>/conn<N>-a2b.bin and -b2a.bin instead of printing them escaped")
    dc.add_argument("--port", type=int, metavar="P", help="only connections with port P at either end")


def _decrypt(args: argparse.Namespace) -> int:
    from wearlab.report.check import find_results
    from wearlab.report.decrypt import decrypt

    _positive(args.run, "--run")
    found = find_results([args.results])
    if len(found) != 1:
        raise InputError([Problem(WHERE, None, "RESULTS", f"{args.results} holds {len(found)} results directories "
                                                          f"({', '.join(map(str, found))}): give one")])
    return decrypt(found[0], run=args.run, pcaps=args.pcap, out=args.out, port=args.port,
                   write=lambda line: print(line, flush=True))


def _experiment_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repetitions", type=int, help="override the experiment's repetitions")
    p.add_argument("--shaper", choices=values(Shaper), default=Shaper.NETEM.value,
                   help="rate shaping by netem's own rate (default) or an htb class above netem")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a workload parameter, a node setting (node.option) or a link's "
                        "(link.<link>.<field>), e.g. --set size=1KB --set phone.kind=haproxy "
                        "--set link.watch-ap.rate=5Mbit; repeatable")


def _results_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=None,
                   help="the running experiment's results directory (default: the one live under results/, else "
                        "the only deployment)")
    p.add_argument("--name", help="a deployment (wearlab deploy, run --hold) instead of a running experiment")


def _live_dir(results: Path | None, name: str | None, *, fallback: bool = True) -> Path:
    """Where a live command asks: a deployment's state directory (`--name`, or - with no
    `--results` and no run live under results/ - the only deployment), else the results directory."""
    from wearlab.report.live_record import live_runs
    from wearlab.run import deployments

    if name is not None:
        return deployments.STATE / deployments.pick(name)[0]
    if results is None and fallback and not live_runs(Path("results")) and deployments.deployments():
        return deployments.STATE / deployments.pick(None)[0]
    return results or Path("results")



def _catalog():
    """The one catalog (wearlab.catalog), imported by the commands that plan: it imports every
    node kind and workload (~0.25 s), which `exec`, `shell`, `top` or `destroy` need not wait for."""
    from wearlab.catalog import CATALOG

    return CATALOG

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    os.environ.setdefault("WEARLAB_ARGV", shlex.join(["wearlab", *argv]))
    try:
        return dispatch(args)
    except InputError as e:
        for p in e.problems:   # escaped: a field such as cells[phone.kind] is no rich markup
            err_console.print(f"[red]error:[/red] {escape(str(p))}")
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


def _check_pairs(pairs: list[str]) -> None:
    bad = [Problem(WHERE, None, "--set", f"'{p}' is not KEY=VALUE") for p in pairs
           if not p.partition("=")[1] or not p.partition("=")[0].strip()]
    if bad:
        raise InputError(bad)


def _positive(value: int | None, field: str) -> None:
    if value is not None and value < 1:
        raise InputError([Problem(WHERE, None, field, f"must be at least 1, got {value}")])


def dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd in ("run", "plan", "submit"):
        _positive(args.repetitions, "--repetitions")
        _check_pairs(args.overrides)
    if cmd == "run":
        from wearlab.run.start import RunOptions, run_command

        # Every flag of `run` is a field of RunOptions (it refuses any other): what reaches the UML
        # guest is that object whole, so a flag added here and there reaches it too.
        opts = RunOptions(**{k: v for k, v in vars(args).items() if k != "command"})
        return run_command(opts, _catalog(), console, err_console)
    if cmd == "reproduce":
        from wearlab.run.reproduce import DEFAULT_SUITE, reproduce

        _positive(args.repetitions, "--repetitions")
        return reproduce(args.suite or [DEFAULT_SUITE], _catalog(), console, only=[o.strip() for o in args.only.split(",")
                                                                                if o.strip()],
                         full=args.full, repetitions=args.repetitions, out=args.out, runtime=args.runtime,
                         estimate_only=args.estimate, fresh=args.fresh, builds=args.builds, slurm=args.slurm,
                         tasks=args.tasks)
    if cmd == "guest-run":
        from wearlab.run.start import run_guest_job

        return run_guest_job(args.job, _catalog(), console, err_console)
    if cmd == "plan":
        from wearlab.run.validate import show_plan

        return show_plan(args.experiment, _catalog(), console, as_json=args.json, builds=args.builds,
                         commands=args.commands, overrides=args.overrides, repetitions=args.repetitions,
                         runtime=args.runtime, shaper=args.shaper)
    if cmd == "validate":
        from wearlab.run.validate import validate

        return validate(args.files, _catalog(), console, kernel=not args.no_kernel)
    if cmd == "doctor":
        from wearlab.runtime.doctor import doctor

        return doctor(console)
    if cmd in ("exec", "shell"):
        from wearlab.run.node_command import node_command

        argv = args.argv[1:] if cmd == "exec" and args.argv[:1] == ["--"] else getattr(args, "argv", [])
        if cmd == "exec" and not argv:
            raise InputError([Problem(WHERE, None, "exec", "give a command after --, e.g. wearlab exec watch -- ping server")])
        return node_command(args.name, args.node, argv, shell=cmd == "shell")
    if cmd in ("deploy", "guest-deploy", "destroy", "inspect"):
        from wearlab.run import deploy

        if cmd == "deploy":
            opts = deploy.DeployOptions(**{k: v for k, v in vars(args).items() if k != "command"})
            return deploy.deploy_command(opts, _catalog(), console, err_console)
        if cmd == "guest-deploy":
            return deploy.guest_deploy(args.job, _catalog(), console, err_console)
        if cmd == "destroy":
            return deploy.destroy(args.name, console, err_console)
        return deploy.inspect(args.name, args.json, console, err_console)
    if cmd == "capture":
        return _capture(args)
    if cmd == "decrypt":
        return _decrypt(args)
    if cmd == "runtime-exec":
        from wearlab.runtime.placement import exec_where_network_lives

        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not argv:
            raise InputError([Problem(WHERE, None, "runtime-exec", "give a command after --")])
        return exec_where_network_lives(argv, args.runtime, err_console.print)
    if cmd == "clean":
        from wearlab.run.cleanup import clean

        removed = clean()
        for line in removed:
            console.print(f"removed: {line}")
        if not removed:
            console.print("nothing to clean")
        return 0
    if cmd == "crypto-bench":
        from wearlab.run.cryptobench import crypto_bench

        only = [g.strip() for g in args.only.split(",") if g.strip()]
        return crypto_bench(args.device, args.source, only, args.seconds, args.pad, args.runtime, _catalog(), console)
    if cmd in ("link", "radio", "handover"):
        from wearlab.run import remote

        results = _live_dir(args.results, args.name)
        if cmd == "link":
            return remote.link(results, args.action, args.link, args.settings, args.direction, console)
        return remote.node_action(results, cmd, args.action, args.node, console)
    from wearlab.report import terminal

    if cmd == "profiles":
        return terminal.profiles(console)
    if cmd == "devices":
        from wearlab.report.device_table import devices

        return devices(args.names, args.source, _catalog(), console)
    if cmd == "kinds":
        return terminal.kinds(_catalog(), console)
    if cmd == "page":
        from wearlab.report.page_commands import page_check, page_import

        if args.page_cmd == "import":   # the YAML may go to stdout: the notes go to stderr then
            return page_import(args.har, args.out, err_console if args.out is None else console, name=args.name)
        return page_check(args.files, console)
    if cmd == "plot":
        return terminal.plot(args.results, console)
    if cmd == "report":
        return terminal.report(args.results, args.out, console)
    if cmd == "top":
        return terminal.top(_live_dir(args.results, args.name), args.once, console)
    if cmd == "exporter":
        # A base of several runs: deployments only when named (or given as --results).
        return terminal.exporter(_live_dir(args.results, args.name, fallback=False), args.listen, args.once, console)
    if cmd == "check":
        from wearlab.report.check import check_command

        return check_command(args.results, as_json=args.json, console=console, err_console=err_console)
    if cmd == "submit":
        from wearlab.plan.plan import plan
        from wearlab.run.start import RunOptions
        from wearlab.run.submit import SlurmRequest, submit

        _positive(args.tasks, "--tasks")
        opts = RunOptions(experiment=args.experiment, runtime=args.runtime, repetitions=args.repetitions,
                          shaper=args.shaper, overrides=args.overrides)
        p = plan(opts.load(_catalog()), opts.shaper)   # bad input: exit 2 here, before anything is written
        run_args = [*(["--runtime", args.runtime] if args.runtime else []),
                    *(["--repetitions", str(args.repetitions)] if args.repetitions else []),
                    *(["--shaper", args.shaper] if args.shaper != Shaper.NETEM.value else []),
                    *[a for kv in args.overrides for a in ("--set", kv)]]
        req = SlurmRequest(experiment=args.experiment, runs=len(p.cells) * p.repetitions, experiment_name=p.name,
                           tasks=args.tasks, partition=args.partition, time=args.time, run_args=tuple(run_args))
        if args.k8s:
            from wearlab.run.submit import k8s_manifest

            print(k8s_manifest(req, Path.cwd()), end="")
            return 0
        return submit(req, args.out, console, dry_run=args.dry_run)
    if cmd == "status":
        from wearlab.run.submit import status

        return status(args.submission, console)
    if cmd == "merge":
        from wearlab.report.merge import merge

        return merge(args.out, args.shards, console)
    if cmd == "compare":
        return terminal.compare(args.baseline, args.candidate, alpha=args.alpha, threshold=args.threshold,
                                metric_thresholds=args.metric_threshold, metrics=args.metric,
                                thresholds=args.thresholds,
                                outputs={"markdown": args.markdown, "junit": args.junit, "json": args.json},
                                console=console)
    raise AssertionError(f"unhandled command {cmd}")


if __name__ == "__main__":
    sys.exit(main())
