"""A real single-node Slurm for the tests (issue 24), from Debian's slurm-wlm and munge
(images/packages.txt): its own configuration, munge key and socket, ports, state and logs in a
directory of its own; no accounting daemon (a job's state comes from `scontrol`). Every wait is
bounded and looks at a daemon's answer or a file, never at the clock alone."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import need_tool


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ok, timeout: float, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(step)


@contextlib.contextmanager
def single_node_slurm(d: Path, launch: tuple[str, ...] = ()) -> Iterator[dict[str, str]]:
    """A one-node Slurm configured and run in `d`; yields the environment its clients need
    (SLURM_CONF). Stopped by PID on the way out. `launch` goes before each daemon's command (e.g.
    nsenter into a mount namespace, whose view the jobs then inherit). Ordinary users may submit
    when `d` and its parents are theirs to traverse (the munge socket, slurm.conf)."""
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"):
        need_tool(tool)
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir()
    (d / "munge").mkdir(mode=0o711)            # munged refuses a socket directory others may write
    (d / "munge").chmod(0o711)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = d / "munge" / "munge.sock"
    subprocess.run([*launch, "munged", f"--key-file={key}", f"--socket={sock}", f"--pid-file={d / 'munged.pid'}",
                    f"--log-file={d / 'log' / 'munged.log'}", f"--seed-file={d / 'munge.seed'}", "--force"],
                   check=True, timeout=30)
    host = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=wearlabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.pid'}
SlurmctldLogFile={d / 'log' / 'slurmctld.log'}
SlurmdLogFile={d / 'log' / 'slurmd.log'}
SlurmUser=root
SlurmdUser=root
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/filetxt
JobCompLoc={d / 'log' / 'jobcomp.txt'}
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run([*launch, "slurmctld", "-f", str(conf)], check=True, timeout=30, env=env)
        subprocess.run([*launch, "slurmd", "-f", str(conf)], check=True, timeout=30, env=env)

        def idle() -> bool:
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env, timeout=10)
            return r.returncode == 0 and "idle" in r.stdout
        _wait("the Slurm node to be idle", idle, 30)
        yield env
    finally:
        # All told at once, then waited for: each takes seconds to wind down, and in turn they
        # added up (5.7 s a test).
        stopping = []
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            try:
                pid = int((d / pid_file).read_text())
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue
            stopping.append((pid_file, pid))
        for pid_file, pid in stopping:
            _wait(f"{pid_file} to stop", lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30)
