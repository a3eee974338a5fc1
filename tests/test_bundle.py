"""The bundle (`make bundle`, issue 24): wearlab's UML runtime from one relocatable directory, run
by an ordinary user who has a POSIX shell and nothing else of ours.

The real thing: the bundle, copied (hard links) to another path, boots the guest as `nobody`,
with `env -i PATH=/usr/bin:/bin`, in a mount namespace where the checkout and /var/cache/wearlab
are empty tmpfs (out of reach: no .venv, no source, no guest tree) and TMPDIR is a noexec tmpfs
(so the launcher must map the guest's memory elsewhere), and runs a small experiment: its times
are held to the link's physics, its files to their owner, and the task leaves nothing behind.
Host test step (root: the namespace and the change of user; the guest runs as nobody).
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, need_tool
from wearlab.errors import EnvironmentProblem

BUNDLE = ROOT / "build" / "wearlab-bundle"
ONE_WAY_S = 0.005


def _bundle() -> Path:
    assert (BUNDLE / "wearlab").is_file(), f"no bundle at {BUNDLE}: run `make bundle` (`make test` does)"
    return BUNDLE


def test_the_bundle_refuses_container_nodes_naming_root(monkeypatch):
    from wearlab.catalog import CATALOG
    from wearlab.run.start import RunOptions, check_runnable
    from wearlab.plan.plan import plan

    exp = RunOptions(experiment=ROOT / "experiments" / "container-server.yaml").load(CATALOG)
    monkeypatch.setenv("WEARLAB_BUNDLE", "/somewhere/wearlab-bundle")
    with pytest.raises(EnvironmentProblem, match="container nodes .* need root on the host"):
        check_runnable(plan(exp))


def _in_namespace(script: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([need_tool("unshare"), "-m", "--propagation", "private", "sh", "-ec", script],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_the_launcher_names_what_to_set_when_every_temporary_directory_is_noexec():
    if os.geteuid() != 0:
        pytest.fail("needs root (a mount namespace); CI runs as root")
    b = _bundle()
    r = _in_namespace(f"""
        for d in /tmp /dev/shm; do mount -t tmpfs -o noexec,mode=1777 tmpfs $d; done
        cd /tmp
        exec env -i PATH=/usr/bin:/bin TMPDIR=/tmp {b}/wearlab run nothing.yaml""", timeout=30)
    assert r.returncode == 2, r.stderr
    assert "WEARLAB_UML_TMPDIR" in r.stderr and "noexec" in r.stderr


EXPERIMENT = f"""
name: tiny
topology:
  nodes:
    watch: {{role: wearable}}
    server: {{role: server}}
  links: [{{between: [watch, server], rate: 2Mbit, delay: {ONE_WAY_S * 1000:g}ms}}]
repetitions: 2
seed: 5
timeout: 30s
workload: {{kind: http-get, client: watch, server: server}}
matrix: {{protocol: [http], size: [1000]}}
"""
MIN_RTO_S = 0.200     # Linux's TCP_RTO_MIN: a lost packet costs at least this


@pytest.mark.root
def test_an_ordinary_user_runs_an_experiment_from_a_copied_bundle_without_the_checkout():
    if os.geteuid() != 0:
        pytest.fail("needs root (a mount namespace, a change of user); CI runs as root")
    need_tool("setpriv")
    nobody = pwd.getpwnam("nobody")
    # Beside the build (same file system: hard links, instant), away from the checkout.
    work = Path(tempfile.mkdtemp(prefix="wearlab-bundle-test-", dir="/var/tmp"))
    try:
        work.chmod(0o755)
        bundle = work / "elsewhere" / "wearlab-bundle"
        bundle.parent.mkdir()
        shutil.copytree(_bundle(), bundle, copy_function=os.link)
        (work / "exp").mkdir()
        (work / "exp" / "tiny.yaml").write_text(EXPERIMENT)
        for d in ("results", "tmp"):
            (work / d).mkdir()
            os.chown(work / d, nobody.pw_uid, nobody.pw_gid)
        t0 = time.monotonic()
        r = _in_namespace(f"""
            mount -t tmpfs -o noexec,mode=1777 tmpfs {work}/tmp
            mount -t tmpfs tmpfs {ROOT}
            mount -t tmpfs tmpfs /var/cache/wearlab
            cd {work}
            rc=0
            setpriv --reuid={nobody.pw_uid} --regid={nobody.pw_gid} --clear-groups --inh-caps=-all \\
                env -i PATH=/usr/bin:/bin HOME=/nonexistent TMPDIR={work}/tmp \\
                sh {bundle}/wearlab run exp/tiny.yaml --out results || rc=$?
            echo "left in TMPDIR: $(ls -A {work}/tmp | wc -l)"
            echo "processes of nobody: $(ps -u {nobody.pw_uid} -o pid= | wc -l)"
            exit $rc""", timeout=120)
        took = time.monotonic() - t0
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "left in TMPDIR: 0" in r.stdout and "processes of nobody: 0" in r.stdout, r.stdout[-500:]
        latest = work / "results" / "tiny" / "latest"
        with (latest / "runs.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert [row["status"] for row in rows] == ["ok", "ok"]
        rtt = 2 * ONE_WAY_S
        for row in rows:
            # A GET of 1000 bytes: the TCP handshake and the request/response, 2 round trips at
            # least; no loss on this link, so no retransmission timeout on top.
            assert 2 * rtt <= float(row["time_total"]) < 2 * rtt + MIN_RTO_S, row
        assert (latest / "runs.csv").stat().st_uid == nobody.pw_uid   # written as the user, no chown
        machine = json.loads((latest / "metadata.json").read_text())["machine"]
        manifest = dict(l.split("=", 1) for l in (bundle / "manifest").read_text().splitlines())
        assert machine["uml_guest"] is True and machine["host_kernel_release"] == os.uname().release
        assert machine["uml_kernel_build"] == manifest["kernel"]
        assert "copy-on-write" in machine["uml_rootfs"] and manifest["rootfs"].split()[0] in machine["uml_rootfs"]
        print(f"bundle run as nobody: {took:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
