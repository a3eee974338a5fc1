"""Which topologies are deployed (`wearlab deploy`, run.deploy) and where each keeps its state:
what every command that acts on a deployment reads (`inspect`, `exec`, `shell`, `destroy`, a
capture), apart from the code that builds and holds one.

A deployment is a ledger entry `deploy-NAME` (runtime.ledger) owned by its `wearlab deploy`
process (or the `wearlab run EXP --hold` whose network it is held after the runs), listing its
state directory STATE/NAME, which holds DOC (deployment.json, the format of docs/deploy.md), the
node-exec socket and the hosts file, and `control/` (live control, run.control).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.runtime import ledger

STATE = Path(os.environ.get("WEARLAB_DEPLOY_STATE", "/run/wearlab/deploy"))
KIND = "deploy"                      # the ledger entry of a deployment
DOC = "deployment.json"              # what inspect --json prints (docs/deploy.md)
SOCKET = "exec.sock"                 # the hub (run.node_exec)
HOSTS = "hosts"                      # bound over /etc/hosts in every node session
WHERE = "<command line>"


def deployments() -> dict[str, dict[str, Any]]:
    """Live deployments: name -> ledger entry (owner alive)."""
    return {e["id"]: e for e in ledger.entries() if e.get("kind") == KIND and ledger.owner_alive(e)}


def pick(name: str | None) -> tuple[str, dict[str, Any]]:
    """The deployment a command means: `name`, or the only one."""
    live = deployments()
    if name is not None:
        if name not in live:
            listed = f" (deployed: {', '.join(sorted(live))})" if live else " (nothing is deployed)"
            raise InputError([Problem(WHERE, None, "--name", f"no deployment named '{name}'{listed}")])
        return name, live[name]
    if not live:
        raise InputError([Problem(WHERE, None, None, "nothing is deployed; `wearlab deploy TOPOLOGY` deploys one")])
    if len(live) > 1:
        raise InputError([Problem(WHERE, None, "--name", f"several topologies are deployed ({', '.join(sorted(live))}); "
                                                           "give --name")])
    return next(iter(live.items()))


def read_doc(name: str, entry: dict[str, Any], wait_s: float = 0.0) -> dict[str, Any]:
    """deployment.json of a live deployment; waits up to `wait_s` while it is still being built."""
    f = Path(entry["paths"][0]) / DOC
    deadline = time.monotonic() + wait_s
    while not f.exists():
        if time.monotonic() >= deadline or not ledger.owner_alive(entry):
            if entry.get("run"):
                raise EnvironmentProblem(f"'{name}' is held once its experiment's runs are done (results: "
                                         f"{entry['run']}); they still run: try again then")
            raise EnvironmentProblem(f"deployment '{name}' is still starting (no {f} yet); try again in a moment")
        time.sleep(0.1)
    return json.loads(f.read_text())


