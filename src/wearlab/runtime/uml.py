"""Run a command inside a User-Mode Linux guest running wearlab's own kernel.

The guest boots the kernel built by images/uml/build-kernel.sh (netem with seeds, MPTCP, every
qdisc and netfilter target wearlab uses, all built in) with a hostfs root (a tree built by
images/uml/build-rootfs.sh) and mounts the host paths the command needs at the same paths, so the
same venv, code, experiment files and results directory are seen by both sides and results land
on the host as they are written. The guest runs one command and powers itself off; the host kills
its whole process group if it is still there, and the kernel kills it if the host process dies
(PR_SET_PDEATHSIG), so a guest never outlives the run that started it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from wearlab.errors import EnvironmentProblem
from wearlab.runtime import hostcpu, ledger, signals

DEFAULT_ROOTFS = Path("/var/cache/wearlab/uml-rootfs")
DEFAULT_KERNEL = Path("/var/cache/wearlab/kernel/linux.uml")  # a link to the newest build
GUEST_INIT = Path(__file__).with_name("guest-init.sh")
JOBS = Path("/run/wearlab/jobs")  # host dirs shared with guests: job, console status, exit code
READY_MARK = b"wearlab-guest: ready"
POWEROFF_NOISE = (b"sysrq: Power Off\r\n", b"sysrq: Power Off\n", b"reboot: Power down\r\n",
                  b"reboot: Power down\n")
# Environment that crosses into the guest: our own settings and the terminal's shape.
PASS_ENV_PREFIXES = ("WEARLAB_",)
PASS_ENV = ("TERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "PYTHONUNBUFFERED", "CI")


def rootfs_path() -> Path:
    return Path(os.environ.get("WEARLAB_ROOTFS", DEFAULT_ROOTFS))


def uml_kernel() -> str | None:
    k = Path(os.environ.get("WEARLAB_UML_KERNEL", DEFAULT_KERNEL))
    return str(k.resolve()) if k.is_file() and os.access(k, os.X_OK) else None


def kernel_version(kernel: str | None = None) -> str | None:
    """The guest kernel's `uname -r`, read from its binary (no boot needed)."""
    kernel = kernel or uml_kernel()
    if kernel is None:
        return None
    with open(kernel, "rb") as f:
        data = f.read()
    i = data.find(b"Linux version ")
    return data[i + 14:data.index(b" ", i + 14)].decode() if i >= 0 else None


def check_ready() -> None:
    """Raise EnvironmentProblem naming what is missing for the uml runtime."""
    if uml_kernel() is None:
        raise EnvironmentProblem(f"the uml runtime needs wearlab's guest kernel at "
                                 f"{os.environ.get('WEARLAB_UML_KERNEL', DEFAULT_KERNEL)}; run `make setup` "
                                 "(images/uml/build-kernel.sh builds it)")
    stamp = rootfs_path() / ".wearlab-rootfs-stamp"
    if not stamp.exists():
        raise EnvironmentProblem(f"the uml runtime needs the guest root filesystem at {rootfs_path()}; "
                                 "run `make setup` (images/uml/build-rootfs.sh builds it)")


def _start_watchdog(cpu: int | None):
    """preexec_fn of the watchdog (and so of the guest it starts)."""
    def setup() -> None:
        # PR_SET_PDEATHSIG = 1: the watchdog gets SIGTERM when wearlab dies, even by SIGKILL.
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})  # inherited by linux.uml and every guest process
    return setup



def _minimal_mounts(paths: Iterable[Path]) -> list[Path]:
    """Absolute, existing, de-duplicated paths with none inside another."""
    out: list[Path] = []
    for p in sorted({Path(p).resolve() for p in paths if p and Path(p).exists()}):
        if p == Path("/"):
            raise EnvironmentProblem("refusing to mount the host's / into the guest")
        if not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return out


def _install_init(rootfs: Path) -> None:
    dest = rootfs / "sbin" / "wearlab-init"
    data = GUEST_INIT.read_bytes()
    if not dest.exists() or dest.read_bytes() != data:
        dest.write_bytes(data)
        dest.chmod(0o755)


def run_in_guest(argv: list[str] | Callable[[Path], list[str]], *, mounts: Iterable[Path], cwd: Path,
                 mem_mb: int = 2048, env: dict[str, str] | None = None, out=None, attach=None,
                 low_latency: bool = True) -> int:
    """Run argv in a fresh guest; stream its console to `out`; return its exit status. `argv` may
    be a function of the job directory (seen at the same path in the guest) that puts what the
    command reads there and returns the command.
    `attach(job)`: a context manager entered before the boot and left after the guest stopped,
    giving extra kernel arguments and environment (e.g. realize.containers.for_guest).
    `low_latency`: the guest's host CPU polls when idle while the guest lives (hostcpu: what a
    run measures needs it); a guest that only holds a network (`wearlab deploy`) leaves it idle."""
    check_ready()
    # The tree the link names now: a rebuild (images/uml/build-rootfs.sh) makes a new tree and
    # moves the link, never changing this guest's files under it.
    rootfs = rootfs_path().resolve()
    _install_init(rootfs)
    out = out or sys.stdout.buffer
    umid = f"wearlab-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
    JOBS.mkdir(parents=True, exist_ok=True)
    job = Path(tempfile.mkdtemp(prefix=f"{umid}-", dir=JOBS))
    stack = contextlib.ExitStack()
    try:
        guest_env = {k: v for k, v in os.environ.items()
                     if k.startswith(PASS_ENV_PREFIXES) or k in PASS_ENV}
        guest_env.update(env or {})
        guest_env["WEARLAB_IN_GUEST"] = "1"
        guest_env["WEARLAB_HOST_KERNEL"] = os.uname().release
        guest_env["WEARLAB_GUEST_KERNEL"] = Path(uml_kernel()).name  # source version + config hash
        guest_env["WEARLAB_GUEST_ROOTFS"] = f"{rootfs} (stamp {(rootfs / '.wearlab-rootfs-stamp').read_text().strip()})"
        guest_env.setdefault("PYTHONUNBUFFERED", "1")
        cpu = hostcpu.guest_cpu()
        guest_env["WEARLAB_GUEST_CPU_PIN"] = "none" if cpu is None else f"cpu{cpu}"
        if not sys.stdout.isatty():
            # The guest's console is a tty even when ours is a pipe: tell its programs the truth.
            guest_env.update(WEARLAB_PLAIN="1", TERM="dumb", NO_COLOR="1", PY_COLORS="0")
        extra_args: list[str] = []
        if attach is not None:
            extra_args, extra_env = stack.enter_context(attach(job))
            guest_env.update(extra_env)
        if low_latency:
            guest_env["WEARLAB_HOST_IDLE"] = stack.enter_context(hostcpu.low_latency_idle(cpu))
        else:
            guest_env["WEARLAB_HOST_IDLE"] = "not changed (the guest holds a network; nothing is measured)"
        (job / "mounts.txt").write_text("".join(f"{p}\n" for p in _minimal_mounts([*mounts, cwd])))
        (job / "env.sh").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in guest_env.items()))
        if callable(argv):
            argv = argv(job)
        (job / "cmd.sh").write_text(f"cd {shlex.quote(str(cwd))} || exit 2\nexec {shlex.join(argv)}\n")
        cmd = [uml_kernel(), f"mem={mem_mb}M", "root=/dev/root", "rootfstype=hostfs",
               f"rootflags={rootfs}", "rw", "init=/sbin/wearlab-init", "con=null", "con0=null,fd:1",
               "quiet", f"umid={umid}", f"WEARLAB_JOB={job}", *extra_args,
               *os.environ.get("WEARLAB_UML_ARGS", "").split()]  # extra kernel arguments (debugging)
        proc = subprocess.Popen([sys.executable, "-m", "wearlab.runtime.watchdog", *cmd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_start_watchdog(cpu), cwd="/")
        ledger.record("uml", umid, watchdog_pid=proc.pid, paths=[str(job)])
        try:
            _relay_console(proc, out)
            proc.wait()
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP, SIGQUIT (runtime.signals)
            (job / "stop").touch()  # the guest's init turns this into SIGINT for the command
            try:
                with signals.forceable():  # a second Ctrl-C stops the guest at once
                    _relay_console(proc, out, timeout=60)
                    proc.wait(timeout=60)
            except (KeyboardInterrupt, subprocess.TimeoutExpired):
                pass
            _stop(proc)
            raise
        finally:
            _stop(proc)
            ledger.forget("uml", umid)
        rc_file = job / "rc"
        if not rc_file.exists():
            raise EnvironmentProblem("the UML guest stopped without reporting an exit status "
                                     "(crashed or killed); see its console output above")
        return int(rc_file.read_text().strip() or 1)
    finally:
        stack.close()
        shutil.rmtree(job, ignore_errors=True)


def _relay_console(proc: subprocess.Popen, out, timeout: float | None = None) -> None:
    """Copy guest console output after the init's ready mark (kernel boot noise stays hidden)."""
    assert proc.stdout is not None
    plain = not sys.stdout.isatty()
    ready = False
    pending = held = b""
    deadline = None if timeout is None else time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while True:
        if deadline is not None and time.monotonic() > deadline:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            if not ready and pending:  # the guest died before it was ready: show why
                out.write(pending)
                out.flush()
            return
        if plain:
            chunk = chunk.replace(b"\r\n", b"\n")
        if not ready:
            pending += chunk
            i = pending.find(READY_MARK)
            if i < 0:
                continue
            ready = True
            chunk = pending[i + len(READY_MARK):].lstrip(b"\r\n")
            pending = b""
        chunk = held + chunk
        for noise in POWEROFF_NOISE:
            chunk = chunk.replace(noise, b"")
        # A chunk may end in the middle of a noise line: hold that tail back until it completes.
        tail = chunk[chunk.rfind(b"\n") + 1:]
        held = tail if tail and any(n.startswith(tail) for n in POWEROFF_NOISE) else b""
        chunk = chunk[:len(chunk) - len(held)]
        out.write(chunk)
        out.flush()


def _stop(proc: subprocess.Popen) -> None:
    """Ask the watchdog to kill the guest's process group, and wait for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
