"""tcpcrypt beside a node's software: wearlab's `tcpcryptd` (tcpcrypt/, RFC 8547 + RFC 8548) as a
transparent proxy in the node's namespace, so the node's unchanged applications (curl, nginx) get
opportunistic TCP-level encryption when the other end runs it too, and plain TCP otherwise.

A workload asks for it with a `Tcpcrypt` need on each end (e.g. http-get's `protocol: tcpcrypt`);
any node kind can carry it. The client end intercepts its outgoing connections to the service
port (`--out-dport`), the server end its incoming ones (`--service-port`); other ports are left
alone, so the same nodes serve plain HTTP and HTTPS cells unchanged. TCP-ENO goes on the wire
through the daemon's sock_ops program, attached to the daemon's own cgroup v2 (one per node,
under wearlab's); the daemon reports one JSON line per closed connection (mode, TEP, cipher,
session ID, handshake time, byte counters) into its stats file, and its CPU time is read from
/proc around each run.

Fail closed and verify (issue 22): a connection the daemon cannot prove unencrypted by the peer
(its ENO record missing) is reset, never relayed in plaintext; a node with `tcpcrypt: require`
(topology) or a need with `require` resets connections that would fall back to plain TCP
(`--require-encryption`); a run counts as encrypted (`encrypted()`) only when the client's
connection closed cleanly and both daemons report the same session ID.

Resumption (RFC 8548 3.5) is off unless the node says `tcpcrypt_resumption: true` (tcpcryptd
--no-resume otherwise), so existing experiments keep measuring a fresh key exchange per connection.

Key log (issue 22 item 5): only when the node says `tcpcrypt_key_log: true`, the daemon appends
every session's secrets to <results>/keys/<node>.keylog (tcpcryptd --key-log; the file made 0600
before the daemon opens it), from which `wearlab decrypt` opens the captures' frames. Never on by
default: results with a key log hold every session's keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem
from wearlab.model.devices import Device
from wearlab.model.needs import Tcpcrypt
from wearlab.model.ports import TCPCRYPTD_IN, TCPCRYPTD_OUT
from wearlab.nodes.devicecpu import node_cpu
from wearlab.nodes.software import KindError, wait_listening
from wearlab.runtime import cgroup

ROOT = Path(__file__).resolve().parents[3]
BINARY = ROOT / "tcpcrypt" / "target" / "release" / "tcpcryptd"
OUT_PORT, IN_PORT = TCPCRYPTD_OUT, TCPCRYPTD_IN
NODE_CGROUP2 = Path("/sys/fs/cgroup")
KEY_LOG_DIR = "keys"   # under the results directory: <results>/keys/<node>.keylog


def key_log_path(results: Path, node: str) -> Path:
    """Where a node's tcpcryptd keeps its key log (tcpcrypt_key_log: true)."""
    return results / KEY_LOG_DIR / f"{node}.keylog"


def process_cpu_clock(pid: int) -> int:
    """The clockid of a process's CPU-time clock (Linux's MAKE_PROCESS_CPUCLOCK(pid,
    CPUCLOCK_SCHED)), which Python does not wrap."""
    return ((~pid) << 3) | 2


def binary() -> Path:
    if not (BINARY.is_file() and os.access(BINARY, os.X_OK)):
        raise EnvironmentProblem(f"tcpcrypt needs wearlab's daemon at {BINARY}: build it with `make tcpcrypt` "
                                 "(cargo build --release in tcpcrypt/)")
    return BINARY


def whole_json_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The JSON lines of `path` from byte `offset` that end in a newline, and the offset after
    them (a line still being written is not among them)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    whole = data[:data.rfind(b"\n") + 1]
    return [json.loads(l) for l in whole.decode().splitlines() if l.strip()], offset + len(whole)


class TcpcryptDaemon:
    """One tcpcryptd in one node."""

    def __init__(self, net, node: str, workdir: Path, needs: list[Tcpcrypt], device: Device | None = None,
                 require_all: bool = False, resumption: bool = False, key_log: Path | None = None):
        self.net, self.node, self.dir = net, node, workdir
        # --require-encryption: every connection (the node's `tcpcrypt: require`), or the ports
        # whose needs ask for it.
        self.require: list[str] = ["all"] if require_all else [str(p) for p in sorted({n.port for n in needs if n.require})]
        # RFC 8548 3.5 resumption only when the node asks for it (`tcpcrypt_resumption: true`): the
        # daemon's own default is on, and with it every connection after the first to a peer
        # skips the key exchange - not what seed 004's experiments measure.
        self.resumption = resumption
        self.key_log = key_log   # tcpcryptd --key-log (the node's tcpcrypt_key_log), else None
        # On a node with a device the daemon pads its own cryptography to the device's times
        # (tcpcryptd --device-profile; tcpcrypt/tcpcryptd/src/device.rs), on the node's cores with
        # the node's other processes (--device-cores: nodes.devicecpu.node_cpu).
        self.device_profile: Path | None = None
        self.device_cores: Path | None = None
        if device is not None:
            workdir.mkdir(parents=True, exist_ok=True)
            self.device_profile = workdir / "tcpcryptd.device-profile"
            self.device_profile.write_text(device.profile_text())
            self.device_cores = node_cpu(net.workdir, node, device).path
        self.ports = {"outbound": sorted({n.port for n in needs if n.side == "outbound"}),
                      "inbound": sorted({n.port for n in needs if n.side == "inbound"})}
        self.stats = workdir / "tcpcrypt-stats.jsonl"
        self.control = workdir / "tcpcrypt.sock"
        base = cgroup.base()
        if base is None:
            raise EnvironmentProblem("tcpcrypt's TCP-ENO program attaches to a cgroup v2, and this machine has no "
                                     "cgroup2 mount (the UML runtime has one)")
        self.cgroup = base / f"tcpcrypt-{net.run_id}-{node}"
        # The same directory as the node sees it: Mininet gives each node its own mount namespace
        # with a fresh /sys (for its interfaces), where the cgroup2 hierarchy is mounted again.
        self.node_cgroup = NODE_CGROUP2 / self.cgroup.relative_to(cgroup.cgroup2_root())
        self.proc: subprocess.Popen | None = None
        self.seen = 0  # bytes of the stats file already handed out (whole lines)

    def argv(self) -> list[str]:
        out, inb = self.ports["outbound"], self.ports["inbound"]
        argv = [str(binary()), "run", "--eno", "bpf", "--cgroup", str(self.node_cgroup),
                "--stats-file", str(self.stats), "--control", str(self.control),
                "--chain-prefix", "WLTCPCRYPT",
                "--out-port", str(OUT_PORT if out else 0), "--in-port", str(IN_PORT if inb else 0)]
        if out:
            argv += ["--out-dport", ",".join(map(str, out))]
        if inb:
            argv += ["--service-port", ",".join(map(str, inb))]
        if self.require:
            argv += ["--require-encryption", ",".join(self.require)]
        if not self.resumption:
            argv += ["--no-resume"]
        if self.key_log is not None:
            argv += ["--key-log", str(self.key_log)]
        if self.device_profile is not None:
            argv += ["--device-profile", str(self.device_profile), "--device-cores", str(self.device_cores)]
        return argv

    def start(self, timeout: float = 15) -> None:
        self.stats.touch()
        # A control socket left by an earlier daemon here (a restart) would pass the wait below
        # before this one has put its rules in.
        self.control.unlink(missing_ok=True)
        if self.key_log is not None:
            make_key_log(self.key_log)
        self.cgroup.mkdir(parents=True, exist_ok=True)
        self.net.sh(self.node, f'[ "$(stat -f -c %T {NODE_CGROUP2})" = cgroup2fs ] || '
                               f"mount -t cgroup2 cgroup2 {NODE_CGROUP2}")
        self.proc = self.net.popen(self.node, self.argv(), stdout=subprocess.DEVNULL,
                                   stderr=open(self.dir / "tcpcryptd.log", "w"))
        ports = ({OUT_PORT} if self.ports["outbound"] else set()) | ({IN_PORT} if self.ports["inbound"] else set())
        try:
            wait_listening(self.net, self.node, ports, "tcpcryptd", timeout, proc=self.proc)
        except KindError as e:
            raise KindError(f"{e}: {self.log_tail()}") from None
        deadline = time.monotonic() + timeout
        while not self.control.exists():  # its rules are in once it serves its control socket
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise KindError(f"tcpcryptd on {self.node} did not come up: {self.log_tail()}")
            time.sleep(0.02)

    def restart(self, resumption: bool, timeout: float = 15) -> None:
        """A fresh daemon with resumption on or off: its session cache (and eno-bpf's map of the
        tickets it accepts) empty, as on a host that has not talked to its peers yet. For a
        workload whose cells switch resumption (page-load's `resumption`) and whose loads are
        first views. The stats file is appended to, so close records already read stay read."""
        self.stop()
        self.resumption = resumption
        self.start(timeout)

    def log_tail(self) -> str:
        try:
            return " | ".join((self.dir / "tcpcryptd.log").read_text().strip().splitlines()[-3:])
        except OSError:
            return "no log"

    def cpu_s(self) -> float:
        """CPU time the daemon (all its threads) has used so far: the scheduler's own sum, read
        through the process's CPU clock (clock_getcpuclockid) - nanoseconds on the host kernel,
        10 ms ticks in the UML guest (its scheduler clock follows HZ = 100)."""
        if self.proc is None:
            return 0.0
        try:
            return time.clock_gettime(process_cpu_clock(self.proc.pid))
        except OSError:
            return 0.0

    def closed(self) -> list[dict[str, Any]]:
        """Close records written since the last call: whole lines only. The daemon appends each
        record with one write(), but a reader may see it half-copied (a write that crosses a page
        boundary grows the file a page at a time), so a last line without its newline is left
        for the next call."""
        records, self.seen = whole_json_lines(self.stats, self.seen)
        return records

    def version(self) -> str:
        res = subprocess.run([str(binary()), "help"], capture_output=True, text=True, check=False)
        return (res.stdout or res.stderr).splitlines()[0] if (res.stdout or res.stderr) else "tcpcryptd"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the daemon removes its iptables chains itself
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.net.run(self.node, [str(binary()), "cleanup", "--chain-prefix", "WLTCPCRYPT",
                                         "--control", str(self.control), "--cgroup", str(self.node_cgroup)])
        if self.cgroup.exists():
            try:
                self.cgroup.rmdir()
            except OSError:
                pass


def make_key_log(path: Path) -> None:
    """The key log file, readable by its owner only (0600), before the daemon opens it to append
    (it would create it with the umask's mode): session keys are secrets even in a testbed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fchmod(fd, 0o600)   # an existing file (a kind restarted for another cell) too
    finally:
        os.close(fd)


def encrypted(client: dict[str, Any] | None, server: dict[str, Any] | None) -> bool:
    """Whether a connection was encrypted end to end, from the two daemons' close records: the
    client's connection ran tcpcrypt and closed cleanly (an aborted session - a reset, a bad
    tag, a handshake that never finished - does not count) and both daemons report the same
    session ID (RFC 8548 3.4: equal IDs mean both ends derived the same keys from the same
    transcript; a splitting middlebox gives two sessions with different IDs, or plain TCP)."""
    if not client or not server:
        return False
    sid = client.get("session_id")
    return (client.get("mode") == "tcpcrypt" and client.get("state") == "closed" and bool(sid)
            and server.get("session_id") == sid)


def fallback_reason(client: dict[str, Any] | None) -> str | None:
    """Why the client's connection was not encrypted (ENO's fallback, or why it was reset)."""
    if not client:
        return "no close record"
    if encrypted_alone(client):
        return None
    return client.get("reason") or client.get("fallback") or client.get("state")


def encrypted_alone(r: dict[str, Any]) -> bool:
    return r.get("mode") == "tcpcrypt" and r.get("state") == "closed"


class RunAccount:
    """What the daemons of one run's ends did: opened before the run (earlier runs' records are
    set aside, CPU time noted), read after it (close records, CPU time used)."""

    def __init__(self, daemons: dict[str, TcpcryptDaemon]):
        self.daemons = daemons
        for d in daemons.values():
            d.closed()
        self.cpu0 = sum(d.cpu_s() for d in daemons.values())

    def cpu_s(self) -> float:
        return round(sum(d.cpu_s() for d in self.daemons.values()) - self.cpu0, 6)

    def records(self, enough, timeout: float = 3.0) -> dict[str, list[dict[str, Any]]]:
        """Close records per node, polled until `enough(records)` (connections close with the run)."""
        out: dict[str, list[dict[str, Any]]] = {n: [] for n in self.daemons}
        deadline = time.monotonic() + timeout
        while True:
            for node, d in self.daemons.items():
                out[node] += d.closed()
            if enough(out) or time.monotonic() > deadline:
                return out
            time.sleep(0.01)

