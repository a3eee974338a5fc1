"""Interop: wearlab's tcpcryptd (Rust) against the independent RFC peer (tests/tcpcrypt_rfcpeer.py).

Runs on the host kernel (root; no netem). Each test builds its own lab (`TcLab`):

    netns wltc-p-XXXX  10.99.7.1  --veth--  10.99.7.2  netns wltc-d-XXXX
    the Python Peer's sockets                tcpcryptd (+ a plain service / client)
    cgroup v2 wltc-XXXX-p<tep> + eno-attach  cgroup v2 wltc-XXXX-d (the daemon joins it)

The Peer's socket is created inside the peer namespace *and* inside a peer cgroup to which the
eno-bpf crate's `eno-attach` is attached: that puts TCP-ENO options on the wire for it (option
plumbing only). Everything above TCP-ENO on the Peer side -- Init1/Init2, key schedule, frames --
is the independent Python code. The ENO transcript the Peer uses is read from the wire: tcpdump
in the peer namespace, then tcpcrypt_wire.eno_from_pcap.

After every test the lab checks and reports: no process left in either namespace (tcpcryptd,
eno-attach, tcpdump), no TCPCRYPTD* nat chain, no BPF program on its cgroups; then it removes the
cgroups and namespaces and checks they are gone.

The helpers (TcLab, ns_socket, ...) are also used by bench/bench_tcpcrypt.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcpcrypt_rfcpeer as rp  # noqa: E402
import tcpcrypt_wire as tw  # noqa: E402
from conftest import need_tool  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TC = ROOT / "tcpcrypt"
TCPCRYPTD = TC / "target" / "release" / "tcpcryptd"
ENO_ATTACH = TC / "target" / "release" / "eno-attach"

PEER_IP, DAEMON_IP = "10.99.7.1", "10.99.7.2"
SERVICE_PORT = 8080        # behind the daemon (inbound interception)
PEER_PORT = 9090           # the Peer's / a plain server's listener (outbound interception)
MB = 1 << 20


def _in_uml_guest() -> bool:
    try:
        return "User Mode Linux" in Path("/proc/cpuinfo").read_text() or os.environ.get("WEARLAB_IN_GUEST") == "1"
    except OSError:
        return False


# the UML guest's kernel has no nf_tables: iptables-legacy there (tcpcryptd --iptables)
IPTABLES = os.environ.get("WLTC_IPTABLES") or ("iptables-legacy" if _in_uml_guest() else "iptables")

AEAD_NAMES = {rp.AEAD_AES_128_GCM: "aes128gcm", rp.AEAD_AES_256_GCM: "aes256gcm",
              rp.AEAD_CHACHA20_POLY1305: "chacha20poly1305"}

# ============================================================================ RFC sizes (8548 §4.1, §4.2, §5)


def pubkey_len(tep: int) -> int:
    """8548 §5: Curve25519 public keys are 32 bytes; P-256 keys are a 2-byte pubkey_len followed by the
    compressed IEEE 1363 point (1 + 32 bytes)."""
    return {rp.TEP_CURVE25519: 32, rp.TEP_P256: 2 + 33}[tep]


def init1_len(tep: int, nciphers: int) -> int:
    """8548 §4.1 Init1: magic(4) message_len(4) nciphers(1) sym_cipher[K](2 each) N_A(32) PK_A."""
    return 4 + 4 + 1 + 2 * nciphers + 32 + pubkey_len(tep)


def init2_len(tep: int) -> int:
    """8548 §4.1 Init2: magic(4) message_len(4) sym_cipher(2) N_B(32) PK_B."""
    return 4 + 4 + 2 + 32 + pubkey_len(tep)


FRAME_OVERHEAD = 3 + 1 + 16   # 8548 §4.2: control(1) clen(2); plaintext flags(1); AEAD tag (16, RFC 5116)

# ============================================================================ namespaces, cgroups, processes

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
_cgroup_lock = threading.Lock()


def cgroup2_root() -> Path:
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "cgroup2":
            return Path(parts[1])
    raise RuntimeError("no cgroup2 mount")


def _own_cgroup2() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return cgroup2_root() / line[3:].lstrip("/")
    return cgroup2_root()


def in_netns(ns: str, fn: Callable):
    """Run fn() in a thread that has joined network namespace `ns` (setns is per thread); sockets
    created there stay in that namespace whatever thread uses them later."""
    box: dict = {}

    def run():
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"setns {ns}: {os.strerror(e)}")
        except BaseException as e:  # noqa: BLE001
            box["e"] = e
            return
        finally:
            os.close(fd)
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("v")


def ns_socket(ns: str, cgroup: Optional[Path] = None, *, bind: Optional[tuple[str, int]] = None,
              listen: bool = False) -> socket.socket:
    """A TCP socket in netns `ns`; with `cgroup`, created while this process is in that cgroup v2 so
    the sock_ops program attached there handles it (the socket's cgroup is fixed at creation)."""
    def mk():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if bind:
            s.bind(bind)
        if listen:
            s.listen(64)
        return s

    if cgroup is None:
        return in_netns(ns, mk)
    with _cgroup_lock:
        home = _own_cgroup2()
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        try:
            return in_netns(ns, mk)
        finally:
            (home / "cgroup.procs").write_text(str(os.getpid()))


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)


def nsexec(ns: str) -> list[str]:
    """nsenter --net keeps the mount namespace (ip netns exec remounts /sys, hiding cgroup2)."""
    return ["nsenter", f"--net=/run/netns/{ns}"]


def _wait_line(proc: subprocess.Popen, path: Path, needle: str, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:4]} exited {proc.returncode}: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.02)
    raise RuntimeError(f"timeout waiting for {needle!r} from {proc.args[:4]}: {path.read_text(errors='replace')[-2000:]}")


def build_tcpcrypt() -> None:
    """`make tcpcrypt`: the release build with the project's own toolchain (the Makefile names it;
    a no-op when up to date)."""
    r = subprocess.run(["nice", "-n", "10", "make", "-s", "tcpcrypt"], cwd=ROOT, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"make tcpcrypt failed:\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    for b in (TCPCRYPTD, ENO_ATTACH):
        if not b.exists():
            raise RuntimeError(f"{b} missing after build")


@dataclass
class Daemon:
    proc: subprocess.Popen
    ns: str
    control: Path
    stats_file: Path
    err: Path
    cgroup: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def status(self) -> dict:
        r = run([str(TCPCRYPTD), "status", "--json", "--control", str(self.control)])
        if r.returncode != 0:
            raise RuntimeError(f"tcpcryptd status: {r.stderr}")
        return json.loads(r.stdout)

    def stats(self) -> list[dict]:
        if not self.stats_file.exists():
            return []
        return [json.loads(l) for l in self.stats_file.read_text().splitlines() if l.strip()]

    def wait_stats(self, pred: Callable[[dict], bool], timeout: float = 10) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for s in self.stats():
                if pred(s):
                    return s
            time.sleep(0.05)
        raise AssertionError(f"no matching stats line in {self.stats()}; stderr: {self.err.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Capture:
    """tcpdump -U -w in a namespace (packet-buffered, so the file is readable while it runs)."""

    def __init__(self, ns: str, iface: str, path: Path, filt: str = "tcp"):
        self.path = path
        self.err = path.with_suffix(".err")
        with open(self.err, "w") as ef:
            # -B 64 MB: the veth is unshaped, so 1 MiB each way arrives at Gbit/s; tcpdump's default
            # 2 MB kernel buffer dropped packets now and then, and the byte counts below need them all.
            self.proc = subprocess.Popen([*nsexec(ns), "tcpdump", "-n", "-i", iface, "-B", "65536", "-U", "-s", "0",
                                          "-w", str(path), filt],
                                         stdout=subprocess.DEVNULL, stderr=ef)
        _wait_line(self.proc, self.err, "listening on")

    def eno(self, port: int, timeout: float = 5) -> tw.EnoWire:
        """ENO of the first connection to `port`, once its SYN-ACK is in the file."""
        end = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < end:
            try:
                w = tw.eno_from_pcap(self.path, port=port)
                if w.synack is not None:
                    return w
            except (ValueError, struct.error) as e:
                last = e
            time.sleep(0.02)
        raise AssertionError(f"no SYN/SYN-ACK to port {port} captured ({last})")

    def settle(self, timeout: float = 10) -> None:
        """Wait until the file stops growing (tcpdump may lag behind the transfer under load)."""
        end = time.monotonic() + timeout
        last, since = -1, time.monotonic()
        while time.monotonic() < end:
            n = self.path.stat().st_size if self.path.exists() else 0
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > 0.4:
                return
            time.sleep(0.05)

    def wait_closed(self, port: int, timeout: float = 10) -> None:
        """Wait until the connection to `port` has ended on the wire (FIN both ways, or a RST)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                segs = tw.eno_from_pcap(self.path, port=port).segments
                if any(s.flags & tw.TCP_RST for s in segs) or \
                        {s.from_active for s in segs if s.flags & tw.TCP_FIN} == {True, False}:
                    break
            except (ValueError, struct.error):
                pass
            time.sleep(0.05)
        self.settle()

    def stop(self, port: Optional[int] = None) -> None:
        if self.proc.poll() is None:
            if port is not None:
                self.wait_closed(port)
            self.settle()
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class TcLab:
    """Two namespaces joined by a veth, cgroups, and everything started in them; see module docstring."""

    def __init__(self, workdir: Path, tag: str | None = None):
        self.tag = tag or secrets.token_hex(2)
        self.nsp, self.nsd = f"wltc-p-{self.tag}", f"wltc-d-{self.tag}"
        self.ifp, self.ifd = f"wltcp{self.tag}", f"wltcd{self.tag}"
        self.dir = workdir
        self.cg_root = cgroup2_root()
        self.cgroups: list[Path] = []
        self.procs: list[subprocess.Popen] = []
        self.daemons: list[Daemon] = []
        self.captures: list[Capture] = []
        self.sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.problems: list[str] = []
        self._up()

    # ------------------------------------------------------------------ setup
    def _sh(self, *cmd: str) -> None:
        r = run(list(cmd))
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr}")

    def _up(self) -> None:
        self._sh("ip", "netns", "add", self.nsp)
        self._sh("ip", "netns", "add", self.nsd)
        self._sh("ip", "link", "add", self.ifp, "netns", self.nsp, "type", "veth", "peer", "name", self.ifd, "netns", self.nsd)
        for ns, ifc, ip in ((self.nsp, self.ifp, PEER_IP), (self.nsd, self.ifd, DAEMON_IP)):
            self._sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", ifc)
            self._sh("ip", "-n", ns, "link", "set", ifc, "up")
            self._sh("ip", "-n", ns, "link", "set", "lo", "up")

    def cgroup(self, name: str) -> Path:
        p = self.cg_root / f"wltc-{self.tag}-{name}"
        p.mkdir(exist_ok=True)
        if p not in self.cgroups:
            self.cgroups.append(p)
        return p

    def eno_attach(self, name: str, teps: list[int]) -> Path:
        """A peer cgroup with the eno-bpf program attached (TEPs most preferred first)."""
        cg = self.cgroup(name)
        out = self.dir / f"eno-attach-{name}.out"
        with open(out, "w") as f:
            p = subprocess.Popen([str(ENO_ATTACH), str(cg), *[hex(t) for t in teps]], stdout=f, stderr=subprocess.STDOUT)
        self.procs.append(p)
        _wait_line(p, out, "attached")
        return cg

    def daemon(self, *args: str, ns: Optional[str] = None, name: str = "d", nice: int = 0) -> Daemon:
        ns = ns or self.nsd
        cg = self.cg_root / f"wltc-{self.tag}-{name}"
        if cg not in self.cgroups:
            self.cgroups.append(cg)
        control, stats, err = (self.dir / f"{name}.sock", self.dir / f"{name}.jsonl", self.dir / f"{name}.err")
        with open(err, "w") as ef:
            p = subprocess.Popen([*nsexec(ns), *(["nice", "-n", str(nice)] if nice else []), str(TCPCRYPTD), "run", "--eno", "bpf", "--cgroup", str(cg),
                                  "--control", str(control), "--stats-file", str(stats), "--iptables", IPTABLES, *args],
                                 stdout=subprocess.DEVNULL, stderr=ef)
        d = Daemon(p, ns, control, stats, err, cg)
        self.daemons.append(d)
        _wait_line(p, err, "tcpcryptd: running")
        return d

    def capture(self, name: str, ns: Optional[str] = None, filt: str = "tcp") -> Capture:
        ns = ns or self.nsp
        c = Capture(ns, self.ifp if ns == self.nsp else self.ifd, self.dir / f"{name}.pcap", filt)
        self.captures.append(c)
        return c

    def sock(self, ns: str, cgroup: Optional[Path] = None, **kw) -> socket.socket:
        s = ns_socket(ns, cgroup, **kw)
        self.sockets.append(s)
        return s

    def thread(self, fn: Callable, *a) -> threading.Thread:
        t = threading.Thread(target=fn, args=a, daemon=True)
        t.start()
        self._threads.append(t)
        return t

    # ------------------------------------------------------------------ checks and teardown
    def chains(self, ns: str) -> list[str]:
        r = run([*nsexec(ns), IPTABLES, "-t", "nat", "-S"])
        return [l for l in r.stdout.splitlines() if "TCPCRYPTD" in l]

    def bpf_on(self, cg: Path) -> str:
        need_tool("bpftool")
        if not cg.exists():
            return ""
        r = run(["bpftool", "cgroup", "show", str(cg)])
        return r.stdout.strip()

    def ns_pids(self, ns: str) -> list[str]:
        r = run(["ip", "netns", "pids", ns])
        return r.stdout.split()

    def teardown(self) -> list[str]:
        problems = list(self.problems)
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()
        for d in self.daemons:
            d.stop()
        for c in self.captures:
            c.stop()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in (self.nsp, self.nsd):
            pids = self.ns_pids(ns)
            if pids:
                problems.append(f"processes left in {ns}: {pids}")
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
            left = self.chains(ns)
            if left:
                problems.append(f"TCPCRYPTD chains left in {ns}: {left}")
                run([*nsexec(ns), str(TCPCRYPTD), "cleanup", "--iptables", IPTABLES, "--control", str(self.dir / "none.sock"),
                     "--cgroup", "/nonexistent"])
        for cg in self.cgroups:
            end = time.monotonic() + 3
            while self.bpf_on(cg) and time.monotonic() < end:      # a bpf_link dies with its last fd
                time.sleep(0.05)
            b = self.bpf_on(cg)
            if b:
                problems.append(f"BPF still attached to {cg}: {b}")
            with contextlib.suppress(FileNotFoundError):
                procs = (cg / "cgroup.procs").read_text().split()
                if procs:
                    problems.append(f"processes left in {cg}: {procs}")
                    for pid in procs:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
                    time.sleep(0.2)
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            if cg.exists():
                problems.append(f"cgroup {cg} not removable")
        for ns in (self.nsp, self.nsd):
            run(["ip", "netns", "del", ns])
        listed = run(["ip", "netns", "list"]).stdout
        for ns in (self.nsp, self.nsd):
            if ns in listed.split():
                problems.append(f"namespace {ns} still there")
        return problems


# ============================================================================ service / client helpers

@dataclass
class Received:
    data: bytearray = field(default_factory=bytearray)
    error: Optional[BaseException] = None
    eof: bool = False
    done: threading.Event = field(default_factory=threading.Event)


def recv_until_eof(s: socket.socket, rec: Received) -> None:
    try:
        while True:
            d = s.recv(1 << 16)
            if not d:
                rec.eof = True
                break
            rec.data += d
    except OSError as e:
        rec.error = e
    finally:
        rec.done.set()


def sendall_then_shutdown(s: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)


def serve_once(lab: TcLab, listener: socket.socket, reply: bytes, *, reply_after_eof: bool = False) -> Received:
    """Accept one connection: read until EOF into the returned Received; send `reply` (concurrently,
    or only after EOF to exercise half-close) then shut down writing."""
    rec = Received()

    def run_():
        try:
            c, _ = listener.accept()
        except OSError as e:
            rec.error = e
            rec.done.set()
            return
        lab.sockets.append(c)
        if reply_after_eof:
            recv_until_eof(c, rec)
            sendall_then_shutdown(c, reply)
        else:
            lab.thread(sendall_then_shutdown, c, reply)
            recv_until_eof(c, rec)
    lab.thread(run_)
    return rec


def stream_bytes(segs: list[tw.Segment], from_active: bool) -> int:
    """Bytes of TCP payload sent in one direction, by sequence numbers (retransmissions count once)."""
    ss = [s for s in segs if s.from_active == from_active]
    syn = next(s for s in ss if s.syn)
    isn = syn.seq
    end = 0
    for s in ss:
        rel = (s.seq - isn - 1) % (1 << 32)
        if s.payload_len and rel < (1 << 31):
            end = max(end, rel + s.payload_len)
    return end


def start_daemon_inbound(lab: TcLab, *extra: str) -> Daemon:
    return lab.daemon("--out-port", "0", "--in-port", "7002", "--service-port", str(SERVICE_PORT), *extra)


def start_daemon_outbound(lab: TcLab, *extra: str) -> Daemon:
    return lab.daemon("--out-port", "7001", "--in-port", "0", "--out-dport", str(PEER_PORT), *extra)


# ============================================================================ fixtures

pytestmark = pytest.mark.root


@pytest.fixture(scope="session")
def tcpcrypt_built():
    build_tcpcrypt()


@pytest.fixture
def lab(tcpcrypt_built, tmp_path):
    l = TcLab(tmp_path)
    try:
        yield l
    finally:
        problems = l.teardown()
    if problems:
        pytest.fail("lab not clean after the test: " + "; ".join(problems))


def daemon_conn(d: Daemon, mode: str = "tcpcrypt") -> dict:
    return d.wait_stats(lambda s: s.get("mode") == mode)


def peer_as_a(lab: TcLab, tep: int, aead: int, *, data_up: bytes, data_down: bytes, reply_after_eof=False,
              daemon_args: tuple[str, ...] = ()):
    """Python Peer = host A (active opener) -> daemon's inbound interception -> service in the daemon ns."""
    d = start_daemon_inbound(lab, *daemon_args)
    service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)
    srec = serve_once(lab, service, data_down, reply_after_eof=reply_after_eof)
    cg = lab.eno_attach(f"p{tep:x}", [tep])
    cap = lab.capture("a")
    s = lab.sock(lab.nsp, cg)
    s.settimeout(30)
    s.connect((DAEMON_IP, SERVICE_PORT))
    w = cap.eno(SERVICE_PORT)
    assert w.negotiation.ok, w.negotiation.reason
    assert w.active_role == "A"
    assert w.negotiation.tep == tep
    peer = rp.Peer(s, "A", w.negotiation.tep, w.transcript, tep_byte=w.negotiation.tep_byte,
                   ciphers=[aead], record=True)
    peer.handshake()
    return d, peer, srec, cap, w


# ============================================================================ tests: Peer as A

TEPS = [rp.TEP_CURVE25519, rp.TEP_P256]
AEAD_IDS = [rp.AEAD_AES_128_GCM, rp.AEAD_AES_256_GCM, rp.AEAD_CHACHA20_POLY1305]


@pytest.mark.parametrize("aead", AEAD_IDS, ids=lambda a: AEAD_NAMES[a])
@pytest.mark.parametrize("tep", TEPS, ids=lambda t: f"tep{t:#x}")
def test_peer_as_a_duplex(lab, tep, aead):
    """Peer (A) -> tcpcryptd (B) -> service: handshake, same session ID, 1 MiB each way byte-exact,
    FINp both ways, and the wire bytes = Init + data + 20 per frame (8548 §4.1, §4.2)."""
    up, down = os.urandom(MB + 12345), os.urandom(MB + 54321)
    d, peer, srec, cap, w = peer_as_a(lab, tep, aead, data_up=up, data_down=down)
    assert peer.aead == aead
    got = Received()
    t = lab.thread(lambda: got.data.extend(peer.recv_all()))
    peer.send(up)
    peer.shutdown_write()
    t.join(60)
    assert not t.is_alive()
    peer.expect_tcp_eof()               # nothing after the daemon's FINp frame, then TCP FIN
    assert srec.done.wait(30)
    assert srec.error is None and srec.eof
    assert bytes(srec.data) == up, "service did not receive the Peer's bytes exactly"
    assert bytes(got.data) == down, "Peer did not decrypt the daemon's frames to the service's bytes"
    assert peer.recv_frames[-1].fin and [f.fin for f in peer.recv_frames].count(True) == 1   # FINp last, once
    assert all(f.data_len <= 16384 for f in peer.recv_frames)                             # --frame-size default
    assert len(peer.recv_frames) >= math.ceil(len(down) / 16384) + 1
    peer.close()

    st = daemon_conn(d)
    assert st["state"] == "closed", st
    assert st["role"] == "B"
    assert st["tep_id"] == tep
    assert st["session_id"] == peer.session_id.hex()
    assert bytes.fromhex(st["session_id"])[0] == w.negotiation.tep_byte
    assert st["eno"]["ack_had_eno"] is True
    c = st["counters"]
    assert c["plaintext_received"] == len(up) and c["plaintext_sent"] == len(down)
    assert c["frames_received"] == len(peer.sent_frames) and c["frames_sent"] == len(peer.recv_frames)

    # overhead physics from the capture
    cap.stop(SERVICE_PORT)
    segs = tw.eno_from_pcap(cap.path, port=SERVICE_PORT).segments
    n_up_frames = math.ceil(len(up) / 16384) + 1           # + the empty FINp frame
    assert len(peer.sent_frames) == n_up_frames
    assert len(peer.init1) == init1_len(tep, 1) and len(peer.init2) == init2_len(tep)
    want_up = init1_len(tep, 1) + len(up) + FRAME_OVERHEAD * n_up_frames
    want_down = init2_len(tep) + len(down) + FRAME_OVERHEAD * len(peer.recv_frames)
    assert stream_bytes(segs, True) == want_up
    assert stream_bytes(segs, False) == want_down
    assert c["ciphertext_received"] == want_up and c["ciphertext_sent"] == want_down
    assert c["handshake_bytes_received"] == init1_len(tep, 1) and c["handshake_bytes_sent"] == init2_len(tep)


def test_peer_as_a_half_close_and_status(lab):
    """Peer's FINp first, then the service answers after EOF (half-close relayed); the session ID is
    also visible in `tcpcryptd status --json` while the connection is open."""
    up, down = os.urandom(MB), os.urandom(MB)
    d, peer, srec, cap, w = peer_as_a(lab, rp.TEP_CURVE25519, rp.AEAD_AES_128_GCM, data_up=up, data_down=down,
                                      reply_after_eof=True)
    peer.send(b"ping")
    deadline = time.monotonic() + 10
    conns = []
    while time.monotonic() < deadline:
        conns = [c for c in d.status()["connections"] if c.get("mode") == "tcpcrypt"]
        if conns and conns[0].get("session_id"):
            break
        time.sleep(0.05)
    assert conns and conns[0]["session_id"] == peer.session_id.hex()
    peer.send(up)
    peer.shutdown_write()
    assert srec.done.wait(30) and srec.eof
    assert bytes(srec.data) == b"ping" + up
    got = peer.recv_all()                     # the service only starts sending after our FIN
    assert got == down
    peer.expect_tcp_eof()
    st = daemon_conn(d)
    assert st["state"] == "closed" and st["session_id"] == peer.session_id.hex()


def test_rekey_both_ways(lab):
    """8548 §3.8 rekeying across implementations: the daemon rekeys every 256 KiB it sends
    (--rekey-after-bytes), the Peer follows each step; the Peer initiates a rekey mid-stream and the
    daemon answers; data stays byte-exact and both sides end on the same generations."""
    up, down = os.urandom(MB), os.urandom(MB)
    d, peer, srec, cap, w = peer_as_a(lab, rp.TEP_CURVE25519, rp.AEAD_CHACHA20_POLY1305, data_up=up, data_down=down,
                                      daemon_args=("--rekey-after-bytes", str(256 * 1024)))
    got = Received()
    t = lab.thread(lambda: got.data.extend(peer.recv_all()))
    peer.send(up[:MB // 2])
    peer.rekey()                          # empty frame with rekey = 1 (8548 §3.8, §3.9)
    peer.send(up[MB // 2:])
    peer.shutdown_write()
    t.join(60)
    assert bytes(got.data) == down
    assert srec.done.wait(30) and bytes(srec.data) == up
    st = daemon_conn(d)
    assert st["state"] == "closed", st
    c = st["counters"]
    assert c["rekeys_sent"] >= 3 and c["rekeys_received"] >= 1
    rekeyed_in = [f for f in peer.recv_frames if f.control & rp.CONTROL_REKEY]
    rekeyed_out = [f for f in peer.sent_frames if f.control & rp.CONTROL_REKEY]
    # Each rekey = 1 frame on the wire moves the receiver's remote generation by one (8548 §3.8), so:
    local_d, remote_d = st["generations"]
    assert remote_d == len(rekeyed_out) == c["rekeys_received"]
    assert peer.remote_generation == len(rekeyed_in) >= 3          # 1 MiB / 256 KiB
    # a host's local generation = its own initiations, raised to the remote one when that is ahead; a host
    # that already sent its TCP FIN raises it without sending a frame ("if the receiver has not yet
    # transmitted a segment with the FIN flag set, it MUST immediately send a frame ... rekey = 1").
    assert local_d == c["rekeys_sent"] >= len(rekeyed_in)
    assert local_d == max(len(rekeyed_in), remote_d)
    assert peer.local_generation == max(len(rekeyed_out), peer.remote_generation)


# ============================================================================ tests: Peer as B

@pytest.mark.parametrize("aead", AEAD_IDS, ids=lambda a: AEAD_NAMES[a])
@pytest.mark.parametrize("tep", TEPS, ids=lambda t: f"tep{t:#x}")
def test_peer_as_b_duplex(lab, tep, aead):
    """plain client -> tcpcryptd (A, outbound interception) -> Peer (B): Init1 from the daemon parsed
    by the Peer, the AEAD chosen by the Peer from the daemon's list, 1 MiB each way, FINp both ways."""
    d = start_daemon_outbound(lab)
    cg = lab.eno_attach(f"p{tep:x}", [tep])
    listener = lab.sock(lab.nsp, cg, bind=(PEER_IP, PEER_PORT), listen=True)
    cap = lab.capture("b")
    client = lab.sock(lab.nsd)
    client.settimeout(30)
    up, down = os.urandom(MB + 777), os.urandom(MB + 999)   # up = client -> Peer
    crec = Received()

    def client_run():
        client.connect((PEER_IP, PEER_PORT))
        lab.thread(sendall_then_shutdown, client, up)
        recv_until_eof(client, crec)
    lab.thread(client_run)
    listener.settimeout(10)
    s, _ = listener.accept()
    lab.sockets.append(s)
    s.settimeout(30)
    w = cap.eno(PEER_PORT)
    assert w.negotiation.ok, w.negotiation.reason
    assert w.active_role == "A"             # the daemon opened: the Peer is B
    assert w.negotiation.tep == tep
    assert w.third_segment_has_eno
    peer = rp.Peer(s, "B", w.negotiation.tep, w.transcript, tep_byte=w.negotiation.tep_byte, ciphers=[aead], record=True)
    peer.handshake()
    assert peer.aead == aead
    assert len(peer.init1) == init1_len(tep, 3), "daemon offers its three AEADs in Init1"
    assert len(peer.init2) == init2_len(tep)
    t = lab.thread(lambda: (peer.send(down), peer.shutdown_write()))
    got = peer.recv_all()
    t.join(60)
    peer.expect_tcp_eof()
    assert got == up
    assert crec.done.wait(30) and crec.eof and crec.error is None
    assert bytes(crec.data) == down
    peer.close()
    st = daemon_conn(d)
    assert st["state"] == "closed", st
    assert st["role"] == "A" and st["tep_id"] == tep and st["direction"] == "out"
    assert st["session_id"] == peer.session_id.hex()
    cap.stop(PEER_PORT)
    segs = tw.eno_from_pcap(cap.path, port=PEER_PORT).segments
    assert stream_bytes(segs, True) == init1_len(tep, 3) + len(up) + FRAME_OVERHEAD * len(peer.recv_frames)
    assert stream_bytes(segs, False) == init2_len(tep) + len(down) + FRAME_OVERHEAD * len(peer.sent_frames)


# ============================================================================ tests: tampering

@pytest.mark.parametrize("where", ["ciphertext", "tag", "control", "clen"])
def test_tampered_frame_resets(lab, where):
    """A frame whose bytes were modified after seal() (8548 §3.6: AEAD FAIL -> abort) makes the
    daemon reset the connection; the plaintext service never sees the tampered bytes."""
    d, peer, srec, cap, w = peer_as_a(lab, rp.TEP_CURVE25519, rp.AEAD_AES_128_GCM, data_up=b"", data_down=b"",
                                      reply_after_eof=True)
    peer.send(b"hello")
    deadline = time.monotonic() + 10
    while bytes(srec.data) != b"hello" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert bytes(srec.data) == b"hello"
    secret = b"TAMPERED-PLAINTEXT-MUST-NOT-ARRIVE"
    f = bytearray(peer.seal(secret))
    if where == "ciphertext":
        f[3 + 1 + 5] ^= 0x01
    elif where == "tag":
        f[-1] ^= 0x80
    elif where == "control":
        f[0] ^= 0x02          # a cres bit: authenticated as associated data (8548 §4.2.3)
    else:                      # clen one longer, then one extra byte: tag check over the wrong bytes
        clen = struct.unpack(">H", f[1:3])[0]
        f[1:3] = struct.pack(">H", clen + 1)
        f += b"\x00"
    peer.send_raw(bytes(f))
    peer.abort_on_error = False
    with pytest.raises(rp.PeerAbortError):
        peer.recv()
    assert srec.done.wait(10)
    assert secret not in bytes(srec.data) and bytes(srec.data) == b"hello"
    st = d.wait_stats(lambda s: s.get("mode") == "tcpcrypt")
    assert st["state"] == "aborted", st
    cap.stop(SERVICE_PORT)
    segs = tw.eno_from_pcap(cap.path, port=SERVICE_PORT).segments
    assert any(s.flags & tw.TCP_RST and not s.from_active for s in segs), "no RST from the daemon on the wire"
    assert not any(s.flags & tw.TCP_FIN and not s.from_active for s in segs), "daemon sent FIN (EOF) instead of abort"


def test_no_plaintext_after_eno_success(lab):
    """ENO negotiated tcpcrypt, then the Peer sends plain application bytes instead of Init1: the daemon
    must not fall back to relaying them (8547 §4.6 "MUST NOT ... send plaintext" once encryption is
    enabled; 8548 §4.1 an Init1 with a wrong magic aborts) -- it resets, the service sees nothing."""
    d = start_daemon_inbound(lab)
    service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)
    service.settimeout(3)
    cg = lab.eno_attach("p23", [rp.TEP_CURVE25519])
    cap = lab.capture("nodown")
    s = lab.sock(lab.nsp, cg)
    s.settimeout(10)
    s.connect((DAEMON_IP, SERVICE_PORT))
    assert cap.eno(SERVICE_PORT).negotiation.ok
    s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n" + b"p" * 100)
    with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
        while s.recv(65536):
            pass
    got = b""
    with contextlib.suppress(OSError):
        c, _ = service.accept()
        lab.sockets.append(c)
        c.settimeout(3)
        got = c.recv(65536)
    assert b"GET" not in got
    st = d.wait_stats(lambda x: True)
    assert st["state"] == "aborted" and st["mode"] == "tcpcrypt", st


def test_tep_choice_when_peer_offers_both(lab):
    """The Peer (A) offers 0x23 and 0x21, the daemon (B) prefers P-256 (--teps 0x21,0x23): B's SYN-ACK
    names one TEP and the negotiated TEP is the last valid one in B's option (8547 §4.5); both sides
    then run P-256 and agree on the session ID, whose first byte is that TEP byte (8548 §3.4)."""
    d = start_daemon_inbound(lab, "--teps", "0x21,0x23")
    service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)
    srec = serve_once(lab, service, b"pong")
    cg = lab.eno_attach("p2321", [rp.TEP_CURVE25519, rp.TEP_P256])
    cap = lab.capture("both")
    s = lab.sock(lab.nsp, cg)
    s.settimeout(30)
    s.connect((DAEMON_IP, SERVICE_PORT))
    w = cap.eno(SERVICE_PORT)
    assert w.syn_eno == bytes([69, 4, 0x23, 0x21])
    assert w.synack_eno == bytes([69, 4, 0x01, 0x21])      # global suboption b = 1, then B's TEP
    assert w.negotiation.ok and w.negotiation.tep == rp.TEP_P256
    peer = rp.Peer(s, "A", w.negotiation.tep, w.transcript, tep_byte=w.negotiation.tep_byte)
    peer.handshake()
    peer.send(b"ping")
    peer.shutdown_write()
    assert peer.recv_all() == b"pong"
    assert srec.done.wait(10) and bytes(srec.data) == b"ping"
    st = daemon_conn(d)
    assert st["tep_id"] == rp.TEP_P256 and st["session_id"] == peer.session_id.hex()
    assert st["session_id"][:2] == "21"


# ============================================================================ tests: fallback to plain TCP

def test_fallback_plain_client_to_daemon(lab):
    """A client without ENO to the daemon's service: plain TCP end to end (8547 §4.6)."""
    d = start_daemon_inbound(lab)
    service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)
    up, down = os.urandom(300_000), os.urandom(200_000)
    srec = serve_once(lab, service, down)
    cap = lab.capture("plainc")
    c = lab.sock(lab.nsp)                       # not in an ENO cgroup
    c.settimeout(30)
    c.connect((DAEMON_IP, SERVICE_PORT))
    crec = Received()
    lab.thread(sendall_then_shutdown, c, up)
    recv_until_eof(c, crec)
    assert bytes(crec.data) == down and srec.done.wait(10) and bytes(srec.data) == up
    st = daemon_conn(d, "plain")
    assert st["direction"] == "in"
    cap.stop(SERVICE_PORT)
    w = tw.eno_from_pcap(cap.path, port=SERVICE_PORT)
    assert not w.negotiation.ok and not w.eno_segments
    assert stream_bytes(w.segments, True) == len(up) and stream_bytes(w.segments, False) == len(down)


def test_fallback_daemon_to_plain_server(lab):
    """The daemon as client to a server without ENO: plain TCP; nothing but the app's bytes on the wire."""
    d = start_daemon_outbound(lab)
    listener = lab.sock(lab.nsp, bind=(PEER_IP, PEER_PORT), listen=True)   # no ENO cgroup
    up, down = os.urandom(300_000), os.urandom(200_000)
    srec = serve_once(lab, listener, down)
    cap = lab.capture("plains")
    c = lab.sock(lab.nsd)
    c.settimeout(30)
    c.connect((PEER_IP, PEER_PORT))
    crec = Received()
    lab.thread(sendall_then_shutdown, c, up)
    recv_until_eof(c, crec)
    assert bytes(crec.data) == down and srec.done.wait(10) and bytes(srec.data) == up
    st = daemon_conn(d, "plain")
    assert st["direction"] == "out"
    cap.stop(PEER_PORT)
    w = tw.eno_from_pcap(cap.path, port=PEER_PORT)
    assert w.syn_eno is not None, "the daemon's SYN carries its ENO option"
    assert w.synack_eno is None and not w.negotiation.ok
    assert stream_bytes(w.segments, True) == len(up) and stream_bytes(w.segments, False) == len(down)


# ============================================================================ tests: kill -9 and cleanup

def test_kill9_then_cleanup(lab):
    """kill -9 leaves the nat chains (and the cgroup dir and control socket) but no BPF program;
    `tcpcryptd cleanup` in that namespace removes the rest."""
    d = lab.daemon("--out-port", "7001", "--in-port", "7002", "--service-port", str(SERVICE_PORT))
    assert lab.chains(lab.nsd)
    assert lab.bpf_on(d.cgroup)
    assert d.control.exists()
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(10)
    end = time.monotonic() + 3
    while lab.bpf_on(d.cgroup) and time.monotonic() < end:
        time.sleep(0.05)
    assert not lab.bpf_on(d.cgroup), "BPF program outlived the daemon"
    assert lab.chains(lab.nsd), "expected chains left behind by kill -9"
    r = run([*nsexec(lab.nsd), str(TCPCRYPTD), "cleanup", "--iptables", IPTABLES, "--control", str(d.control), "--cgroup", str(d.cgroup)])
    assert r.returncode == 0, r.stderr
    assert lab.chains(lab.nsd) == []
    assert not d.control.exists()
    assert not d.cgroup.exists()
    assert not lab.ns_pids(lab.nsd)
