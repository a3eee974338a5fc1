"""The bundle (`make bundle`, issue 24): wearlab's UML runtime from one relocatable directory, run
by an ordinary user who has a POSIX shell and nothing else of ours.

The real thing: the bundle, copied (hard links) to another path, boots the guest as `nobody`,
with `env -i PATH=/usr/bin:/bin`, in a mount namespace where the checkout and /var/cache/wearlab
are empty tmpfs (out of reach: no .venv, no source, no guest tree) and TMPDIR is a noexec tmpfs
(so the launcher must map the guest's memory elsewhere), and runs wearlab's command there: netem
in the guest is held to what it was told, the files to their owner, and the task leaves nothing
behind. A whole `wearlab run` from the bundle does not work yet (tcpdump's chown of its capture
file, which hostfs cannot do for an ordinary user): docs/many-machines.md says what is left.
Host test step (root: the namespace and the change of user; the guest runs as nobody).
"""

from __future__ import annotations

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


@pytest.mark.root
def test_an_ordinary_user_boots_the_guest_from_a_copied_bundle_without_the_checkout():
    """The guest boots as nobody from the copy-on-write root, runs wearlab's command there, and
    netem in it delays loopback pings by what it was told: 2 x 5 ms a round trip, plus at most
    2 ms of a busy guest's scheduling. (A whole `wearlab run` does not work from the bundle yet:
    tcpdump chowns its capture file, which hostfs cannot do for an ordinary user.)"""
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
        for d in ("results", "tmp"):
            (work / d).mkdir()
            os.chown(work / d, nobody.pw_uid, nobody.pw_gid)
        inside = ("tc qdisc add dev lo root netem delay 5ms && ping -n -c 5 -i 0.2 127.0.0.1 > results/ping.txt "
                  "&& uname -r > results/kernel && echo \"$WEARLAB_GUEST_ROOTFS\" > results/rootfs")
        t0 = time.monotonic()
        r = _in_namespace(f"""
            mount -t tmpfs -o noexec,mode=1777 tmpfs {work}/tmp
            mount -t tmpfs tmpfs {ROOT}
            mount -t tmpfs tmpfs /var/cache/wearlab
            cd {work}
            rc=0
            setpriv --reuid={nobody.pw_uid} --regid={nobody.pw_gid} --clear-groups --inh-caps=-all \\
                env -i PATH=/usr/bin:/bin HOME=/nonexistent TMPDIR={work}/tmp \\
                sh {bundle}/wearlab runtime-exec -- sh -c '{inside}' || rc=$?
            echo "left in TMPDIR: $(ls -A {work}/tmp | wc -l)"
            echo "processes of nobody: $(ps -u {nobody.pw_uid} -o pid= | wc -l)"
            exit $rc""", timeout=120)
        took = time.monotonic() - t0
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "left in TMPDIR: 0" in r.stdout and "processes of nobody: 0" in r.stdout, r.stdout[-500:]
        ping = (work / "results" / "ping.txt").read_text()
        rtts = [float(l.split("time=")[1].split()[0]) for l in ping.splitlines() if "time=" in l]
        assert len(rtts) == 5, ping
        assert all(2 * ONE_WAY_S * 1000 <= t < 2 * ONE_WAY_S * 1000 + 2 for t in rtts), rtts
        assert (work / "results" / "ping.txt").stat().st_uid == nobody.pw_uid   # written as the user
        manifest = dict(l.split("=", 1) for l in (bundle / "manifest").read_text().splitlines())
        assert manifest["kernel"].startswith("linux-" ) and "copy-on-write" in (work / "results" / "rootfs").read_text()
        assert manifest["rootfs"].split()[0] in (work / "results" / "rootfs").read_text()
        print(f"bundle boot + ping as nobody: {took:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
