"""The bundle (`make bundle`, issue 24): wearlab's UML runtime from one relocatable directory, run
by an ordinary user who has a POSIX shell and nothing else of ours.

The real thing: the bundle, copied (hard links) to another path, boots the guest as `nobody`,
with `env -i PATH=/usr/bin:/bin`, in a mount namespace where the checkout and /var/cache/wearlab
are empty tmpfs (out of reach: no .venv, no source, no guest tree) and TMPDIR is a noexec tmpfs
(so the launcher must map the guest's memory elsewhere), and runs a small experiment: its times
are held to the link's physics, its files to their owner, and the task leaves nothing behind.
And the kernel needs nothing of the host's C library (a cluster's glibc may be older than the
build's): linked statically, it boots the guest in a root holding busybox-static alone.
Host test step (root: the namespace and the change of user; the guest runs as nobody).
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import hashlib
import shutil
import stat
import struct
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
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


def test_capture_from_the_bundle_refuses_before_asking_any_run(monkeypatch):
    """From the bundle the run to capture is always in another guest (each command boots its
    own): the capture says so at once, and never sends the request (which would start tcpdumps
    in that run that wait for a client that cannot come)."""
    from wearlab.run import live_capture

    def ask(req):
        raise AssertionError(f"asked the run {req}")

    monkeypatch.setenv("WEARLAB_BUNDLE", "/somewhere/wearlab-bundle")
    with pytest.raises(EnvironmentProblem, match="does not work from the bundle: each BUNDLE/wearlab command boots"):
        live_capture.capture(ask, ["watch"], "/somewhere/else/watch.pcapng")


def _manifest(bundle: Path) -> dict[str, str]:
    return dict(l.split("=", 1) for l in (bundle / "manifest").read_text().splitlines())


def _tarball() -> tuple[Path, str]:
    """`make bundle-tar`'s file beside the bundle, and the directory it holds."""
    name = f"wearlab-bundle-{_manifest(_bundle())['wearlab']}"
    tb = BUNDLE.parent / f"{name}.tar.gz"
    assert tb.is_file(), f"no {tb}: run `make bundle-tar` (`make test` does)"
    return tb, name


def test_the_bundles_tarball_holds_plain_relative_members_and_its_checksum():
    """What a user extracting it unprivileged can trust: every member under the one directory,
    no absolute name, no `..`, no device node, FIFO or hard link, no set-id bit; the image sparse
    (its 1.3 GB length, not its ~0.9 GB of data, would otherwise be written out). Its .sha256 is
    the file's (`sha256sum -c` format)."""
    tb, name = _tarball()
    h = hashlib.sha256()
    with tb.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    assert (tb.parent / f"{tb.name}.sha256").read_text() == f"{h.hexdigest()}  {tb.name}\n"
    names = set()
    # "r:gz", not the stream mode "r|gz": the file is two gzip members (the image's part is
    # compressed once and cached: images/bundle/tar.sh), which gzip, GNU tar, busybox and
    # libarchive read as one stream and tarfile's stream mode stops after the first.
    with tarfile.open(tb, "r:gz") as t:
        for m in t:
            parts = m.name.split("/")
            assert not m.name.startswith("/") and ".." not in parts and parts[0] == name, m.name
            assert m.isreg() or m.isdir(), f"{m.name}: type {m.type!r} (only files and directories)"
            assert not m.mode & (stat.S_ISUID | stat.S_ISGID), f"{m.name}: mode {m.mode:o}"
            assert (m.uid, m.gid) == (0, 0), m.name   # numeric 0: nothing to restore, nothing to depend on
            names.add(m.name)
            if m.name == f"{name}/rootfs.img":
                assert m.issparse() and m.size == (_bundle() / "rootfs.img").stat().st_size
    assert {f"{name}/{f}" for f in ("wearlab", "linux", "rootfs.img", "manifest", "lib/wearlab/__init__.py")} <= names


@pytest.mark.root
def test_nobody_extracts_the_tarball_anywhere_and_the_guest_answers(tmp_path):
    """The tarball extracted by `nobody` (GNU tar, from standard input: the file need not be
    readable by them) into a fresh directory, `env -i PATH=/usr/bin:/bin`: the files are theirs,
    the image still sparse, and its launcher boots the guest, whose wearlab says its version."""
    tb, name = _tarball()
    nobody = pwd.getpwnam("nobody")
    where = Path(tempfile.mkdtemp(prefix="wearlab-tarball-test-", dir="/var/tmp"))
    try:
        where.chmod(0o755)
        for d in ("x", "tmp"):
            (where / d).mkdir()
            os.chown(where / d, nobody.pw_uid, nobody.pw_gid)
        user = [need_tool("setpriv"), f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                "--inh-caps=-all", "env", "-i", "PATH=/usr/bin:/bin", "HOME=/nonexistent", f"TMPDIR={where}/tmp"]
        t0 = time.monotonic()
        with tb.open("rb") as f:
            r = subprocess.run([*user, "tar", "-xzf", "-", "-C", f"{where}/x"], stdin=f, capture_output=True,
                               text=True, timeout=120, check=False)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        b = where / "x" / name
        img = (b / "rootfs.img").stat()
        assert img.st_uid == nobody.pw_uid and (b / "wearlab").stat().st_uid == nobody.pw_uid
        assert img.st_size == (_bundle() / "rootfs.img").stat().st_size and img.st_blocks * 512 < img.st_size
        t1 = time.monotonic()
        r = subprocess.run([*user, "sh", "-c", f"cd {where}/tmp && exec {b}/wearlab --version"], capture_output=True,
                           text=True, timeout=60, check=False)
        booted = time.monotonic() - t1
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert r.stdout.strip().splitlines()[-1] == f"wearlab {_manifest(b)['wearlab']}", r.stdout
        print(f"tarball {tb.stat().st_size / 2**20:.0f} MB extracted by nobody in {took:.1f} s; guest answered in "
              f"{booted:.1f} s")
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _in_namespace(script: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([need_tool("unshare"), "-m", "--propagation", "private", "sh", "-ec", script],
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_the_launcher_names_what_to_set_when_every_temporary_directory_is_noexec(hidden):
    # The bundle's copy in /var/tmp: a checkout (and its build/) may itself lie under /tmp.
    b = hidden.bundle
    r = _in_namespace(f"""
        for d in /tmp /dev/shm; do mount -t tmpfs -o noexec,mode=1777 tmpfs $d; done
        cd /tmp
        exec env -i PATH=/usr/bin:/bin TMPDIR=/tmp {b}/wearlab run nothing.yaml""", timeout=30)
    assert r.returncode == 2, r.stderr
    assert "WEARLAB_UML_TMPDIR" in r.stderr and "noexec" in r.stderr


# Rocky 8 (RHEL 8: kernel 4.18, glibc 2.28), the oldest cluster OS the bundle is for.
ROCKY8_KERNEL = (4, 18, 0)


def _elf_linkage(path: Path) -> tuple[set[int], tuple[int, int, int] | None]:
    """The program header types of a 64-bit little-endian ELF file and its NT_GNU_ABI_TAG (the
    oldest Linux its C library was built for), read by hand: binutils is not on every test host."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit LE ELF file"
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types, abi = set(), None
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        types.add(p_type)
        off, end = p_offset, p_offset + p_filesz
        while p_type == 4 and off + 12 <= end:           # PT_NOTE: namesz, descsz, type, name, desc
            namesz, descsz, ntype = struct.unpack_from("<III", data, off)
            name = data[off + 12:off + 12 + namesz].rstrip(b"\0")
            desc = off + 12 + (namesz + 3) // 4 * 4
            if name == b"GNU" and ntype == 1 and descsz >= 16:      # NT_GNU_ABI_TAG
                os_id, *version = struct.unpack_from("<IIII", data, desc)
                assert os_id == 0, f"{path}: ABI tag for OS {os_id}, not Linux"
                abi = tuple(version)
            off = desc + (descsz + 3) // 4 * 4
    return types, abi


PT_DYNAMIC, PT_INTERP = 2, 3


def test_the_bundles_kernel_is_linked_statically():
    """Why this says Rocky 8 runs it: a dynamically linked program names its loader (PT_INTERP,
    ld-linux-x86-64.so.2) and asks the host's libc for symbol versions (GLIBC_2.34 and up from a
    Debian 12 build: "version `GLIBC_2.34' not found" on glibc 2.28). A static one has neither -
    its C library (2.36, the build's) is inside it - so what it needs from a host is the kernel's
    system calls alone, and its ABI tag says the oldest kernel that C library supports: not newer
    than Rocky 8's 4.18. The boot below shows it needs no file of the host's C library either."""
    types, abi = _elf_linkage(_bundle() / "linux")
    assert PT_INTERP not in types and PT_DYNAMIC not in types, \
        "the bundle's kernel is linked dynamically: a host with an older glibc (Rocky 8: 2.28) cannot run it"
    assert abi is not None and (3, 2, 0) <= abi <= ROCKY8_KERNEL, abi


@pytest.mark.root
def test_the_bundle_boots_where_the_host_has_no_c_library(tmp_path):
    """The bundle's launcher and guest, run in a root that holds busybox-static and the bundle
    and nothing else: no /lib, no /usr, no loader, no libc (as an ordinary user, from a
    read-only bind of the bundle). Dynamically linked, the kernel would not start at all (execve
    finds no PT_INTERP loader); here it boots the guest, whose wearlab prints its version. With
    the static check above: the kernel needs nothing of the host's glibc, of whatever version.
    The launcher's tools there are busybox's, a POSIX shell's smallest kit."""
    busybox = need_tool("busybox")
    b = _bundle()
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy(busybox, root / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True, timeout=10).stdout.split()
    for a in applets:
        if a != "busybox":
            (root / "bin" / a).symlink_to("busybox")
    for d in ("proc", "dev", "tmp", "bundle"):
        (root / d).mkdir()
    nobody = pwd.getpwnam("nobody")
    t0 = time.monotonic()
    r = _in_namespace(f"""
        mount -t proc proc {root}/proc
        mount --rbind /dev {root}/dev
        mount -t tmpfs -o mode=1777 tmpfs {root}/tmp
        mount --bind {b} {root}/bundle
        mount -o remount,bind,ro {root}/bundle
        cd {root}/tmp
        exec chroot --userspec={nobody.pw_uid}:{nobody.pw_gid} {root} \
            /bin/env -i PATH=/bin HOME=/tmp TMPDIR=/tmp /bin/sh -c 'cd /tmp && exec /bundle/wearlab --version'""",
                      timeout=60)
    took = time.monotonic() - t0
    assert not (root / "lib").exists() and not (root / "usr").exists()
    version = dict(l.split("=", 1) for l in (b / "manifest").read_text().splitlines())["wearlab"]
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert r.stdout.strip().splitlines()[-1] == f"wearlab {version}", r.stdout
    print(f"bundle booted with busybox alone: {took:.1f} s")


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


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where /var/tmp shares the build's file system (instant), else a sparse copy
    (rootfs.img is 1.3 GB sparse)."""
    try:
        os.link(src, dst)
    except OSError:
        subprocess.run(["cp", "-p", "--sparse=always", src, dst], check=True, timeout=300)


class Hidden:
    """A mount namespace held open by a process of its own, where the checkout and
    /var/cache/wearlab are empty tmpfs (no .venv, no source, no guest tree) and `work`/tmp is a
    noexec tmpfs; `work` holds a hard-linked copy of the bundle. Commands run in it as `nobody`
    with `env -i PATH=/usr/bin:/bin`; daemons started in it (Slurm's) give their jobs its view."""

    def __init__(self, work: Path):
        self.work = work
        self.bundle = work / "elsewhere" / "wearlab-bundle"
        self.nobody = pwd.getpwnam("nobody")
        self.holder = subprocess.Popen(
            [need_tool("unshare"), "-m", "--propagation", "private", "sh", "-ec", f"""
                mount -t tmpfs -o noexec,mode=1777 tmpfs {work}/tmp
                mount -t tmpfs tmpfs {ROOT}
                mount -t tmpfs tmpfs /var/cache/wearlab
                echo ready
                exec sleep 3600"""], stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout is not None and self.holder.stdout.readline().strip() == "ready"
        self.enter = (need_tool("nsenter"), "-t", str(self.holder.pid), "-m", "--")

    def run(self, script: str, timeout: float, env: str = "") -> subprocess.CompletedProcess:
        """`script` (sh) in `work`, in the namespace, as nobody; env: more `K=V` for env -i."""
        n = self.nobody
        return subprocess.run([*self.enter, "setpriv", f"--reuid={n.pw_uid}", f"--regid={n.pw_gid}", "--clear-groups",
                               "--inh-caps=-all", "env", "-i", "PATH=/usr/bin:/bin", "HOME=/nonexistent",
                               f"TMPDIR={self.work}/tmp", *env.split(), "sh", "-ec", f"cd {self.work}\n{script}"],
                              capture_output=True, text=True, timeout=timeout, check=False)

    def leftovers(self) -> str:
        """What the runs left: files in the (namespace's) TMPDIR and processes of nobody."""
        r = subprocess.run([*self.enter, "sh", "-c", f"echo tmp=$(ls -A {self.work}/tmp | wc -l) "
                            f"procs=$(ps -u {self.nobody.pw_uid} -o pid= | wc -l)"],
                           capture_output=True, text=True, timeout=30, check=True)
        return r.stdout.strip()

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait(timeout=30)


@pytest.fixture(scope="module")
def hidden() -> Iterator[Hidden]:
    if os.geteuid() != 0:
        pytest.fail("needs root (a mount namespace, a change of user); CI runs as root")
    need_tool("setpriv")
    nobody = pwd.getpwnam("nobody")
    # Beside the build (same file system: hard links, instant), away from the checkout.
    work = Path(tempfile.mkdtemp(prefix="wearlab-bundle-test-", dir="/var/tmp"))
    h = None
    try:
        work.chmod(0o755)
        bundle = work / "elsewhere" / "wearlab-bundle"
        bundle.parent.mkdir()
        shutil.copytree(_bundle(), bundle, copy_function=_link_or_copy)
        (work / "exp").mkdir()
        (work / "exp" / "tiny.yaml").write_text(EXPERIMENT)
        (work / "exp" / "claims.yaml").write_text("claims: []\n")   # a suite of one experiment
        for d in ("results", "tmp", "subs"):
            (work / d).mkdir()
            os.chown(work / d, nobody.pw_uid, nobody.pw_gid)
        h = Hidden(work)
        yield h
    finally:
        if h is not None:
            h.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def straight(hidden) -> tuple[Path, subprocess.CompletedProcess, float]:
    """The tiny experiment run straight through from the bundle, as nobody."""
    t0 = time.monotonic()
    r = hidden.run(f"exec sh {hidden.bundle}/wearlab run exp/tiny.yaml --out results", timeout=120)
    return hidden.work / "results" / "tiny" / "latest", r, time.monotonic() - t0


@pytest.mark.root
def test_an_ordinary_user_runs_an_experiment_from_a_copied_bundle_without_the_checkout(hidden, straight):
    latest, r, took = straight
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert hidden.leftovers() == "tmp=0 procs=0"
    nobody = hidden.nobody
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
    manifest = dict(l.split("=", 1) for l in (hidden.bundle / "manifest").read_text().splitlines())
    assert machine["uml_guest"] is True and machine["host_kernel_release"] == os.uname().release
    assert machine["uml_kernel_build"] == manifest["kernel"]
    assert "copy-on-write" in machine["uml_rootfs"] and manifest["rootfs"].split()[0] in machine["uml_rootfs"]
    print(f"bundle run as nobody: {took:.1f} s")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.root
def test_an_ordinary_user_submits_from_the_bundle_to_slurm_and_the_merge_equals_the_straight_run(hidden, straight):
    """Issue 24 item 4, the unprivileged half: Slurm's daemons run as a cluster's do (root, here
    in the namespace where the checkout is out of reach, so their jobs see what a compute node
    would); `nobody` reproduces a one-experiment suite from the bundle (`BUNDLE/wearlab reproduce
    exp --slurm --tasks 2`: the guest writes the scripts, the launcher runs their submit.sh on the
    host - the experiment's array and merge, then the suite's check); each task boots its own
    guest from the bundle, the merge and the check job too. Merged, the two shards are the
    straight run's runs: same cells, repetitions and seeds."""
    from slurm_cluster import single_node_slurm

    base, _, _ = straight
    assert (base / "runs.csv").is_file(), "the straight run failed (see the test before)"
    d = hidden.work / "slurm"
    d.mkdir(mode=0o755)
    t0 = time.monotonic()
    with single_node_slurm(d, launch=hidden.enter) as env:
        r = hidden.run(f"exec sh {hidden.bundle}/wearlab reproduce exp --slurm --tasks 2 --out subs",
                       timeout=120, env=f"SLURM_CONF={env['SLURM_CONF']}")
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "submitted tiny: array job" in r.stdout and "the suite's check and report: job" in r.stdout, r.stdout
        sub = next((hidden.work / "subs" / "tiny").glob("*-slurm"))
        jobs = dict(l.split("=", 1) for l in (sub / "jobs.txt").read_text().split())
        assert f"exec {hidden.bundle}/wearlab run" in (sub / "shard.sbatch").read_text()   # the bundle, not a venv
        merged = sub / "merged"
        deadline = time.monotonic() + 300
        while not (merged / "metadata.json").is_file():
            q = subprocess.run(["scontrol", "-o", "show", "job", jobs["merge_job"]], capture_output=True, text=True,
                               env=env, timeout=10)
            assert not any(f"JobState={s}" in q.stdout for s in ("CANCELLED", "FAILED", "TIMEOUT")), \
                q.stdout + "".join(p.read_text()[-2000:] for p in (sub / "logs").glob("*.log"))
            assert time.monotonic() < deadline, "the merge job did not finish in 300 s"
            time.sleep(0.5)
        took = time.monotonic() - t0
        a, b = _rows(base / "runs.csv"), _rows(merged / "runs.csv")
        assert [x["run"] for x in b] == ["1", "2"]
        for x, y in zip(a, b):
            for key in ("repetition", "protocol", "size", "status", "run_seed"):
                assert x[key] == y[key], (x["run"], key)
            assert 4 * ONE_WAY_S <= float(y["time_total"]) < 4 * ONE_WAY_S + MIN_RTO_S, y
        def seeds(d: Path) -> list[tuple[str, ...]]:
            return [(r["run"], r["what"], r["target"], r["seed"]) for r in _rows(d / "series" / "seeds.csv")]
        assert seeds(base) and seeds(base) == seeds(merged)                   # every seed of every run
        meta = json.loads((merged / "metadata.json").read_text())
        assert meta["status"] == "complete" and meta["merge"]["missing_runs"] == []
        assert [s["shard"]["runs"] for s in meta["shards"]] == [[1, 1], [2, 2]]   # first and last run
        assert all(s["machine"]["uml_guest"] for s in meta["shards"])
        assert (merged / "runs.csv").stat().st_uid == hidden.nobody.pw_uid
        # The suite's check job, after the merge, from the bundle too.
        check = (hidden.work / "subs" / "suite-jobs.txt").read_text().split("=", 1)[1].strip()
        deadline = time.monotonic() + 120
        while True:
            q = subprocess.run(["scontrol", "-o", "show", "job", check], capture_output=True, text=True, env=env,
                               timeout=10)
            if "JobState=COMPLETED" in q.stdout:
                break
            assert not any(f"JobState={s}" in q.stdout for s in ("CANCELLED", "FAILED", "TIMEOUT")), \
                q.stdout + (hidden.work / "subs" / "suite-check.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the suite's check job did not finish in 120 s"
            time.sleep(0.5)
        assert (hidden.work / "subs" / "report").is_dir()
    # The jobs' guests and the launchers are gone with the jobs.
    assert hidden.leftovers() == "tmp=0 procs=0"
    print(f"bundle on Slurm as nobody, 2 tasks and the merge: {took:.1f} s")


@pytest.mark.root
def test_capture_from_the_bundle_exits_2_naming_why(hidden):
    """`BUNDLE/wearlab capture` as nobody: one clear line and exit 2 from the guest, no
    traceback, no file (the deployment or run it would tap lives in another guest)."""
    r = hidden.run(f"exec sh {hidden.bundle}/wearlab capture watch -w caps.pcapng --duration 1", timeout=60)
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    said = r.stdout + r.stderr     # the guest's stderr reaches the launcher's console, its stdout
    assert "does not work from the bundle" in said and "Traceback" not in said, said
    assert not (hidden.work / "caps.pcapng").exists()
