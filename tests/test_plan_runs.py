"""The plan is what runs: a RunPlan holds every resolved value of a run and not the experiment it
came from; under the UML runtime the guest runs the host's plan (equal digests, the command
line's flags included) and refuses a plan that differs; the plan's port checks hold per group of
cells (the phone's proxy swept over cproxy plans and runs); `wearlab plan --commands` shows where
a link's delay goes; `wearlab plan --runtime X` says X."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
import typing

import pytest
from pydantic import BaseModel

from conftest import ROOT, wearlab
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.declarations import Catalog
from wearlab.model.experiment import Experiment, ExperimentSpec
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import RunPlan, document_digest, plan

PROXY_SWEEP = ROOT / "experiments" / "proxy-sweep.yaml"


def _types(t) -> list:
    return [t, *[x for a in typing.get_args(t) for x in _types(a)]]


def test_a_run_plan_holds_no_experiment():
    hints = typing.get_type_hints(RunPlan)
    raw = {Experiment, ExperimentSpec}
    for f in dataclasses.fields(RunPlan):
        found = [t for t in _types(hints[f.name]) if isinstance(t, type) and issubclass(t, tuple(raw))]
        assert not found, f"RunPlan.{f.name} holds {found}"
    p = plan(load_experiment(PROXY_SWEEP, CATALOG))
    held = [v for f in dataclasses.fields(p) for v in [getattr(p, f.name)] if isinstance(v, BaseModel)]
    assert not [v for v in held if isinstance(v, tuple(raw))]
    # What the runner reads is the plan's own: the workload's fields, repetitions, timeout, ...
    assert (p.repetitions, p.seed, p.timeout_s, p.fields.client) == (3, 7, 60.0, "watch")


def _sweep(write_yaml, kinds: str):
    return write_yaml("sweep.yaml", f"""\
topology: {ROOT}/topologies/cproxy.yaml
repetitions: 1
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, duration: 1s,
           rate: 300kbit}}
matrix:
  phone.kind: {kinds}
""")


def test_the_phones_proxy_swept_over_cproxy_plans(write_yaml):
    """Every proxy listens on port 20000; cells of different kinds run apart, so that is no clash."""
    exp = _sweep(write_yaml, '[relay, haproxy, "command: ./my-proxy {listen} {upstream}"]')
    p = plan(load_experiment(exp, CATALOG))
    assert [c.nodes["phone"].kind.name for c in p.cells] == ["relay", "haproxy", "command"]
    assert len(p.groups()) == 3
    assert [g["phone"][20000].split()[0] for g in p.ports] == ["relay", "haproxy", "command"]
    assert all(5001 in g["server"] for g in p.ports)
    res = wearlab("plan", str(exp))
    assert res.returncode == 0, res.stderr
    # The shipped example sweeps it too.
    assert {c.nodes["phone"].kind.name for c in plan(load_experiment(PROXY_SWEEP, CATALOG)).cells} == \
        {"relay", "haproxy"}


def test_ports_still_clash_within_a_group(write_yaml):
    """The workload's agents run through every cell: a server kind whose own daemon takes the
    stream agent's port clashes in its cells, located at the matrix value that chose it."""
    nginx = CATALOG.node_kinds["nginx"]

    class Clashing(nginx):
        name = "clash"

        @classmethod
        def ports(cls, settings, needs):
            return {**super().ports(settings, needs), 5001: "clash's own daemon"}

    catalog = Catalog.of([*CATALOG.node_kinds.values(), Clashing], list(CATALOG.workloads.values()),
                         CATALOG.default_kinds)
    exp = write_yaml("e.yaml", """\
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], delay: 5ms}]
workload: {kind: stream, client: watch, server: server, duration: 1s}
matrix:
  server.kind: [nginx, clash]
""")
    with pytest.raises(InputError) as e:
        plan(load_experiment(exp, catalog))
    [problem] = e.value.problems
    assert (problem.line, problem.field) == (6, "matrix[server.kind][1]"), problem
    assert "port 5001 on server is wanted twice: by stream agent and by clash's own daemon" in problem.message


def test_plan_commands_show_where_a_links_delay_goes(write_yaml):
    exp = write_yaml("e.yaml", """\
topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: relay}, server: {role: server}}
  links:
    - {between: [watch, phone], delay: 20ms, rate: 2Mbit}
    - {between: [phone, server], delay: 7ms}
workload: {kind: stream, client: watch, server: server, path: phone, duration: 1s}
""")
    res = wearlab("plan", str(exp), "--commands")
    assert res.returncode == 0, res.stderr
    sections = {s.split(" ", 1)[0]: s for s in res.stdout.split("\n## ")[1:]}
    assert set(sections) == {"watch", "phone", "server"}
    # The topology's numbers, in tc's units: each end shapes what it sends.
    for node, delay_us in (("watch", 20_000), ("phone", 20_000), ("phone", 7_000), ("server", 7_000)):
        assert "netem limit" in sections[node] and f" delay {delay_us}us" in sections[node], sections[node]
    assert "rate 2000000bit" in sections["watch"]
    # The proxy's interception, from the kind: the server's stream port to the proxy's.
    assert "iptables -t nat -A PREROUTING -p tcp -d" in sections["phone"] and "--dport 5001" in sections["phone"]
    assert all(line.startswith(("#", "sysctl ", "ip ", "ethtool ", "tc ", "echo ", "iptables ", "## ")) or not line
               for line in res.stdout.splitlines()), res.stdout


def test_plan_says_the_runtime_asked_for(write_yaml):
    for runtime in ("host", "uml"):
        res = wearlab("plan", str(PROXY_SWEEP), "--runtime", runtime, "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["runtime"] == runtime
    res = wearlab("plan", str(PROXY_SWEEP), "--runtime", "vm")
    assert res.returncode == 2 and "invalid choice: 'vm'" in res.stderr


# -- the UML runtime: the guest runs the host's plan --------------------------------------------


def test_every_flag_of_run_reaches_the_guest_as_data():
    """`wearlab run`'s flags are RunOptions' fields, one for one, and the guest's job carries them
    whole: nothing is re-spelled as a command line for the guest."""
    from wearlab.cli import _parser
    from wearlab.run.start import GuestJob, RunOptions

    args = vars(_parser().parse_args(["run", "x.yaml", "--repetitions", "2", "--set", "size=1KB", "--runtime", "uml"]))
    assert set(args) - {"command"} == set(RunOptions.model_fields)
    opts = RunOptions(**{k: v for k, v in args.items() if k != "command"})
    job = GuestJob(options=opts, results=ROOT, plan_sha256="0" * 64, plan={})
    assert GuestJob.model_validate_json(job.model_dump_json()).options == opts
    assert opts.repetitions == 2 and opts.overrides == ["size=1KB"]


EXPERIMENT = """\
name: guestplan
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 5Mbit, delay: 10ms}]
repetitions: 1
timeout: 30s
workload: {kind: http-get, client: watch, server: server, protocol: http}
matrix: {size: [20KB, 1KB]}
"""


def _runs(out) -> list[dict]:
    with (out / "guestplan" / "latest" / "runs.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.root
def test_the_guest_runs_the_hosts_plan_with_the_command_lines_flags(write_yaml, tmp_path):
    exp = write_yaml("guestplan.yaml", EXPERIMENT)
    out = tmp_path / "results"
    res = wearlab("run", str(exp), "--runtime", "uml", "--out", str(out), "--repetitions", "2", "--set", "size=1KB",
                  timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = _runs(out)
    assert [(r["repetition"], r["size"], r["status"]) for r in rows] == [("1", "1000", "ok"), ("2", "1000", "ok")]
    d = out / "guestplan" / "latest"
    meta = json.loads((d / "metadata.json").read_text())
    assert meta["machine"]["runtime"] == "uml" and meta["machine"].get("uml_guest") is True
    assert meta["plan_sha256"] == meta["host_plan_sha256"] == document_digest(json.loads((d / "plan.json").read_text()))
    assert json.loads((d / "plan.json").read_text())["runtime"] == "uml"


# The host plans, then - while its guest would boot - the experiment file changes (a user's
# editor, a script): the guest plans what it reads, and must refuse to run another plan.
EDIT_BEFORE_THE_GUEST = """\
import sys
from pathlib import Path
from wearlab.runtime import placement

exp = Path(sys.argv[1])
boot = placement.rerun_in_guest

def edited_then_boot(*a, **kw):
    exp.write_text(exp.read_text().replace("delay: 10ms", "delay: 30ms"))
    return boot(*a, **kw)

placement.rerun_in_guest = edited_then_boot
from wearlab.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.root
def test_a_guest_whose_plan_differs_stops_the_run(write_yaml, tmp_path):
    exp = write_yaml("guestplan.yaml", EXPERIMENT)
    out = tmp_path / "results"
    res = subprocess.run([sys.executable, "-c", EDIT_BEFORE_THE_GUEST, str(exp), "run", str(exp), "--runtime", "uml",
                          "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "WEARLAB_PLAIN": "1"})
    said = res.stdout + res.stderr
    assert res.returncode == 2, said[-3000:]
    assert "the plan in the UML guest is not the host's" in said and "differ in: links" in said, said[-3000:]
    assert "Nothing was run" in said
    assert not (out / "guestplan" / "latest" / "runs.csv").exists()


@pytest.mark.netem
def test_the_phones_proxy_sweep_runs(write_yaml, tmp_path):
    """Both proxies, one after the other on port 20000, each carrying the stream."""
    exp = _sweep(write_yaml, "[relay, haproxy]")
    res = wearlab("run", str(exp), "--out", str(tmp_path), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with (tmp_path / "sweep" / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["phone.kind"], r["status"]) for r in rows] == [("relay", "ok"), ("haproxy", "ok")], rows
    assert all(float(r["down_goodput_bps"]) > 100_000 for r in rows), rows
