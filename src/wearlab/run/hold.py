"""A network held open for people: what `wearlab deploy` (run.deploy) and `wearlab run EXP --hold`
(run.start) share once a network is up with its node kinds running (run.runner: `held_network`,
or the network a run leaves after its last run).

- `claim(name)`: the deployment's name, checked and taken - its state directory STATE/NAME and
  its ledger entry `deploy-NAME` (runtime.ledger: a holder killed with -9 is healed by the next
  command, run.cleanup.heal), both removed on leaving. Every command that acts on a deployment
  finds it there (run.deployments).
- `guest_line(state)`: under uml, a host pseudo-terminal whose other end is the guest's serial
  line 1 (`ssl1=tty:/dev/pts/N` on the guest kernel's command line), with the node-exec hub
  (run.node_exec) on it: opened before the boot, it is how `wearlab exec` and `wearlab shell`
  reach the guest's nodes.
- `hold(state, cell, ...)`: keeps the network until a signal. It begins as a run of `cell` would,
  without the workload (run.runner.begin_hold: the node kinds' run_started, the cell's timeline
  played once), writes the hosts file and `deployment.json` (what `inspect --json` prints,
  docs/deploy.md), serves live control (`wearlab link|radio|handover|top|capture` against
  STATE/NAME, run.control) and runs the node-exec agent, then sleeps until a signal - no thread
  polls but live control's (every 0.1 s, a run's every 20 ms: a held guest leaves its host CPU
  idle) and a watch radio's, when the topology has one; every SERIES_DROP_S it drops what the
  node kinds recorded (a hold writes no results).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pty
import re
import shutil
import signal
import socket
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.errors import InputError, Problem
from wearlab.model.choices import Runtime
from wearlab.model.timeline import LinkChange
from wearlab.plan.plan import CellPlan
from wearlab.run import node_exec
from wearlab.run.deployments import DOC, HOSTS, KIND, SOCKET, STATE, deployments
from wearlab.run.runner import begin_hold, end_hold
from wearlab.run.state import RunState
from wearlab.runtime import ledger

GUEST_LINE = "/dev/ttyS1"            # the guest's end of the hub's line (ssl1)
NAME_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
FORMAT = 1                           # deployment.json's format version (docs/deploy.md)
HELD = "held"                        # written once held, kept until the holder's state is removed
CONTROL_POLL_S = 0.1                 # live control's look for requests (a run's: 0.02 s)
LIVE_S = 2.0                         # live.json (a run's: 0.5 s)
SERIES_DROP_S = 10.0                 # how often a hold drops what its node kinds recorded
WHERE = "<command line>"


def check_name(name: str, field: str = "--name", *, in_use: bool = True) -> None:
    """A usable deployment name and (`in_use`) not in use - asked after healing: a dead holder's
    name is free."""
    if not NAME_RULE.match(name):
        raise InputError([Problem(WHERE, None, field, f"'{name}' is not a usable name (letters, digits, "
                                                       "'-', '_', '.'; at most 63)")])
    if in_use and name in deployments():
        raise InputError([Problem(WHERE, None, field, f"a topology is already deployed as '{name}' "
                                                       f"(`wearlab destroy {name}` first, or --name another)")])


@contextlib.contextmanager
def claim(name: str, field: str = "--name", **facts: Any) -> Iterator[Path]:
    """Take `name` (module doc); yields the state directory. `facts` go into the ledger entry
    (runtime, topology, experiment, run: what `inspect` shows of a deployment still starting)."""
    check_name(name, field)
    state = STATE / name
    if state.exists():   # a leftover no live ledger entry owns
        shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    ledger.record(KIND, name, paths=[str(state)], **facts)
    try:
        yield state
    finally:
        shutil.rmtree(state, ignore_errors=True)
        ledger.forget(KIND, name)


def note(name: str, **facts: Any) -> None:
    """More facts in a claimed name's ledger entry (a held run's results directory, once made)."""
    (entry,) = [e for e in ledger.entries() if e.get("kind") == KIND and e.get("id") == name]
    kept = {k: v for k, v in entry.items() if k not in ("kind", "id", "owner_pid", "owner_start", "_file")}
    ledger.record(KIND, name, **{**kept, **facts})


@contextlib.contextmanager
def guest_line(state: Path, job_dir: Path | None = None) -> Iterator[tuple[list[str], dict[str, str]]]:
    """uml.run_in_guest's `attach`: the hub on a host pty for the guest's serial line 1; yields
    the kernel argument that connects them (module doc)."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    hub = node_exec.Hub(state / SOCKET, node_exec.Stream(master), poke_s=node_exec.POKE_S)
    hub.start()
    try:
        yield [f"ssl1=tty:{os.ttyname(slave)}"], {}
    finally:
        hub.close()
        os.close(slave)
        os.close(master)


def attach_all(attaches: list[Callable]) -> Callable:
    """One `attach` for uml.run_in_guest made of several (the guest line, container nodes, ...):
    their kernel arguments and environments joined, all left when the guest has stopped."""
    @contextlib.contextmanager
    def attach(job_dir: Path):
        with contextlib.ExitStack() as stack:
            args: list[str] = []
            env: dict[str, str] = {}
            for a in attaches:
                more_args, more_env = stack.enter_context(a(job_dir))
                args += more_args
                env.update(more_env)
            yield args, env
    return attach


def hold(state: RunState, cell: CellPlan, *, name: str, state_dir: Path, console: Console, owner_pid: int,
         runtime: Runtime, source: dict[str, Any], sets: list[LinkChange] = (), hub: bool = True,
         started: Callable[[], None] | None = None) -> None:
    """Keep a network with its node kinds until a signal (module doc). `source`: where it came
    from, for deployment.json (topology, experiment, run); `sets`: link changes applied first
    (`--set LINK.KEY=VALUE`); `hub`: the node-exec agent's stream is a socket pair to a hub in this
    process (the host runtime), else the guest's serial line; `started()`: called once it is held."""
    from wearlab.run.control import ControlServer

    links, changes = state.links, state.changes
    for change in sets:
        changes.add(links.apply(change, live=True), change, "live")
    state_dir.mkdir(parents=True, exist_ok=True)
    net = links.net
    hosts = state_dir / HOSTS
    hosts.write_text(hosts_text(net))
    # Live views (top, the exporter) name it by the deployment's name.
    named = dataclasses.replace(state, plan=dataclasses.replace(state.plan, name=name))
    live = ControlServer(state_dir / "control", named, poll_s=CONTROL_POLL_S, live_s=LIVE_S, held=True)
    live.start()
    agent = the_hub = player = None
    pids = {n: net.pid(n) for n in net.topo.nodes if not net.is_container(n)}
    try:
        if hub:
            a, b = socket.socketpair()
            agent = node_exec.Agent(node_exec.Stream(a.detach()), pids.get, hosts, list(net.topo.nodes))
            the_hub = node_exec.Hub(state_dir / SOCKET, node_exec.Stream(b.detach()))
            the_hub.start()
        else:
            agent = node_exec.Agent(node_exec.serial_stream(GUEST_LINE), pids.get, hosts, list(net.topo.nodes))
        agent.start()
        player = begin_hold(state, cell)
        doc = document(state, cell, name=name, state_dir=state_dir, owner_pid=owner_pid, runtime=runtime,
                       source=source)
        tmp = state_dir / f".{DOC}.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(state_dir / DOC)
        (state_dir / HELD).write_text(f"{time.time_ns()}\n")
        kinds = ", ".join(f"{n} ({k.name})" for n, k in state.nodes.items() if k.name != "host")
        what = "holding" if source.get("run") else "deployed"
        console.print(f"{what} {name}: nodes {', '.join(net.topo.nodes)}"
                      + (f"; running {kinds}" if kinds else "")
                      + f"; `wearlab exec NODE -- CMD`, `wearlab shell NODE`, `wearlab inspect`; "
                        f"`wearlab destroy {name}` or Ctrl-C ends it")
        if started is not None:
            started()
        while True:
            # A signal's handler ends the hold from inside this wait. Between waits, what the node
            # kinds recorded is dropped: a hold writes no results, and kept it grows without end
            # (an interface policy's 50 samples a second).
            time.sleep(SERIES_DROP_S)
            drop_series(state)
    finally:
        (state_dir / DOC).unlink(missing_ok=True)
        if player is not None:
            end_hold(state, player)
        if agent is not None:
            agent.stop()
        if the_hub is not None:
            the_hub.close()
        live.stop()


def drop_series(state: RunState) -> None:
    """What the node kinds and live changes recorded since the last call, dropped (a hold
    records no run)."""
    for kind in state.nodes.values():
        try:
            kind.take_series(state.wctx.run_start_ns or time.time_ns())
        except Exception:  # noqa: BLE001 - housekeeping never ends a hold
            pass
    state.changes.take()


def hosts_text(net) -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{net.addresses.address_of(n)} {n}" for n in net.topo.nodes if net.addresses.interfaces[n]]
    return "\n".join(lines) + "\n"


def document(state: RunState, cell: CellPlan, *, name: str, state_dir: Path, owner_pid: int, runtime: Runtime,
             source: dict[str, Any]) -> dict[str, Any]:
    """deployment.json (docs/deploy.md: its format, stable - a field is only ever added)."""
    net, links = state.links.net, state.links
    addr = net.addresses
    nodes = {}
    for n in net.topo.nodes:
        pid = net.pid(n)
        setting = cell.nodes[n]
        nodes[n] = {
            "pid": pid, "netns": f"/proc/{pid}/ns/net", "container": net.is_container(n),
            "address": addr.address_of(n) if addr.interfaces[n] else None,
            "kind": setting.kind.name, "options": {k: _plain(v) for k, v in setting.options.items()},
            "interfaces": [{"name": i.name, "ip": i.ip, "prefix": i.prefix, "mac": i.mac, "peer": i.peer,
                            "peer_ip": i.peer_ip, "link": _link_name(net, i.node, i.peer)}
                           for i in addr.interfaces[n]],
        }
    shapes = links.shapes()
    out_links = []
    for link in net.topo.links:
        ia, ib = addr.interface_to(link.a, link.b), addr.interface_to(link.b, link.a)
        out_links.append({"name": f"{link.a}-{link.b}", "a": link.a, "b": link.b, "a_interface": ia.name,
                          "b_interface": ib.name, "subnet": ia.prefix,
                          "shapes": {d: shapes[d] for d in (f"{link.a}->{link.b}", f"{link.b}->{link.a}")}})
    return {"format": FORMAT, "name": name, "topology": source.get("topology"),
            "experiment": source.get("experiment"), "run": source.get("run"),
            "cell": {"label": cell.label, "values": {k: _plain(v) for k, v in cell.values.items()},
                     "timeline": cell.timeline.name},
            "runtime": runtime.value, "owner_pid": owner_pid, "state": str(state_dir),
            "exec_socket": str(state_dir / SOCKET), "control": str(state_dir / "control"),
            "hosts_file": str(state_dir / HOSTS), "run_id": net.run_id, "nodes": nodes, "links": out_links,
            "interference": state.plan.topology_of(cell).interference.to_record()
            if state.plan.topology_of(cell).interference.couplings else None}


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return str(v)


def _link_name(net, a: str, b: str) -> str:
    link = net.topo.link_between(a, b)
    return f"{link.a}-{link.b}" if link is not None else f"{a}-{b}"
