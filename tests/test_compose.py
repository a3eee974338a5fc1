"""The Compose stack (docker-compose.yml, images/, dashboards/provisioning, images/stack.py).

Without Docker (part of `make test`): the compose file publishes only on 127.0.0.1, labels
everything, asks for Grafana's password without a default; every image built here is named
wearlab/* (never an official name) and nothing is pulled unless asked (`up --pull`, which pulls the
official Prometheus of Debian's version and Grafana); `up` starts Grafana when its image is here and
otherwise says how to get it; the testbed image holds the Makefile's packages; Prometheus scrapes
the testbed every second; Grafana's provisioning points at dashboards/ and the data source uid the
dashboards use. (tests/test_make_compose_deps.py: the Makefile's Compose targets install Docker.)

Marked `compose` (`make test-compose`: needs Docker, builds the local images): the real stack comes
up, Prometheus scrapes the testbed, live experiments run in the testbed (UML guest inside the
container) and every query of every dashboard panel returns at least one series over the time they
ran; then `down` leaves no container, network, volume or guest of the stack behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import need_tool, packages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "images"))
import stack  # noqa: E402 - images/stack.py, the Makefile's helper
from wearlab.report import dashboards

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def load(path: Path):
    return YAML(typ="safe").load(path.read_text())


def services() -> dict:
    return load(COMPOSE)["services"]


# --- static: no Docker -----------------------------------------------------------------------

def test_compose_file_binds_loopback_and_labels_everything():
    doc = load(COMPOSE)
    assert "version" not in doc          # the Compose specification: docker-compose 1.29 takes profiles
    for name, svc in doc["services"].items():
        assert svc["labels"]["wearlab.stack"] == "1", name
        assert "privileged" not in svc, name     # see the testbed's comment: spelled out instead
        for p in svc.get("ports", []):
            assert p.startswith("127.0.0.1:"), f"{name} publishes {p} beyond loopback"
    assert doc["networks"]["default"]["labels"]["wearlab.stack"] == "1"
    for name, vol in doc["volumes"].items():
        assert vol["labels"]["wearlab.stack"] == "1", name
    for name in ("prometheus-local", "server-nginx", "server-haproxy"):
        assert doc["services"][name]["profiles"] == ["images"] and doc["services"][name]["build"]
    assert set(stack.BUILT) | {stack.GRAFANA} <= set(doc["services"])


def test_grafana_password_has_no_default():
    env = services()["grafana"]["environment"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", env["GF_SECURITY_ADMIN_PASSWORD"])
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert services()["grafana"]["image"].startswith("grafana/grafana-oss:")


def test_testbed_service_mounts_and_command():
    tb = services()["testbed"]
    vols = tb["volumes"]
    for v in ("${PWD}:${PWD}", "/var/cache/wearlab:/var/cache/wearlab", "/var/run/docker.sock:/var/run/docker.sock",
              "/run/wearlab:/run/wearlab", "/sys/fs/cgroup:/sys/fs/cgroup"):
        assert v in vols
    assert tb["pid"] == "host" and tb["working_dir"] == "${PWD}"
    assert int(tb["shm_size"].rstrip("gb")) >= 3        # the guest's 2 GiB memory file lives in /dev/shm
    cmd = tb["command"]
    assert cmd[1:3] == ["exporter", "--listen"] and cmd[3] == "0.0.0.0:9469" and cmd[-1] == "${PWD}/results"


def test_testbed_image_holds_what_the_host_installs():
    """images/packages.txt: the testbed can run `make setup`'s runtimes (host + kernel build)."""
    text = (ROOT / "images" / "testbed" / "Dockerfile").read_text()
    assert "packages.txt" in text and '$i == "testbed"' in text
    have = packages("testbed")
    assert packages("host") | packages("kernel") <= have, \
        f"tag testbed in images/packages.txt: {(packages('host') | packages('kernel')) - have}"
    assert {"docker.io", "tini", "make", "git"} <= have


def test_local_builds_never_take_an_official_name():
    """Every image built here is wearlab/*, written out (no variable can rename a build); the
    services that run an image not built here (Prometheus under PULL=1, Grafana) say never pull
    (Compose v2; docker-compose 1.29 ignores it: `up` checks the images, see the next tests)."""
    svcs = services()
    for name, svc in svcs.items():
        if "build" in svc:
            assert re.fullmatch(r"wearlab/[a-z0-9-]+:[a-z0-9.-]+", svc["image"]), (name, svc["image"])
        else:
            assert svc.get("pull_policy") == "never", f"{name}: `up` must not pull (pull_policy: never)"
    built = {svc["image"] for svc in svcs.values() if "build" in svc}
    assert set(BUILT_IMAGES) <= {stack.BASE_IMAGE, *built}
    # Prometheus runs wearlab's build unless `up --pull` names the official image.
    m = re.fullmatch(r"\$\{(\w+):-([^}]+)\}", svcs["prometheus"]["image"])
    assert m and m.group(1) == stack.PROMETHEUS_IMAGE_VAR and m.group(2) == svcs["prometheus-local"]["image"]
    assert stack.OFFICIAL_PROMETHEUS.startswith("prom/prometheus:") and stack.OFFICIAL_PROMETHEUS not in built
    assert svcs["grafana"]["image"].split("/")[0] == "grafana" and "build" not in svcs["grafana"]
    for dockerfile in (ROOT / "images").glob("*/Dockerfile"):
        froms = re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), re.M)
        assert froms == [stack.BASE_IMAGE], f"{dockerfile}: FROM {froms} (only wearlab's base: no registry)"


# Every image `make images` leaves, as the code and docs name them.
BUILT_IMAGES = ("wearlab/base:bookworm", "wearlab/testbed:bookworm", "wearlab/prometheus:bookworm",
                "wearlab/server-nginx:bookworm", "wearlab/server-haproxy:bookworm")


def test_pulled_prometheus_is_debians_version():
    """`make up PULL=1` runs the official image of the version images/prometheus builds from Debian."""
    r = subprocess.run([need_tool("dpkg-query"), "-W", "-f=${Version}", "prometheus"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout, "Debian's prometheus is not installed: `make setup` installs it"
    upstream = r.stdout.split(":")[-1].split("+")[0].split("-")[0]
    assert stack.OFFICIAL_PROMETHEUS == f"prom/prometheus:v{upstream}", \
        "images/prometheus builds Debian's version: update OFFICIAL_PROMETHEUS in images/stack.py"
    assert stack.FORMER_STAND_INS == (stack.OFFICIAL_PROMETHEUS,)


def test_prometheus_image_variable_is_obeyed_only_under_pull(monkeypatch):
    monkeypatch.setenv(stack.PROMETHEUS_IMAGE_VAR, "someone/else:1")
    assert stack.PROMETHEUS_IMAGE_VAR not in stack.compose_env()
    assert stack.compose_env(pull=True)[stack.PROMETHEUS_IMAGE_VAR] == stack.OFFICIAL_PROMETHEUS


class FakeDocker:
    """images/stack.py's `up` without Docker: which images are here, what was pulled and started."""

    def __init__(self, monkeypatch, here: set[str]):
        self.here, self.pulled, self.started = set(here), [], None
        monkeypatch.setattr(stack, "ensure_docker", lambda start=True: "fake")
        monkeypatch.setattr(stack, "check_venv", lambda: None)
        monkeypatch.setattr(stack, "check_ports", lambda services: None)
        monkeypatch.setattr(stack, "wait_first_scrape", lambda since=None: 0.0)
        monkeypatch.setattr(stack, "image_exists", lambda name: name in self.here)
        monkeypatch.setattr(stack, "compose_images", self.compose_images)
        monkeypatch.setattr(stack, "compose", self.compose)
        monkeypatch.setattr(stack.subprocess, "run", self.run)
        monkeypatch.setattr(stack.Path, "mkdir", lambda *a, **k: None)

    def compose_images(self, pull=False):
        svcs = services()
        out = {n: s["image"] for n, s in svcs.items() if "$" not in s["image"]}
        out["prometheus"] = stack.OFFICIAL_PROMETHEUS if pull else svcs["prometheus-local"]["image"]
        return out

    def compose(self, *args, grafana=False, pull=False, **kw):
        assert args[0] == "up", args
        stack.compose_env(grafana, pull)
        self.started = ([a for a in args if not a.startswith("-")][1:], pull)

    def run(self, cmd, *a, **kw):
        assert cmd[:2] == ["docker", "pull"], f"unexpected command {cmd}"
        self.pulled.append(cmd[-1])
        self.here.add(cmd[-1])
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_up_without_grafana_says_how_to_get_it(monkeypatch, capsys):
    fake = FakeDocker(monkeypatch, here=set(BUILT_IMAGES))
    monkeypatch.delenv("GRAFANA_ADMIN_PASSWORD", raising=False)
    assert stack.main(["up"]) == 0
    assert fake.pulled == [] and fake.started == (["testbed", "prometheus"], False)
    out = capsys.readouterr().out
    grafana = services()["grafana"]["image"]
    assert "Grafana skipped" in out        # bench/bench_compose.py reads this
    assert "no registry is reachable" not in out
    for what in (f"docker pull {grafana}", "make up PULL=1", "GRAFANA_ADMIN_PASSWORD=<password> make up",
                 f"docker save {grafana}", "docker load"):
        assert what in out, what


def test_up_starts_grafana_when_its_image_is_here(monkeypatch, capsys):
    grafana = services()["grafana"]["image"]
    fake = FakeDocker(monkeypatch, here={*BUILT_IMAGES, grafana})
    monkeypatch.delenv("GRAFANA_ADMIN_PASSWORD", raising=False)
    assert stack.main(["up"]) == 2                                 # a password first, nothing started
    assert "GRAFANA_ADMIN_PASSWORD" in capsys.readouterr().err and fake.started is None
    monkeypatch.setenv("GRAFANA_ADMIN_PASSWORD", "test")
    assert stack.main(["up"]) == 0
    assert fake.pulled == [] and fake.started == (["testbed", "prometheus", "grafana"], False)
    out = capsys.readouterr().out
    assert "Grafana skipped" not in out and f"127.0.0.1:{stack.port('grafana')}" in out


def test_up_with_an_image_missing_starts_and_pulls_nothing(monkeypatch, capsys):
    """docker-compose 1.29 would pull a missing image at `up`: stack.py stops first, naming `make images`."""
    fake = FakeDocker(monkeypatch, here=set(BUILT_IMAGES) - {"wearlab/prometheus:bookworm"})
    assert stack.main(["up"]) == 2
    assert fake.pulled == [] and fake.started is None
    err = capsys.readouterr().err
    assert "wearlab/prometheus:bookworm" in err and "make images" in err


def test_up_pull_pulls_the_official_images_and_runs_them(monkeypatch, capsys):
    fake = FakeDocker(monkeypatch, here=set(BUILT_IMAGES))
    monkeypatch.delenv("GRAFANA_ADMIN_PASSWORD", raising=False)
    assert stack.main(["up", "--pull"]) == 2 and fake.pulled == []  # the password before any pull
    monkeypatch.setenv("GRAFANA_ADMIN_PASSWORD", "test")
    assert stack.main(["up", "--pull"]) == 0
    assert fake.pulled == [stack.OFFICIAL_PROMETHEUS, services()["grafana"]["image"]]
    assert fake.started == (["testbed", "prometheus", "grafana"], True)
    assert f"Prometheus ({stack.OFFICIAL_PROMETHEUS})" in capsys.readouterr().out


def test_prometheus_scrapes_the_testbed_every_second():
    prom = services()["prometheus"]
    cfg_mount = next(v for v in prom["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    cfg = load(ROOT / cfg_mount.split(":")[0])
    assert cfg["global"]["scrape_interval"] == "1s"
    job = next(j for j in cfg["scrape_configs"] if j["job_name"] == "wearlab")
    assert job["static_configs"][0]["targets"] == ["testbed:9469"]


def test_grafana_provisioning_points_at_dashboards_and_the_datasource():
    graf = services()["grafana"]
    mounts = dict(reversed(v.removesuffix(":ro").split(":", 1)) for v in graf["volumes"])
    prov = ROOT / mounts["/etc/grafana/provisioning"]
    ds = load(prov / "datasources" / "wearlab.yml")
    (src,) = ds["datasources"]
    assert src["uid"] == dashboards.DATASOURCE["uid"] and src["type"] == dashboards.DATASOURCE["type"]
    assert src["url"] == "http://prometheus:9090" and src["access"] == "proxy" and src["isDefault"]
    (prov_doc,) = load(prov / "dashboards" / "wearlab.yml")["providers"]
    path = prov_doc["options"]["path"]
    assert (ROOT / mounts[path]).resolve() == (ROOT / "dashboards").resolve()
    assert prov_doc["allowUiUpdates"] is False
    assert graf["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"].startswith(path + "/")
    home = Path(graf["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).name
    assert (ROOT / "dashboards" / home).is_file()


def test_dashboards_are_valid_grafana_json():
    files = sorted((ROOT / "dashboards").glob("*.json"))
    assert {p.name for p in files} == set(dashboards.all_dashboards())
    uids = set()
    for path in files:
        doc = json.loads(path.read_text())
        assert doc["schemaVersion"] and doc["uid"] not in uids
        uids.add(doc["uid"])
        ids = [p["id"] for p in doc["panels"]]
        assert len(ids) == len(set(ids)), path
        for p in doc["panels"]:
            assert p["datasource"]["uid"] == dashboards.DATASOURCE["uid"]
            assert all(t["datasource"]["uid"] == dashboards.DATASOURCE["uid"] for t in p["targets"])


# --- live: Docker ----------------------------------------------------------------------------

# Three short experiments cover every panel: a CBR stream through the phone's relay with the
# virtual queue, a BT radio on the watch and a timeline change (overview, links, bufferbloat,
# radio state, link changes, per-run durations); a reactive handover with short timers
# (handover phases, delivery gap); and the adaptive interface policy with BT cut under its stream
# at 1 s (the active interface and its switch about a second later, the bytes waiting to cross BT,
# WiFi's throughput, the transport's bytes per path). Three repetitions each: a run's row is
# written once the next run is done (its teardown is on the wire by then), so the first run's
# per-run durations are exported while the third runs.
EXPERIMENTS = {
    "compose-test-bufferbloat": f"""
name: compose-test-bufferbloat
topology: {ROOT / "results" / ".compose-test" / "cproxy-watch.yaml"}
repetitions: 3
seed: 3
timeout: 60s
nodes:
  watch: {{radio: bt, sniff_timer: 2s}}
  phone: {{mitigation: virtual-queue}}
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 1.5Mbit, message_size: 1000, duration: 5s}}
timeline:
  - {{at: 2s, link: phone-ap, set: {{delay: 20ms}}}}
""",
    "compose-test-handover": f"""
name: compose-test-handover
topology: {ROOT / "topologies" / "handover.yaml"}
repetitions: 3
seed: 2
timeout: 60s
nodes:
  watch: {{interface_policy: reactive, walk_start: 1s, walk_speed: 5, p1: 1s, p2: 1s, p3: 0.5s}}
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 150kbit, message_size: 3000, duration: 12s, reconnect: rtapp}}
""",
    "compose-test-interface": f"""
name: compose-test-interface
topology: {ROOT / "topologies" / "interface-selection.yaml"}
repetitions: 3
seed: 4
timeout: 60s
nodes:
  watch: {{interface_policy: adaptive}}
workload: {{kind: stream, client: watch, server: server, direction: down, pattern: cbr,
           rate: 300kbit, message_size: 750, duration: 4s}}
timeline:
  - {{at: 1s, link: watch-phone, set: {{rate: 200kbit}}}}
""",
}


# The wearlab the testbed runs (another checkout's venv under the repository, to try one).
WEARLAB_IN_TESTBED = os.environ.get("WEARLAB_COMPOSE_TEST_WEARLAB", str(ROOT / ".venv" / "bin" / "wearlab"))


def prom(path: str, **params) -> list:
    url = f"http://127.0.0.1:{stack.port('prometheus')}/api/v1/{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def running_testbed_id() -> str:
    return stack.compose("ps", "-q", "testbed", capture=True, check=False).stdout.strip()


@pytest.fixture(scope="module")
def live_stack():
    if not os.environ.get("GRAFANA_ADMIN_PASSWORD"):
        # Used only when Grafana's image is here (up then starts it and needs one).
        os.environ["GRAFANA_ADMIN_PASSWORD"] = os.urandom(12).hex()
    assert stack.main(["images"]) == 0
    assert stack.main(["up"]) == 0
    yield running_testbed_id()
    stack.main(["down"])      # when a test failed before test_down_leaves_nothing


@pytest.mark.compose
def test_prometheus_scrapes_the_testbed(live_stack):
    up = prom("query", query='up{job="wearlab"}')
    assert [r["value"][1] for r in up] == ["1"], up
    targets = json.loads(urllib.request.urlopen(
        f"http://127.0.0.1:{stack.port('prometheus')}/api/v1/targets", timeout=10).read())["data"]["activeTargets"]
    wl = [t for t in targets if t["labels"]["job"] == "wearlab"]
    assert wl and wl[0]["scrapeUrl"] == "http://testbed:9469/metrics" and wl[0]["health"] == "up"
    # The exporter is also published on the host's loopback.
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.port('testbed')}/metrics", timeout=10) as r:
        assert b"wearlab_experiment_running" in r.read()


@pytest.mark.compose
def test_every_dashboard_query_returns_series_during_live_experiments(live_stack):
    work = ROOT / "results" / ".compose-test"
    work.mkdir(parents=True, exist_ok=True)
    for name in EXPERIMENTS:
        shutil.rmtree(ROOT / "results" / name, ignore_errors=True)
    # The phone-proxy topology with a device on the watch, so its runs have energy (the HTTP
    # dashboard's energy panel); streams pad nothing, so the figures are otherwise the same.
    cproxy = (ROOT / "topologies" / "cproxy.yaml").read_text()
    assert "watch:  {role: wearable}" in cproxy
    (work / "cproxy-watch.yaml").write_text(cproxy.replace("watch:  {role: wearable}",
                                                           "watch:  {role: wearable, device: lg-g-watch-r}"))
    t0 = time.time()
    try:
        for name, text in EXPERIMENTS.items():
            (work / f"{name}.yaml").write_text(text)
            # As `make experiment-compose` runs it: in the testbed, results into the host's results/.
            r = stack.compose("exec", "-T", "testbed", WEARLAB_IN_TESTBED, "run",
                              str(work / f"{name}.yaml"), capture=True, check=False, timeout=600)
            assert r.returncode == 0, f"{name} failed in the testbed:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
            rows = (ROOT / "results" / name / "latest" / "runs.csv").read_text().splitlines()
            assert len(rows) == 4, rows                                   # header + 3 runs, on the host
        time.sleep(2)
        t1 = time.time()
        empty = []
        for fname, doc in dashboards.all_dashboards().items():
            exprs = [(p["title"], t["expr"]) for p in doc["panels"] for t in p["targets"]]
            exprs.append(("annotation", doc["annotations"]["list"][0]["expr"]))
            for title, expr in exprs:
                expr = expr.replace("$experiment", "compose-test-.*")
                if not prom("query_range", query=expr, start=f"{t0:.3f}", end=f"{t1:.3f}", step="1"):
                    empty.append(f"{fname} / {title}: {expr}")
        assert not empty, "queries without a series while the experiments ran:\n" + "\n".join(empty)
        # The dashboards' variable finds both experiments.
        names = {r["metric"]["experiment"] for r in prom("query_range", query="wearlab_runs", start=f"{t0:.3f}",
                                                        end=f"{t1:.3f}", step="1")}
        assert set(EXPERIMENTS) <= names
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for name in EXPERIMENTS:
            shutil.rmtree(ROOT / "results" / name, ignore_errors=True)


def grafana(path: str, auth: bool = False, data: dict | None = None) -> tuple[int, object]:
    req = urllib.request.Request(f"http://127.0.0.1:{stack.port('grafana')}{path}", method="POST" if data else "GET",
                                 data=json.dumps(data).encode() if data else None,
                                 headers={"Content-Type": "application/json"})
    if auth:
        import base64
        token = base64.b64encode(f"admin:{os.environ['GRAFANA_ADMIN_PASSWORD']}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


@pytest.mark.compose
def test_grafana_serves_the_provisioned_dashboards(live_stack):
    image = stack.compose_images()[stack.GRAFANA]
    if not stack.image_exists(image):
        pytest.skip(f"Grafana container skipped: its image {image} is not on this machine and tests never pull "
                    f"(`docker pull {image}` or `make up PULL=1` gets it); its provisioning files and every "
                    "dashboard query were checked without it")
    deadline = time.monotonic() + 90
    while True:
        try:
            if grafana("/api/health")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "Grafana never became healthy"
        time.sleep(1)
    status, ds = grafana(f"/api/datasources/uid/{dashboards.DATASOURCE['uid']}", auth=True)
    assert status == 200 and ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    status, found = grafana("/api/search?type=dash-db")            # anonymous: a viewer
    assert status == 200
    want = {d["uid"] for d in dashboards.all_dashboards().values()}
    assert want <= {d["uid"] for d in found}
    status, _ = grafana("/api/dashboards/db", data={"dashboard": {"title": "anonymous edit"}, "overwrite": True})
    assert status in (401, 403), "anonymous visitors must not edit"
    assert grafana("/api/user", auth=True)[0] == 200                # the admin's password is the environment's


def guest_processes_in(container_id: str) -> list[str]:
    """Processes (UML guests included) still in the container's cgroups."""
    out = []
    for pid_dir in Path("/proc").glob("[0-9]*"):
        try:
            if container_id in (pid_dir / "cgroup").read_text():
                out.append(f"{pid_dir.name} {(pid_dir / 'cmdline').read_bytes()[:120]!r}")
        except OSError:
            continue
    return out


DOWN_EXPERIMENT = f"""
name: compose-test-down
topology: {ROOT / "topologies" / "cproxy.yaml"}
repetitions: 1
seed: 3
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 1Mbit, message_size: 1000, duration: 3600s}}
"""


def ledger_owned_by(pids: set[int]) -> list[str]:
    ledger = Path(os.environ.get("WEARLAB_LEDGER", "/run/wearlab/made"))
    out = []
    for f in ledger.glob("*.json") if ledger.is_dir() else ():
        try:
            if json.loads(f.read_text()).get("owner_pid") in pids:
                out.append(f.name)
        except (OSError, ValueError):
            pass
    return out


@pytest.mark.compose
def test_down_during_an_experiment_leaves_nothing(live_stack):
    """`make down` while an experiment runs in the testbed: the run is interrupted as by Ctrl-C
    (results kept, guest powered off, ledger clean), then nothing of the stack is left."""
    assert live_stack, "the testbed was not running"
    work = ROOT / "results" / ".compose-test"
    work.mkdir(parents=True, exist_ok=True)
    (work / "down.yaml").write_text(DOWN_EXPERIMENT)
    run = subprocess.Popen(["docker-compose", "-p", stack.PROJECT, "-f", str(COMPOSE), "exec", "-T", "testbed",
                            WEARLAB_IN_TESTBED, "run", str(work / "down.yaml")], cwd=ROOT, env=stack.compose_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not prom("query", query='wearlab_stream_goodput_bytes_per_second{experiment="compose-test-down"} > 0'):
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the experiment never streamed"
            time.sleep(1)
        pids = {pid for pid, _ in stack.testbed_processes(live_stack)}
        assert any("linux-" in args for _, args in stack.testbed_processes(live_stack)), "no UML guest in the testbed"
        assert ledger_owned_by(pids)
        assert stack.main(["down"]) == 0
        out = run.communicate(timeout=60)[0]
        assert not any(stack.leftovers().values()), stack.leftovers()
        assert not stack.compose("--profile", "images", "ps", "-q", capture=True).stdout.strip()
        assert not guest_processes_in(live_stack)
        assert not [p for p in pids if Path(f"/proc/{p}").exists() and live_stack in Path(f"/proc/{p}/cgroup").read_text()]
        assert not ledger_owned_by(pids), f"ledger entries of the testbed's runs left: {ledger_owned_by(pids)}"
        meta = json.loads(next((ROOT / "results" / "compose-test-down").glob("2*/metadata.json")).read_text())
        assert meta["status"].startswith("interrupted"), (meta["status"], out[-2000:])
    finally:
        if run.poll() is None:
            run.kill()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ROOT / "results" / "compose-test-down", ignore_errors=True)
