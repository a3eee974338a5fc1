"""`wearlab exec NODE -- CMD` and `wearlab shell NODE`, the command: which deployment (run.deployments),
which node, and into it - a namespace node over the deployment's node-exec channel (run.node_exec),
a container node with `docker exec`. Kept apart from run.deploy, which builds and holds networks:
stepping into a node imports none of that (the command starts in ~0.3 s, not ~1 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.run import node_exec
from wearlab.run.deployments import pick, read_doc

WHERE = "<command line>"


def node_command(name: str | None, node: str, argv: list[str], *, shell: bool) -> int:
    name, entry = pick(name)
    doc = read_doc(name, entry, wait_s=0)
    if node not in doc["nodes"]:
        raise InputError([Problem(WHERE, None, "NODE", f"no node '{node}' in deployment '{name}' "
                                                         f"(nodes: {', '.join(doc['nodes'])})")])
    if doc["nodes"][node].get("container"):
        return _container_command(name, doc, node, argv, shell=shell)
    env = {k: os.environ[k] for k in ("TERM", "LANG", "LC_ALL") if k in os.environ} if shell else {}
    try:
        return node_exec.run_client(Path(doc["exec_socket"]), node, argv, tty_mode=shell, env=env)
    except LookupError as e:
        raise InputError([Problem(WHERE, None, "NODE", str(e))]) from None
    except (ConnectionError, FileNotFoundError) as e:
        raise EnvironmentProblem(f"deployment '{name}': {e}") from None


def _container_command(name: str, doc: dict[str, Any], node: str, argv: list[str], *, shell: bool) -> int:
    """A container node's command: `docker exec` into it (it runs on the host's Docker under
    either runtime: realize.containers), the terminal's own when `shell` and stdin is one.
    Docker's exit status is the command's (125-127: Docker's own failures)."""
    from wearlab.realize.containers import LABEL, docker

    res = docker("ps", "--no-trunc", "--filter", f"label=wearlab.node={node}",
                 "--format", f'{{{{.ID}}}} {{{{.Label "{LABEL}"}}}}')
    # Its run: the network's (host runtime), or the host process's that booted the guest (uml:
    # containers.for_guest names it g<pid>-...).
    ids = [cid for cid, _, run in (line.partition(" ") for line in res.stdout.splitlines())
           if run == doc.get("run_id") or run.startswith(f"g{doc['owner_pid']}-")]
    if not ids:
        raise EnvironmentProblem(f"deployment '{name}': the container of node '{node}' is not running "
                                 f"(docker ps: {res.stderr.strip() or 'no container with its labels'})")
    if shell and not argv:
        argv = ["sh", "-c", "command -v bash >/dev/null && exec bash -i || exec sh -i"]
    flags = ["-i", *(["-t"] if shell and sys.stdin.isatty() else [])]
    env = ["-e", f"WEARLAB_NODE={node}", *(arg for k in ("TERM", "LANG", "LC_ALL") if shell and k in os.environ
                                            for arg in ("-e", f"{k}={os.environ[k]}"))]
    return subprocess.run(["docker", "exec", *flags, *env, ids[0], *argv], check=False).returncode
