"""Container nodes: a topology node with `image:` runs as a Docker container of that image
(Containernet's and containerlab's idea), joined to the emulated network by the same shaped links.

A container node has two faces:
- its **network namespace** (the container's own, `--network none`: Docker gives it only `lo`, so
  nothing of Docker's addressing collides with wearlab's). wearlab configures and measures it like
  any node, with the host's own tools (`nsenter -n`: ip, tc, ethtool, ss), so a tc that knows
  every netem option is used whatever the image ships;
- its **software**, the image's programs (nginx in images/server-nginx), started by the node's
  kind with `Network.run_app` (`docker exec`). The run's work directory is bind-mounted at the
  same path, so generated configuration and content are where the kind wrote them.

Where the network lives in a UML guest (no netem on the host), the container stays on the host:
each of its links is a host veth pair, one end in the container, the other handed to the guest by
UML's vector driver (`vecN:transport=raw,ifname=...`). The guest moves `vecN` into the peer node's
namespace and patches it (tc mirred, both ways) to a veth pair whose far end is the peer's planned
interface; both directions are shaped there, each on an egress: the peer's own interface, and the
patch veth for what the container sends (so the peer's interface sees it after its delay). The guest reaches
the container's two faces through a bridge of request files in the shared job directory, served by
the host process that booted it (`Bridge`).

Clean-up: every container carries the label `wearlab.run=<run id>` and is in the ledger, so
`wearlab clean` removes them after a kill -9; host veths vanish with the container's namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem
from wearlab.runtime import ledger

LABEL = "wearlab.run"
# Environment that tells the guest which nodes are containers on the host (JSON), and where the
# files shared with the host live.
ENV = "WEARLAB_CONTAINERS"
SHARED_ENV = "WEARLAB_SHARED_DIR"


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise EnvironmentProblem("a node of this topology runs as a container (image:), but the `docker` command "
                                 "is not installed: apt-get install docker.io (or `make up`)") from None


def check_docker() -> None:
    """Docker's CLI answers and its daemon runs; EnvironmentProblem (exit 2) naming the fix otherwise."""
    res = docker("version", "--format", "{{.Server.Version}}", timeout=20)
    if res.returncode != 0:
        raise EnvironmentProblem("a node of this topology runs as a container (image:), but Docker's daemon does not "
                                 f"answer ({res.stderr.strip().splitlines()[-1] if res.stderr.strip() else 'no answer'}): "
                                 "start it (`dockerd &` or `systemctl start docker`), or `make up`")


def check_images(images: dict[str, str]) -> None:
    """Every node's image exists locally (no registry is pulled from)."""
    missing = [f"{img} (node {node})" for node, img in images.items()
               if docker("image", "inspect", "--format", "{{.Id}}", img).returncode != 0]
    if missing:
        raise EnvironmentProblem(f"image not found locally: {', '.join(missing)}; build wearlab's images with "
                                 "`make images` (wearlab never pulls from a registry)")


@dataclass
class Container:
    node: str
    image: str
    id: str
    pid: int          # host PID of its init: the handle on its network namespace


def start(images: dict[str, str], run_id: str, mounts: list[Path]) -> dict[str, Container]:
    """One container per node, no network but `lo`, the given host paths mounted at the same paths.
    Raises EnvironmentProblem (after removing what it started) when one does not come up."""
    check_docker()
    check_images(images)
    ledger.record("container", run_id, label=f"{LABEL}={run_id}")
    out: dict[str, Container] = {}
    try:
        for node, image in images.items():
            args = ["run", "-d", "--init", "--network", "none", "--label", f"{LABEL}={run_id}",
                    "--label", f"wearlab.node={node}", "--name", f"wearlab-{run_id}-{node}", "--hostname", node]
            for m in mounts:
                args += ["-v", f"{m}:{m}"]
            res = docker(*args, image)
            if res.returncode != 0:
                raise EnvironmentProblem(f"node {node}: docker could not start image {image}: {res.stderr.strip()}")
            cid = res.stdout.strip()
            out[node] = Container(node, image, cid, _running_pid(node, cid))
        return out
    except BaseException:
        remove(run_id)
        raise


def _running_pid(node: str, cid: str, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while True:
        res = docker("inspect", "--format", "{{.State.Running}} {{.State.Pid}} {{.State.ExitCode}}", cid)
        running, pid, code = (res.stdout.split() + ["", "", ""])[:3]
        if running == "true" and int(pid) > 0:
            return int(pid)
        if running == "false" or time.monotonic() > deadline:
            logs = docker("logs", "--tail", "5", cid)
            tail = (logs.stdout + logs.stderr).strip().replace("\n", " | ")
            raise EnvironmentProblem(f"node {node}: its container exited at start (status {code or '?'})"
                                     + (f": {tail}" if tail else "") + "; its image must keep running (e.g. CMD sleep infinity)")
        time.sleep(0.05)


def remove(run_id: str | None = None) -> list[str]:
    """Remove the containers of one run (or of every wearlab run): only those with our label, and
    the host veths the ledger lists for them (a veth whose peer sat in a removed container goes
    only when the kernel gets round to destroying that namespace: seconds later, or more)."""
    veths = [v for e in ledger.entries() if e.get("kind") == "container"
             and (run_id is None or e.get("id") == run_id) for v in e.get("veths", [])]
    ids: list[str] = []
    if shutil.which("docker") is not None:
        flt = f"label={LABEL}" + (f"={run_id}" if run_id else "")
        res = docker("ps", "-aq", "--filter", flt, timeout=30)
        ids = res.stdout.split() if res.returncode == 0 else []
        if ids:
            docker("rm", "-f", *ids, timeout=60)
    for v in veths:
        if Path(f"/sys/class/net/{v}").exists():
            subprocess.run(["ip", "link", "del", v], capture_output=True, check=False)
    if run_id:
        ledger.forget("container", run_id)
    return ids


# -- executing in a container node ----------------------------------------------------------------
class ContainerNode:
    """The node object of a container node (in place of a Mininet host). `cmd` runs a shell script
    in its network namespace with the host's tools; `run(argv, app=True)` runs the image's
    programs inside the container."""

    shell = None  # no persistent shell: every command is its own process

    def __init__(self, name: str, pid: int, cid: str, bridge: BridgeClient | None = None):
        self.name, self.pid, self.cid, self.bridge = name, pid, cid, bridge

    def argv(self, argv: list[str], *, app: bool) -> list[str]:
        if app:
            return ["docker", "exec", self.cid, *argv]
        return ["nsenter", "-t", str(self.pid), "-n", "--", *argv]

    def run(self, argv: list[str], *, app: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess:
        if self.bridge is not None:
            return self.bridge.call(self.argv(argv, app=app), timeout=timeout)
        return subprocess.run(self.argv(argv, app=app), capture_output=True, text=True, timeout=timeout, check=False)

    def cmd(self, script: str) -> str:
        res = self.run(["sh", "-c", script])
        return res.stdout + res.stderr

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        if self.bridge is not None:
            raise EnvironmentProblem(f"node {self.name} runs as a container on the host, outside the UML guest: "
                                     f"wearlab cannot start `{argv[0]}` beside it there (only its image's software "
                                     "and one-shot commands); make it a namespace node (no image:) for this workload")
        return subprocess.Popen(self.argv(argv, app=False), **kw)


# -- the guest's bridge to the host ----------------------------------------------------------------
class BridgeClient:
    """Guest side: a command for the host is a JSON file in the shared job directory; its answer
    comes back as another. Files, because the guest has no network to the host (hostfs is all
    they share); setup-time commands only, so a few ms of polling cost nothing that is measured."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.lock = threading.Lock()
        self.n = 0

    def call(self, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
        with self.lock:
            self.n += 1
            n = self.n
        req, ans = self.dir / f"req-{os.getpid()}-{n}.json", self.dir / f"ans-{os.getpid()}-{n}.json"
        tmp = req.with_suffix(".tmp")
        tmp.write_text(json.dumps({"argv": argv, "timeout": timeout}))
        tmp.replace(req)
        deadline = None if timeout is None else time.monotonic() + timeout + 10
        while not ans.exists():
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(argv, timeout or 0)
            time.sleep(0.003)
        doc = json.loads(ans.read_text())
        ans.unlink(missing_ok=True)
        return subprocess.CompletedProcess(argv, doc["rc"], doc["stdout"], doc["stderr"])


class Bridge:
    """Host side: serves the guest's requests while it runs (a thread of the booting process).
    Only commands addressed to this run's containers are carried out (`docker exec <ours>`, or
    `nsenter -t <our pid> -n` into one's network namespace), so a request cannot reach another
    container or the host's own network."""

    def __init__(self, directory: Path, containers: dict[str, Container]):
        self.dir = directory
        self.allowed = {("docker", "exec", c.id) for c in containers.values()} | \
                       {("nsenter", "-t", str(c.pid)) for c in containers.values()}
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="container-bridge", daemon=True)

    def __enter__(self) -> Bridge:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=5)

    def _serve(self) -> None:
        while not self.stop_flag.is_set():
            for req in sorted(self.dir.glob("req-*.json")):
                req.rename(req.with_suffix(".taken"))
                threading.Thread(target=self._answer, args=(req,), daemon=True).start()
            self.stop_flag.wait(0.002)

    def _answer(self, req: Path) -> None:
        taken = req.with_suffix(".taken")
        ans = self.dir / req.name.replace("req-", "ans-", 1)
        try:
            doc = json.loads(taken.read_text())
            argv = [str(a) for a in doc["argv"]]
            if tuple(argv[:3]) not in self.allowed:
                out: dict[str, Any] = {"rc": 126, "stdout": "", "stderr": f"refused: {argv[:3]} is not one of this run's containers"}
            else:
                try:
                    res = subprocess.run(argv, capture_output=True, text=True, timeout=doc.get("timeout"), check=False)
                    out = {"rc": res.returncode, "stdout": res.stdout, "stderr": res.stderr}
                except subprocess.TimeoutExpired:
                    out = {"rc": 124, "stdout": "", "stderr": f"timed out after {doc.get('timeout')} s"}
        except (OSError, ValueError, KeyError) as e:
            out = {"rc": 125, "stdout": "", "stderr": f"bad request: {e}"}
        tmp = ans.with_suffix(".tmp")
        tmp.write_text(json.dumps(out))
        tmp.replace(ans)
        taken.unlink(missing_ok=True)


# -- links between the guest and host containers ------------------------------------------------
def attach_to_guest(topo, containers: dict[str, Container], run_id: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """For each link between a container and a guest node: a host veth pair, one end created in the
    container under its planned name and MAC (down: the guest configures it), the other for UML's
    vector driver. Returns the kernel arguments and, per container node, what the guest needs
    (pid, id, and per peer the guest's vector device)."""
    from wearlab.plan.addressing import plan_addresses

    addresses = plan_addresses(topo)
    args: list[str] = []
    info: dict[str, dict[str, Any]] = {n: {"pid": c.pid, "id": c.id, "vec": {}} for n, c in containers.items()}
    token = secrets.token_hex(2)
    batch: list[str] = []
    host_ends: list[str] = []
    for link in topo.links:
        ends = [e for e in (link.a, link.b) if e in containers]
        if not ends:
            continue
        if len(ends) == 2:
            raise EnvironmentProblem(f"link {link.a}-{link.b} joins two container nodes: with the network in a UML "
                                     "guest (no netem on this host) only links between a container and a node of the "
                                     "guest can be shaped")
        c = ends[0]
        peer = link.b if c == link.a else link.a
        k = len(args)
        host_end = f"wl{token}v{k}"
        intf = addresses.interface_to(c, peer)
        batch.append(f"link add name {host_end} type veth peer name {intf.name} address {intf.mac} "
                     f"netns {containers[c].pid}")
        host_ends.append(host_end)
        ledger.record("container", run_id, label=f"{LABEL}={run_id}", veths=host_ends)  # before it exists
        args.append(f"vec{k}:transport=raw,ifname={host_end}")
        info[c]["vec"][peer] = f"vec{k}"
    if batch:
        res = subprocess.run(["ip", "-batch", "-"], input="\n".join(batch) + "\n", capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise EnvironmentProblem(f"linking the containers to the guest failed: {res.stderr.strip()}")
    for host_end in host_ends:
        # The host end only carries frames between the container and the guest: no IPv6 chatter of
        # its own, and no offloads (the guest must see real, checksummed, MTU-sized frames).
        Path(f"/proc/sys/net/ipv6/conf/{host_end}/disable_ipv6").write_text("1")
        subprocess.run(["ethtool", "-K", host_end, "gro", "off", "gso", "off", "tso", "off", "tx", "off"],
                       capture_output=True, check=False)
        subprocess.run(["ip", "link", "set", host_end, "up"], check=True)
    for c in containers.values():
        for intf in addresses.interfaces[c.node]:
            # Checksums computed by the container's stack: a frame with CHECKSUM_PARTIAL would reach
            # the guest's raw socket with its checksum unfilled.
            subprocess.run(["nsenter", "-t", str(c.pid), "-n", "ethtool", "-K", intf.name, "tx", "off"],
                           capture_output=True, check=False)
    return args, info


@contextlib.contextmanager
def for_guest(topo, job: Path):
    """Host side of a UML run whose topology has container nodes: start them, link them to the
    guest, serve the guest's bridge; everything removed when the guest has stopped.
    Yields (kernel arguments, environment for the guest)."""
    images = {n: node.image for n, node in topo.nodes.items() if node.image}
    run_id = f"g{os.getpid()}-{secrets.token_hex(2)}"
    shared = job / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    shared.chmod(0o755)
    # The guest's network work directory lives under it: servers' unprivileged workers (nginx's)
    # must be able to pass through the job directory (mkdtemp made it 0700).
    job.chmod(0o711)
    try:
        started = start(images, run_id, [shared])
        args, info = attach_to_guest(topo, started, run_id)
        with Bridge(shared / "bridge", started):
            yield args, {ENV: json.dumps(info), SHARED_ENV: str(shared)}
    finally:
        remove(run_id)
