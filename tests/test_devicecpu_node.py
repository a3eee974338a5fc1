"""A node's device computes on its cores, whatever runs it (src/devicecpu/ + nodes.devicecpu): the
threads and processes of a node share the device's cores (the node's cores file); counters
survive an exec; a client's TLS handshake pays the platform's full or resumed cost, the client
only; a node's concurrent handshakes are all charged; the TSC's rate is handed down and a TSC
that is not invariant is refused.

Expected times are worked out here by hand from the profile's numbers (devices/builtin.yaml), not
by the code under test. Timed tests are marked `netem`: they run where experiments compute (the
UML guest: one CPU, whose scheduler and clock the padding must survive). Where several workers
start at once, the guest's one CPU runs their real work one after another, which the device
would not: the upper bounds add what the same workers take without the library (`bare`), as
tests/test_devicecpu.py does for a handshake.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import BUSY_SLACK_S
from wearlab.errors import EnvironmentProblem, InputError
from wearlab.model.devices import builtin_devices, resolve_devices, specs_from_mapping
from wearlab.nodes.devicecpu import (
    CORES_ENV,
    TSC_HZ_ENV,
    DeviceProcess,
    check_invariant_tsc,
    node_cpu,
    read_counters,
    tsc_flags_missing,
)

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.10
MIB = 1 << 20

# --- the device's time for SHA-256, by hand ----------------------------------------------------
# builtin.yaml: vehicle-embedded-computer's sha256 does 38517.47 kB/s at 1024 B and 34417.32 kB/s
# at 8192 B (seed 002 Table 5.1); sony-smartwatch-3 is that computer's times x 0.8085 and
# lg-g-watch-r is like it x 1.0. Beyond the last block size the last segment's slope continues.
T1024 = 1024 / 38517.47e3
T8192 = 8192 / 34417.32e3


def watch_sha256_s(nbytes: int) -> float:
    return 0.8085 * (T8192 + (T8192 - T1024) * (nbytes - 8192) / (8192 - 1024))


def test_hand_worked_numbers():
    """The by-hand figure for 8 MiB: 0.8085 x (238.02 us + 29.497 ns/B x 8380416 B) = 0.2001 s."""
    assert watch_sha256_s(8 * MIB) == pytest.approx(0.2001, abs=1e-4)
    assert watch_sha256_s(2 * MIB) == pytest.approx(0.0500, abs=1e-4)


def _device(name: str, **fields):
    """A test device: the watch with `fields` changed (e.g. cores: 1)."""
    spec = {"like": {"device": "lg-g-watch-r", "scale": fields.pop("scale", 1.0), "assumed": "a test device"},
            **fields}
    return resolve_devices(specs_from_mapping({name: spec}, "test", {}), builtin_devices(), "test", {})[name]


# --- workers: threads and processes hashing at once --------------------------------------------

WORKER = r"""
import hashlib, json, sys, threading, time
threads, ops, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
buf = b"x" * size
go = threading.Barrier(threads + 1)
spans = []
def work():
    go.wait()
    t0 = time.monotonic()
    for _ in range(ops):
        hashlib.sha256(buf).digest()   # one EVP_DigestUpdate of `size` bytes, the GIL released
    spans.append((t0, time.monotonic()))
ts = [threading.Thread(target=work) for _ in range(threads)]
for t in ts:
    t.start()
print("ready", flush=True)
sys.stdin.readline()                   # the test's start signal
go.wait()
for t in ts:
    t.join()
print(json.dumps(spans), flush=True)
"""


def _run_workers(env: dict[str, str], processes: int, threads: int, ops: int, size: int) -> list[tuple[float, float]]:
    """`processes` processes of `threads` threads, each doing `ops` SHA-256 digests of `size` bytes,
    released together: each worker's (start, end) on CLOCK_MONOTONIC."""
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(threads), str(ops), str(size)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(processes)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        spans = [tuple(s) for p in procs for s in json.loads(p.stdout.readline())]
        for p in procs:
            assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return spans


def _node(tmp_path, device, name, processes, threads, ops, size):
    """The workers as the processes of one node with `device`: (their spans, its counters)."""
    proc = DeviceProcess(device, tmp_path, name, node=node_cpu(tmp_path, name, device))
    spans = _run_workers(proc.env(), processes, threads, ops, size)
    return spans, read_counters(proc.stats)


def _makespan(spans) -> float:
    return max(e for _, e in spans) - min(s for s, _ in spans)


def _host(c) -> float:
    """What this machine itself spent in the workers' real digests (the library's host_s): the
    guest's one CPU runs them one after another (~5-10 ms per 8 MiB there), so a worker may reach
    its digest that much after it took its start time, which the device would not see. Upper
    bounds allow it; lower bounds do not (nothing may finish before the device would)."""
    return c["digest:sha256"].host_s


@pytest.mark.netem
@pytest.mark.parametrize("processes,threads", [(1, 2), (2, 1)], ids=["two-threads", "two-processes"])
def test_one_core_takes_the_sum_of_the_work(tmp_path, processes, threads):
    """A one-core device: two workers computing at once, each 4 digests of 2 MiB (50.0 ms each on
    the watch's tables), take the device's time for all eight: 400 ms, not 200."""
    device = _device("one-core", cores={"value": 1, "assumed": "a test device"})
    spans, c = _node(tmp_path, device, "one-core", processes, threads, 4, 2 * MIB)
    want = 8 * watch_sha256_s(2 * MIB)
    assert want * (1 - TOLERANCE) <= _makespan(spans) <= want * (1 + TOLERANCE) + _host(c), (spans, want, _host(c))
    assert c["digest:sha256"].calls == 8
    assert c["cores:queued"].device_s > 0  # the workers waited for the core


@pytest.mark.netem
def test_four_on_the_watchs_four_cores_take_the_time_of_one(tmp_path):
    """The four-core watch: four processes each digesting 8 MiB at once (200.1 ms of the watch's
    time each) take the time of one: none waits for a core."""
    device = builtin_devices()["lg-g-watch-r"]
    assert device.cores.value == 4
    spans, c = _node(tmp_path, device, "watch", 4, 1, 1, 8 * MIB)
    one = watch_sha256_s(8 * MIB)
    for start, end in spans:
        assert one * (1 - TOLERANCE) <= end - start, (spans, one)
    assert _makespan(spans) <= one * (1 + TOLERANCE) + _host(c), (spans, one, _host(c))
    assert c["digest:sha256"].calls == 4 and "cores:queued" not in c


@pytest.mark.netem
def test_five_on_the_watchs_four_cores_take_the_time_of_two(tmp_path):
    """A fifth process digesting 8 MiB waits for the first core to free: five take the time of
    two, 400.2 ms (an operation holds its core to its end: the library queues operations, it
    does not time-slice them)."""
    spans, c = _node(tmp_path, builtin_devices()["lg-g-watch-r"], "watch", 5, 1, 1, 8 * MIB)
    one = watch_sha256_s(8 * MIB)
    assert 2 * one * (1 - TOLERANCE) <= _makespan(spans) <= 2 * one * (1 + TOLERANCE) + _host(c), (spans, one)
    assert c["digest:sha256"].calls == 5 and c["cores:queued"].calls == 1


# --- counters through exec -------------------------------------------------------------------

EXEC = r"""
import hashlib, os, sys
hashlib.sha256(b"p" * (1 << 20)).digest()
if sys.argv[1] == "parent":
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[2], "child", ""])
"""


def test_an_execd_child_keeps_the_parents_counters(tmp_path):
    """A process hashes 1 MiB and execs a program that hashes 1 MiB: the counters hold both (the
    child inherits WEARLAB_DEVICE_STATS and opens the file as it is)."""
    proc = DeviceProcess(builtin_devices()["lg-g-watch-r"], tmp_path, "exec")
    r = subprocess.run([sys.executable, "-c", EXEC, "parent", EXEC], env=proc.env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    c = read_counters(proc.stats)["digest:sha256"]
    assert c.calls == 2 and c.bytes == 2 * MIB
    assert c.device_s == pytest.approx(2 * watch_sha256_s(MIB), rel=1e-3)


def test_a_node_is_one_cores_file(tmp_path):
    """The processes of a node share one cores file, with the device's cores and the TSC's rate,
    which every process gets in its environment too (no calibration at start)."""
    device = builtin_devices()["google-glass-explorer"]
    node = node_cpu(tmp_path, "glass", device)
    assert node_cpu(tmp_path, "glass", device) is node
    a = DeviceProcess(device, tmp_path / "a", "agent", node=node).env()
    b = DeviceProcess(device, tmp_path / "b", "proxy", node=node, cpu_factor=True).env()
    assert a[CORES_ENV] == b[CORES_ENV] == str(node.path)
    assert node.cores == 2
    assert float(a[TSC_HZ_ENV]) == node.tsc_hz > 1e8
    data = node.path.read_bytes()
    assert data.startswith(b"WLCORE1\0") and int.from_bytes(data[8:12], "little") == 2


# --- the TSC ---------------------------------------------------------------------------------


def test_a_tsc_that_is_not_invariant_is_refused(tmp_path):
    flags = "fpu tsc rdtscp constant_tsc nonstop_tsc sse2"
    assert tsc_flags_missing(f"processor\t: 0\nflags\t\t: {flags}\n") == []
    assert tsc_flags_missing("processor\t: 0\nflags\t\t: fpu tsc constant_tsc\n") == ["nonstop_tsc"]
    assert tsc_flags_missing("processor\t: 0\n") == ["constant_tsc", "nonstop_tsc"]
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nflags\t\t: fpu tsc\n")
    if os.uname().machine == "x86_64":
        with pytest.raises(EnvironmentProblem, match="invariant TSC.*constant_tsc and nonstop_tsc"):
            check_invariant_tsc(fake)


@pytest.mark.netem
def test_where_nodes_run_the_tsc_is_invariant():
    """The guest's /proc/cpuinfo shows the host's flags (UML copies them): checked there."""
    check_invariant_tsc()


# --- TLS: the platform's cost per handshake ----------------------------------------------------


@pytest.fixture
def tls13_server(tmp_path):
    """A TLS 1.3 server in this process (no library): one thread per connection, a deep backlog,
    session tickets (resumption) on. Yields (CA file, port)."""
    from wearlab.nodes.certs import make_pki

    ca, certs = make_pki(tmp_path / "pki", "localhost", kinds=("rsa2048",))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(certs["rsa2048"].cert, certs["rsa2048"].key)
    srv = socket.create_server(("127.0.0.1", 0), backlog=256)
    stop = threading.Event()

    def serve(conn):
        try:
            with ctx.wrap_socket(conn, server_side=True) as s:
                s.recv(1024)
                s.sendall(b"ok\n")
        except (OSError, ssl.SSLError):
            pass

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield ca, srv.getsockname()[1]
    stop.set()
    srv.close()


RESUME = r"""
import json, socket, ssl, sys, time
ca, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile=ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
def once(session=None):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.monotonic()
    c = ctx.wrap_socket(s, server_hostname="localhost", session=session)
    took = time.monotonic() - t0
    c.sendall(b"hi\n")
    c.recv(1024)            # the server's NewSessionTickets come before its reply
    out = (took, c.session, c.session_reused)
    c.close()
    return out
full, session, _ = once()
resumed, _, reused = once(session)
print(json.dumps({"full": full, "resumed": resumed, "reused": reused}))
"""


def _resume(ca, port, env) -> dict:
    r = subprocess.run([sys.executable, "-c", RESUME, str(ca), str(port)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["reused"]
    return got


@pytest.mark.netem
def test_a_resumed_tls13_handshake_pays_the_resumption_cost(tmp_path, tls13_server):
    """The watch's client: a full TLS 1.3 handshake pays the platform's 110.383 ms, a resumed one its
    47.332 ms (builtin.yaml; their arithmetic in tests/test_devices.py). By hand, with the
    primitives each does (X25519 key pair and agreement: 1 / 215.4 s x 0.8085 = 3.754 ms each; the
    full one also verifies the chain - cert rsa2048: the intermediate's and the leaf's RSA-2048
    signatures, 2 x 2.5 ms - and the server's RSA-2048 CertificateVerify, 2.5 ms):
    full 125.39 ms, resumed 54.84 ms. A CPU factor of 1 leaves what no table names (HKDF, the
    DRBG) at this machine's time, which the bare handshake (no library) bounds, with the rest of
    this machine's own handshake work. The server's side pays nothing (it runs without a device)."""
    ca, port = tls13_server
    device = _device("watch-factor-1", cpu_factor={"value": 1, "assumed": "a test device"})
    proc = DeviceProcess(device, tmp_path, "client")
    slow, bare = [], []
    for _ in range(5):  # alternated, so both see the same load on this machine; medians
        slow.append(_resume(ca, port, proc.env()))
        bare.append(_resume(ca, port, dict(os.environ)))
    c = read_counters(proc.stats)
    assert c["platform:handshake"].calls == 5 and c["platform:handshake"].device_s == pytest.approx(5 * 0.110383)
    assert c["platform:resumed-handshake"].calls == 5
    assert c["platform:resumed-handshake"].device_s == pytest.approx(5 * 0.047332, rel=1e-4)
    x25519 = 0.8085 / 215.4
    want = {"full": 0.110383 + 2 * x25519 + 3 * 0.0025, "resumed": 0.047332 + 2 * x25519}
    # Above: what this machine spends on its own, and - the padded client sleeps the device's time
    # (pad:sleep) where the bare one computes - a busy machine's late wake-up (BUSY_SLACK_S,
    # conftest: the guest's one CPU shared with the server; CI failed by 0.9 ms without it).
    for kind, w in want.items():
        got, here = statistics.median(r[kind] for r in slow), statistics.median(r[kind] for r in bare)
        assert w * (1 - TOLERANCE) <= got <= w * (1 + TOLERANCE) + here + BUSY_SLACK_S, (kind, slow, bare, w)


MANY = r"""
import socket, ssl, sys, selectors
ca, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
conns = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    conns.append(ctx.wrap_socket(s, server_hostname="localhost", do_handshake_on_connect=False))
sel = selectors.DefaultSelector()
for c in conns:
    sel.register(c, selectors.EVENT_READ | selectors.EVENT_WRITE)
pending, steps = set(conns), 0
while pending:
    for key, _ in sel.select(timeout=5):
        c = key.fileobj
        if c not in pending:
            continue
        steps += 1
        try:
            c.do_handshake()
        except ssl.SSLWantReadError:
            sel.modify(c, selectors.EVENT_READ)
            continue
        except ssl.SSLWantWriteError:
            sel.modify(c, selectors.EVENT_WRITE)
            continue
        pending.discard(c)
        sel.unregister(c)
print(steps)
"""


@pytest.mark.netem
def test_64_concurrent_handshakes_are_all_charged(tmp_path, tls13_server):
    """One thread drives 64 client handshakes at once (non-blocking, each started before any
    finishes): every one pays the platform's cost, none overflows the library's table. A watch
    scaled to 0.02 keeps it short: 64 x 2.2077 ms of platform."""
    ca, port = tls13_server
    device = _device("quick-watch", scale=0.02)
    proc = DeviceProcess(device, tmp_path, "many", node=node_cpu(tmp_path, "watch", device))
    r = subprocess.run([sys.executable, "-c", MANY, str(ca), str(port), "64"], env=proc.env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 64  # interleaved: more handshake steps than handshakes
    c = read_counters(proc.stats)
    assert c["platform:handshake"].calls == 64
    assert c["platform:handshake"].device_s == pytest.approx(64 * 0.02 * 0.110383, rel=1e-5)
    assert "platform:resumed-handshake" not in c and "hs:overflow" not in c
    assert c["phase:handshake"].device_s >= 64 * 0.02 * 0.110383


def test_a_device_without_cores_given_is_like_its_base():
    """`cores` and `resumed_handshake` follow `like:` as the other fields do; a device that gives
    its own handshake but no resumed one pays the full cost for a resumption (assumed)."""
    glass = builtin_devices()["google-glass-explorer"]
    assert glass.cores.value == 2 and glass.cores.basis == "measured"
    assert glass.resumed.seconds() == pytest.approx(0.047332 * 1.2, rel=1e-4)
    d = _device("own-handshake", handshake={"time": "50ms", "assumed": "test"})
    assert d.cores.value == 4 and d.resumed.seconds() == pytest.approx(0.050) and d.resumed.basis == "assumed"
    assert "resumed_handshake_ns 50000000" in d.profile_text()


def test_a_device_has_1_to_64_cores():
    """The cores file holds 64 slots: a device with more is refused where it is written."""
    with pytest.raises(InputError, match="cores"):
        _device("huge", cores={"value": 65, "assumed": "test"})
