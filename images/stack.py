"""The Compose stack (docker-compose.yml): checks, images, up, down, exec.

    python3 images/stack.py check            # Docker, docker-compose, images, ports: what is missing
    python3 images/stack.py images           # build the local images (base, testbed, prometheus, servers)
    python3 images/stack.py up               # start testbed + prometheus (+ grafana when its image is here)
    python3 images/stack.py up --pull        # pull the official Prometheus and Grafana images, use them
    python3 images/stack.py down             # stop and remove everything of the stack
    python3 images/stack.py exec -- CMD ...  # run CMD in the testbed (docker-compose exec -T)
    python3 images/stack.py status           # what of the stack runs

The Makefile's `images`, `up`, `down`, `experiment-compose` and `test-compose` targets call this
(`make up PULL=1` is `up --pull`); those that need Docker install it first (Debian's docker.io and
docker-compose, the `docker` tag of images/packages.txt). Exit status 2, with a message naming what
to do, when the machine cannot run the stack: no Docker (or no docker-compose), a daemon that does
not come up, a port already taken by something else, a missing image or venv, a pull that fails.
When Docker is installed but its daemon is not running, this starts it (`dockerd`, log in
/var/log/wearlab-dockerd.log): CI machines have no running daemon.

Images: every image built here is named wearlab/* (a local build never takes an official image's
name). Nothing is pulled unless asked: `up --pull` pulls OFFICIAL_PROMETHEUS (used in place of
wearlab/prometheus) and Grafana's image; without it Grafana starts only when its image is already
on this machine.

Only the standard library: it runs before the venv exists, with /usr/bin/python3.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PROJECT = os.environ.get("WEARLAB_COMPOSE_PROJECT", "wearlab")
LABEL = "wearlab.stack=1"
BASE_IMAGE = "wearlab/base:bookworm"
# The services `up` starts; the build-only ones (profile `images`) are only built.
RUNNING = ("testbed", "prometheus")
BUILT = ("testbed", "prometheus-local", "server-nginx", "server-haproxy")
GRAFANA = "grafana"
# `up --pull` (make up PULL=1): the official Prometheus image, the version Debian's prometheus
# package (images/prometheus, wearlab/prometheus) has, so flags and layout are the same. It reaches
# docker-compose.yml through this variable; Grafana's image is the compose file's.
PROMETHEUS_IMAGE_VAR = "WEARLAB_PROMETHEUS_IMAGE"
OFFICIAL_PROMETHEUS = "prom/prometheus:v2.42.0"
# Official names that an older `make images` gave its local stand-in: removed by `images` when the
# image there is ours (labelled wearlab.image), so the official one is not shadowed.
FORMER_STAND_INS = ("prom/prometheus:v2.42.0",)
# Published ports (all on 127.0.0.1): the environment variable that moves each, and its default.
PORTS = {"testbed": ("WEARLAB_EXPORTER_PORT", 9469), "prometheus": ("PROMETHEUS_PORT", 9090),
         "grafana": ("GRAFANA_PORT", 3000)}
DOCKERD_LOG = Path("/var/log/wearlab-dockerd.log")
# Needed by docker-compose to read the file at all (it interpolates every service, also for
# `down` or when Grafana is not started); never reaches a container that is started.
GRAFANA_UNUSED = "unused-grafana-is-not-started"


class StackProblem(Exception):
    """The machine cannot do what was asked; the message says what to do. Exit status 2."""


def log(msg: str) -> None:
    print(f"stack: {msg}", flush=True)


# --- Docker and docker-compose ---------------------------------------------------------------

def _docker_ok(timeout: float = 10) -> tuple[bool, str]:
    try:
        r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                           text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False, "`docker info` did not answer"
    return r.returncode == 0, (r.stdout.strip() or r.stderr.strip())


def ensure_docker(start: bool = True) -> str:
    """Docker's client, docker-compose and a running daemon (started here if need be)."""
    missing = [t for t in ("docker", "docker-compose") if shutil.which(t) is None]
    if missing:
        raise StackProblem(f"{' and '.join(missing)} not found: install Debian's packages "
                           "(`apt-get install docker.io docker-compose`; `make images` and `make up` do it)")
    ok, info = _docker_ok()
    if ok:
        return info
    dockerd = shutil.which("dockerd")
    if not start or dockerd is None:
        raise StackProblem(f"the Docker daemon is not running ({info}); start it "
                           "(`systemctl start docker` or `dockerd &`)")
    if os.geteuid() != 0:
        raise StackProblem("the Docker daemon is not running and only root can start it here: "
                           "`sudo dockerd &` (or `systemctl start docker`)")
    log(f"the Docker daemon is not running: starting {dockerd} (log: {DOCKERD_LOG})")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with DOCKERD_LOG.open("ab") as f:
        subprocess.Popen([dockerd], stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                         start_new_session=True, cwd="/")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        ok, info = _docker_ok(timeout=5)
        if ok:
            log(f"dockerd {info} is up")
            return info
    tail = DOCKERD_LOG.read_text(errors="replace").splitlines()[-10:]
    raise StackProblem("dockerd did not come up within 60 s; its log (" + str(DOCKERD_LOG) + ") ends:\n  "
                       + "\n  ".join(tail))


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False).returncode == 0


def compose_env(grafana: bool = False, pull: bool = False) -> dict[str, str]:
    env = {**os.environ, "PWD": str(ROOT)}   # the repository is mounted at ${PWD}
    # docker-compose's own (docker-py) builder: the same whichever docker CLI is on the PATH.
    env.setdefault("COMPOSE_DOCKER_CLI_BUILD", "0")
    # wearlab/prometheus unless `up --pull` (a variable left in the environment is not obeyed).
    env.pop(PROMETHEUS_IMAGE_VAR, None)
    if pull:
        env[PROMETHEUS_IMAGE_VAR] = OFFICIAL_PROMETHEUS
    if not env.get("GRAFANA_ADMIN_PASSWORD"):
        if grafana:
            raise StackProblem("Grafana's image is here, so it starts: set GRAFANA_ADMIN_PASSWORD "
                               "(its admin's password; there is no default), e.g. "
                               "`GRAFANA_ADMIN_PASSWORD=$(openssl rand -hex 12) make up`")
        env["GRAFANA_ADMIN_PASSWORD"] = GRAFANA_UNUSED
    return env


def compose(*args: str, grafana: bool = False, pull: bool = False, check: bool = True, capture: bool = False,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    cmd = ["docker-compose", "-p", PROJECT, "-f", str(COMPOSE_FILE), *args]
    r = subprocess.run(cmd, cwd=ROOT, env=compose_env(grafana, pull), text=True, check=False, timeout=timeout,
                       capture_output=capture)
    if check and r.returncode != 0:
        detail = (r.stderr or "").strip()[-2000:] if capture else ""
        raise StackProblem(f"`{' '.join(cmd[3:])}` failed (exit {r.returncode}){': ' + detail if detail else ''}")
    return r


def compose_images(pull: bool = False) -> dict[str, str]:
    """service -> image name, as docker-compose.yml says (so the names live in one place)."""
    r = compose("config", pull=pull, capture=True)
    images, service = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"^  ([a-z0-9-]+):$", line)
        if m:
            service = m.group(1)
            continue
        m = re.match(r"^    image: (\S+)$", line)
        if m and service:
            images[service] = m.group(1)
    return images


def port(service: str) -> int:
    var, default = PORTS[service]
    return int(os.environ.get(var) or default)


def our_published_ports() -> set[int]:
    r = subprocess.run(["docker", "ps", "--filter", f"label={LABEL}", "--format", "{{.Ports}}"],
                       capture_output=True, text=True, check=False)
    out = set()
    for field in r.stdout.replace("\n", ",").split(","):
        field = field.strip()
        if "->" in field and ":" in field:
            try:
                out.add(int(field.split("->")[0].rsplit(":", 1)[1]))
            except ValueError:
                pass
    return out


def _who_listens(p: int) -> str:
    r = subprocess.run(["ss", "-Hltnp", f"sport = :{p}"], capture_output=True, text=True, check=False)
    line = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
    return line.split("users:")[-1] if "users:" in line else "another program"


def check_ports(services: list[str]) -> None:
    ours = our_published_ports()
    for s in services:
        p = port(s)
        if p in ours:
            continue
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", p))
            except OSError:
                var = PORTS[s][0]
                raise StackProblem(f"port 127.0.0.1:{p} ({s}) is taken by {_who_listens(p)}: stop it, or move "
                                   f"{s} with {var}=PORT (e.g. `{var}={p + 1} make up`)") from None


def check_images(images: dict[str, str], services=(*BUILT, *RUNNING)) -> None:
    missing = [f"{images[s]} ({s})" for s in dict.fromkeys(services) if not image_exists(images[s])]
    if not image_exists(BASE_IMAGE):
        missing.insert(0, BASE_IMAGE)
    if missing:
        raise StackProblem("image(s) missing: " + ", ".join(missing) + ": build them with `make images`")


def grafana_skipped(image: str) -> str:
    """What `up` says when Grafana's image is not on this machine: how to get it, registry or not."""
    return (f"Grafana skipped: its image {image} is not on this machine (wearlab pulls nothing unless asked).\n"
            f"  with registry access:  docker pull {image}\n"
            "                         GRAFANA_ADMIN_PASSWORD=<password> make up\n"
            "    or both at once:     GRAFANA_ADMIN_PASSWORD=<password> make up PULL=1\n"
            f"                         (PULL=1 also runs the official {OFFICIAL_PROMETHEUS} in place of "
            "wearlab/prometheus)\n"
            f"  without:               docker save {image} -o grafana.tar  on a machine that has it,\n"
            "                         docker load -i grafana.tar  here, then make up as above\n"
            "  GRAFANA_ADMIN_PASSWORD is Grafana's admin password (no default; anonymous visitors may view).")


def pull(images: list[str]) -> None:
    """`docker pull` each image (only `up --pull` calls this: tests never pull)."""
    for image in images:
        t0 = time.monotonic()
        log(f"pulling {image} ...")
        r = subprocess.run(["docker", "pull", "-q", image], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            detail = (r.stderr or r.stdout).strip().splitlines()
            raise StackProblem(f"`docker pull {image}` failed ({detail[-1] if detail else f'exit {r.returncode}'}); "
                               "without a registry, `make up` (no PULL=1) runs wearlab's own Prometheus and "
                               "skips Grafana")
        log(f"pulled {image} in {time.monotonic() - t0:.1f} s")


def untag_former_stand_ins() -> None:
    """Remove an official name an older `make images` gave one of our builds (its label says so)."""
    for name in FORMER_STAND_INS:
        r = subprocess.run(["docker", "image", "inspect", "-f", '{{index .Config.Labels "wearlab.image"}}', name],
                           capture_output=True, text=True, check=False)
        if r.returncode == 0 and r.stdout.strip() not in ("", "<no value>"):
            log(f"{name} here is wearlab's former local build, not the official image: removing that name")
            subprocess.run(["docker", "image", "rm", name], stdout=subprocess.DEVNULL, check=False)


def check_venv() -> None:
    if not (ROOT / ".venv" / "bin" / "wearlab").exists():
        raise StackProblem(f"no venv at {ROOT / '.venv'}: the testbed runs the host's venv; run `make setup`")


# --- commands --------------------------------------------------------------------------------

def cmd_images() -> None:
    ensure_docker()
    t0 = time.monotonic()
    if os.geteuid() != 0:
        raise StackProblem("building the images needs root (debootstrap, docker import)")
    r = subprocess.run([str(ROOT / "images" / "base" / "build.sh")], check=False)
    if r.returncode != 0:
        raise StackProblem("images/base/build.sh failed (see above; debootstrap needs the Debian mirror)")
    # docker's build cache makes this a few seconds when nothing changed.
    compose("--profile", "images", "build", "-q", *BUILT)
    untag_former_stand_ins()
    # The images these replaced (untagged now), and only ours.
    for label in ("wearlab.image", "wearlab.base.hash"):
        subprocess.run(["docker", "image", "prune", "-f", "--filter", f"label={label}"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    log(f"images ready in {time.monotonic() - t0:.1f} s: {BASE_IMAGE}, "
        + ", ".join(compose_images()[s] for s in BUILT))


def prometheus_query(expr: str, timeout: float = 3) -> list:
    url = f"http://127.0.0.1:{port('prometheus')}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=timeout) as r:
        doc = json.loads(r.read())
    return doc["data"]["result"] if doc.get("status") == "success" else []


def wait_first_scrape(timeout: float = 120, since: float | None = None) -> float:
    """Seconds until Prometheus has scraped the testbed's exporter successfully (a scrape that
    began after `since`, a time.time(): a Prometheus that kept running still holds old samples)."""
    t0 = time.monotonic()
    since = time.time() if since is None else since
    while True:
        try:
            if any(float(r["value"][1]) >= since for r in prometheus_query('timestamp(up{job="wearlab"} == 1)')):
                return time.monotonic() - t0
        except (OSError, ValueError, KeyError, urllib.error.URLError):
            pass
        if time.monotonic() - t0 > timeout:
            logs = compose("logs", "--tail", "20", *RUNNING, check=False, capture=True)
            raise StackProblem(f"Prometheus did not scrape the testbed within {timeout:.0f} s; "
                               f"`docker-compose -p {PROJECT} logs` says:\n{logs.stdout[-3000:]}")
        time.sleep(0.25)


def cmd_up(pull_images: bool = False) -> None:
    t0 = time.monotonic()
    ensure_docker()
    check_venv()
    images = compose_images(pull_images)
    if pull_images:
        compose_env(grafana=True)   # the password check, before anything is pulled
        pull([images["prometheus"], images[GRAFANA]])
    check_images(images)
    grafana = image_exists(images[GRAFANA])
    services = [*RUNNING, *([GRAFANA] if grafana else [])]
    check_ports(services)
    compose_env(grafana)   # the password check, before anything starts
    (Path("/run/wearlab")).mkdir(parents=True, exist_ok=True)
    (ROOT / "results").mkdir(exist_ok=True)
    started = time.time()
    compose("up", "-d", "--no-build", "--remove-orphans", *services, grafana=grafana, pull=pull_images)
    waited = wait_first_scrape(since=started)
    total = time.monotonic() - t0
    log(f"Prometheus ({images['prometheus']}) scraped the testbed: {total:.1f} s after `up` began "
        f"({waited:.1f} s of waiting)")
    if not grafana:
        log(grafana_skipped(images[GRAFANA]))
    print(f"  exporter    http://127.0.0.1:{port('testbed')}/metrics")
    print(f"  Prometheus  http://127.0.0.1:{port('prometheus')}/")
    if grafana:
        print(f"  Grafana     http://127.0.0.1:{port('grafana')}/  (anonymous: view; admin: GRAFANA_ADMIN_PASSWORD)")
    print("  run an experiment in the testbed: make experiment-compose EXPERIMENT=experiments/quickstart.yaml")
    if os.environ.get("WEARLAB_STACK_TIMING"):
        Path(os.environ["WEARLAB_STACK_TIMING"]).write_text(json.dumps({"up_to_first_scrape_s": total,
                                                                          "waiting_s": waited}))


def leftovers() -> dict[str, list[str]]:
    """Containers, networks and volumes labelled wearlab.stack=1 (any project)."""
    out = {}
    for kind, cmd in (("containers", ["docker", "ps", "-aq"]), ("networks", ["docker", "network", "ls", "-q"]),
                      ("volumes", ["docker", "volume", "ls", "-q"])):
        r = subprocess.run([*cmd, "--filter", f"label={LABEL}"], capture_output=True, text=True, check=False)
        out[kind] = r.stdout.split()
    return out


def testbed_processes(cid: str) -> list[tuple[int, str]]:
    """(host PID, command line) of every process in the testbed container (`docker exec`'d ones too)."""
    r = subprocess.run(["docker", "top", cid, "-eo", "pid,args"], capture_output=True, text=True, check=False)
    out = []
    for line in r.stdout.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            out.append((int(pid), args.strip()))
    return out


def stop_runs(cid: str, timeout: float = 90) -> None:
    """Interrupt the `wearlab run`/`exec` processes in the testbed as Ctrl-C would (results are
    kept, UML guests power off, the ledger is cleaned) before their container goes; whatever is
    left then dies with the container. Only the testbed's own processes: with `pid: host` a
    pkill in there would also hit the host's."""
    runs = [pid for pid, args in testbed_processes(cid)
            if re.search(r"(^|/)wearlab (run|exec)\b|-m wearlab (run|exec)\b", args)]
    if not runs:
        return
    log(f"interrupting {len(runs)} wearlab process(es) in the testbed: {', '.join(map(str, runs))}")
    for pid in runs:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in runs):
        time.sleep(0.2)


def cmd_down() -> None:
    try:
        ensure_docker(start=False)
    except StackProblem as e:
        log(f"nothing to take down ({e})")
        return
    cid = compose("ps", "-q", "testbed", capture=True, check=False).stdout.strip()
    if cid:
        stop_runs(cid)
    compose("--profile", "images", "down", "-v", "--remove-orphans", "--timeout", "20")
    # Containers wearlab started per experiment (labelled like the stack) and anything a killed
    # `up` left behind.
    left = leftovers()
    if left["containers"]:
        subprocess.run(["docker", "rm", "-f", "-v", *left["containers"]], stdout=subprocess.DEVNULL, check=False)
    if left["networks"]:
        subprocess.run(["docker", "network", "rm", *left["networks"]], stdout=subprocess.DEVNULL, check=False)
    if left["volumes"]:
        subprocess.run(["docker", "volume", "rm", *left["volumes"]], stdout=subprocess.DEVNULL, check=False)
    left = {k: v for k, v in leftovers().items() if v}
    if left:
        raise StackProblem(f"left behind after down: {left}")
    log("the stack is down; nothing of it is left")


def testbed_running() -> bool:
    r = compose("ps", "-q", "testbed", capture=True, check=False)
    cid = r.stdout.strip()
    if not cid:
        return False
    r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", cid], capture_output=True, text=True,
                       check=False)
    return r.stdout.strip() == "true"


def cmd_exec(argv: list[str]) -> int:
    ensure_docker()
    if not testbed_running():
        raise StackProblem("the testbed container is not running: `make up` first")
    return compose("exec", "-T", "testbed", *argv, check=False).returncode


def cmd_check() -> None:
    info = ensure_docker(start=False)
    log(f"Docker {info}, docker-compose {shutil.which('docker-compose')}")
    check_venv()
    images = compose_images()
    check_images(images)
    grafana = image_exists(images[GRAFANA])
    check_ports([*RUNNING, *([GRAFANA] if grafana else [])])
    log("images present; ports free (or ours); " + ("Grafana's image is here" if grafana else
                                                    f"Grafana would be skipped (no {images[GRAFANA]}): "
                                                    f"`docker pull {images[GRAFANA]}` or `make up PULL=1`"))


def cmd_status() -> None:
    ensure_docker(start=False)
    compose("--profile", "images", "ps")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "exec":
            if rest[:1] == ["--"]:
                rest = rest[1:]
            if not rest:
                raise StackProblem("usage: python3 images/stack.py exec -- CMD [ARGS...]")
            return cmd_exec(rest)
        actions = {"check": cmd_check, "images": cmd_images, "up": cmd_up, "down": cmd_down, "status": cmd_status,
                   "ensure-docker": lambda: log(f"Docker {ensure_docker()} is running")}
        if cmd not in actions:
            print(f"unknown command {cmd!r}; one of: {', '.join(actions)}, exec", file=sys.stderr)
            return 2
        if cmd == "up" and rest in ([], ["--pull"]):
            cmd_up(pull_images=bool(rest))
            return 0
        if rest:
            print(f"{cmd}: unexpected arguments {rest} (only `up --pull` takes one)", file=sys.stderr)
            return 2
        actions[cmd]()
        return 0
    except StackProblem as e:
        print(f"stack: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
