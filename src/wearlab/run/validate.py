"""`wearlab validate` and `wearlab plan`: an experiment checked whole without running it.

validate = load + plan (every cross-check, with file:line:field) + the kernel features the plan
needs, checked on the kernel the network would live on. It never says `ok` for a file whose run
would fail on its input. `wearlab plan EXP` prints what the run would be (the plan.json that
every results directory holds), with the runtime it would choose; `--commands` the lines it would
issue in each node (plan.commands, which realize.netns executes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import Evidence, Runtime
from wearlab.model.declarations import Catalog
from wearlab.model.experiment_file import load_experiment
from wearlab.model.features import OPTIONAL
from wearlab.model.link_settings import is_link_key
from wearlab.model.topology import load_topology
from wearlab.model.yamlsrc import load_yaml
from wearlab.plan.commands import run_commands
from wearlab.plan.plan import RunPlan, plan
from wearlab.run.start import overrides_of
from wearlab.runtime import doctor, placement


def validate(files: list[Path], catalog: Catalog, console: Console, *, kernel: bool = True) -> int:
    problems: list[Problem] = []
    for f in files:
        try:
            data = load_yaml(f).data
            # A topology has nodes; an experiment has a workload (it may inline a topology).
            if isinstance(data, dict) and "nodes" in data and "workload" not in data:
                load_topology(f, catalog)
                console.print(f"ok: {f}")
                continue
            p = plan(load_experiment(f, catalog))
            said = _kernel_check(p, f) if kernel else "kernel not checked"
            if isinstance(said, Problem):
                problems.append(said)
            else:
                console.print(f"ok: {f} ({len(p.cells)} cells{_excluded(p.to_document())}; {said})")
        except InputError as e:
            problems += e.problems
    if problems:
        raise InputError(problems)
    return 0


def _excluded(doc: dict) -> str:
    """" (6 excluded by matrix.exclude)" where the experiment leaves combinations out, else nothing."""
    return f" ({len(doc['excluded'])} excluded by matrix.exclude)" if "excluded" in doc else ""


def _kernel_check(p: RunPlan, file: Path) -> str | Problem:
    needed = frozenset(f for f in p.features if f not in OPTIONAL)
    if os.geteuid() != 0:
        return "kernel features not checked: that needs root"
    try:
        runtime, _ = placement.choose(p.runtime)
        missing = doctor.missing_features(needed, runtime)
    except EnvironmentProblem as e:
        return Problem(str(file), None, "runtime", str(e))
    if missing:
        return Problem(str(file), None, "runtime", f"runtime {runtime.value}: the kernel lacks {', '.join(missing)}")
    return f"runtime {runtime.value} has {', '.join(sorted(f.value for f in needed)) or 'all it needs'}"


def show_plan(file: Path, catalog: Catalog, console: Console, *, as_json: bool = False, builds: bool = False,
              commands: bool = False, overrides: list[str] = (), repetitions: int | None = None,
              runtime: str | None = None, shaper: str = "netem") -> int:
    p = plan(load_experiment(file, catalog, repetitions=repetitions, runtime=runtime,
                             overrides=overrides_of(list(overrides))), shaper)
    if builds:
        for b in p.builds():
            print(b)
        return 0
    p, undecided = _placed(p)
    if commands:
        _print_commands(p, undecided)
        return 0
    doc = p.to_document()
    if as_json:
        console.print_json(json.dumps(doc))
        return 0
    console.print(f"[bold]{doc['experiment']}[/bold]: {doc['workload']} {doc['endpoints']}, {len(doc['cells'])} cells"
                  f"{_excluded(doc)} x {doc['repetitions']} = {doc['runs']} runs, seed {doc['seed']}, runtime {doc['runtime']}"
                  f"{f' ({undecided})' if undecided else ''}, shaper {doc['shaper']}")
    console.print(f"kernel features: {', '.join(doc['features']) or 'none'}")
    t = Table(title="cells", title_justify="left")
    swept_links = any("links" in c for c in doc["cells"])
    for col in ("cell", "group", "values", "timeline", "node settings that vary",
                *(("link settings",) if swept_links else ())):
        t.add_column(col)
    # Per node, only the settings whose value differs between cells (a swept policy, not the node's
    # twenty settings that every cell shares); the node's kind always names it.
    varying: dict[str, list[str]] = {}
    for n in p.topology.nodes:
        docs = [c["nodes"].get(n, {}) for c in doc["cells"]]
        keys = [k for k in dict.fromkeys(k for d in docs for k in d)
                if len({json.dumps(d.get(k), sort_keys=True, default=str) for d in docs}) > 1]
        if keys:
            varying[n] = keys
    for c in doc["cells"]:
        nodes = "; ".join(f"{n}: {s['kind']}" + "".join(f" {k}={s.get(k)}" for k in varying[n] if k != "kind")
                          for n, s in c["nodes"].items() if n in varying)
        links = " ".join(f"{k}={v}" for k, v in c["values"].items() if is_link_key(k))
        t.add_row(str(c["cell"]), str(c["group"]), c["label"], c["timeline"], nodes or "-",
                  *((links or "-",) if swept_links else ()))
    console.print(t)
    lt = Table(title="links", title_justify="left")
    for col in ("link", "medium", "profile", "shaper", "forward", "reverse"):
        lt.add_column(col)
    for lp in p.network.links:
        l = lp.link
        lt.add_row(l.name, l.medium.value if l.medium else "-", l.profile or "-", lp.shaper.value,
                   _shape(l.forward.to_document()), _shape(l.reverse.to_document()))
    console.print(lt)
    nt = Table(title="needs and ports", title_justify="left")
    for col in ("node", "needs", "ports"):
        nt.add_column(col)
    groups = len(doc["ports"])
    for n in p.topology.nodes:
        needs = [f"{x['need']} " + " ".join(f"{k}={_brief(v)}" for k, v in x.items() if k not in ("node", "need"))
                 for x in doc["needs"] if x["node"] == n]
        where: dict[str, list[int]] = {}   # "port what" -> the groups of cells it is used in
        for g, group in enumerate(doc["ports"]):
            for port, what in group.get(n, {}).items():
                where.setdefault(f"{port} {what}", []).append(g)
        ports = [use if len(gs) == groups else f"{use} (group{'s' if len(gs) > 1 else ''} {', '.join(map(str, gs))})"
                 for use, gs in where.items()]
        nt.add_row(n, "\n".join(needs) or "-", "\n".join(ports) or "-")
    console.print(nt)
    console.print(f"columns: {', '.join(doc['columns']['params'])} | {len(doc['columns']['metrics'])} metrics | "
                  f"series: {', '.join(doc['columns']['series']) or 'none'}")
    devices = "; ".join(f"{n}: {d.name} (handshake {d.handshake.shown()}, CPU factor {d.cpu_factor.value:g})"
                        for n, d in sorted(p.devices.items()))
    none = "none (every node computes at this machine's speed)"
    console.print(f"devices: {devices or none}")
    kinds = ", ".join(f"{sum(1 for c in p.claims if c.evidence == e)} {e.value}" for e in Evidence
                      if any(c.evidence == e for c in p.claims))
    console.print(f"claims (expect:, `wearlab check` scores them): {len(p.claims)}{f' ({kinds})' if kinds else ''}")
    if p.key_log_nodes():
        console.print(f"[bold red]tcpcrypt key log on {', '.join(p.key_log_nodes())} (tcpcrypt_key_log: true): the "
                      "results will hold session keys (wearlab decrypt)[/bold red]")
    return 0


def _placed(p: RunPlan) -> tuple[RunPlan, str]:
    """The plan with the runtime a run would choose, and why it is still `auto` when it is."""
    if p.runtime == Runtime.AUTO and os.geteuid() != 0:
        return p, "decided when it runs: finding whether netem works here needs root"
    try:
        return p.placed(placement.choose(p.runtime)[0]), ""
    except EnvironmentProblem as e:   # auto, and neither runtime can run it here
        return p, f"nothing can run it here: {e}"


def _print_commands(p: RunPlan, undecided: str) -> None:
    """Per node, the lines a run issues (plain text: brackets and all, as the shell sees them)."""
    print(f"# {p.name}: what a run issues in each node, in order (runtime {p.runtime.value}"
          f"{f': {undecided}' if undecided else ''}). The ip and tc lines go through `ip -batch` and "
          f"`tc -batch`; netem's `seed` is left out where the kernel's netem takes none.")
    for node, parts in run_commands(p).items():
        print(f"\n## {node} ({p.topology.nodes[node].role.value})")
        for when, lines in parts:
            print(f"# {when}")
            for line in lines:
                print(line)


def _shape(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items() if v not in (None, "0s", False))


def _brief(value) -> str:
    """A need's value for the table: a long list (a page's objects) by its length; plan.json has it whole."""
    return f"[{len(value)} items]" if isinstance(value, list) and len(value) > 3 else str(value)
