"""The device mechanism (src/devicecpu/ + nodes.devicecpu): every calibrated operation takes its table
time through it, where experiments compute (marked `netem`: `make test` runs these inside the
runtime that has netem, the UML guest here - the guest's clock and scheduler are what the padding
must survive); a client's TLS handshake takes the device's primitives plus the platform's cost,
which sits between the server's flight and the client's reply; without a device nothing changes.

Bounds: 15 % of the table (the issue's target). The library only adds time: where the device
needs less than ~2 us a call (16-byte cipher blocks: 0.5-1.3 us), the guest's own cost of the
call through the library (~0.9 us for an AEAD block, whose `openssl speed` loop makes four calls:
IV, additional data, data, tag) is what shows, and only "never faster than the device" is held.
The library reads the TSC and sleeps for what is owed, crediting a late wake-up to what follows,
so its error is the time between its calls (the program's loop, its own entry and exit: ~0.1 us a
call in the guest) and the guest's scheduling; measured here 0.98-1.02 of the tables from 64 B
up and for every public-key operation, 0.98 at 16 B for digests and CBC.
"""

from __future__ import annotations

import itertools
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import need_tool
from wearlab.model.devices import builtin_devices
from wearlab.nodes.devicecpu import LIBRARY, DeviceProcess, read_counters
from wearlab.run.cryptobench import GROUPS, parse_speed, speed, target

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.15


# Below this device time per call, what shows is the guest's own cost of the call through the
# library (~1 us: a 16-byte AES block takes the device 0.5-1.3 us); the library only adds time,
# so there only "never faster than the device" holds.
FLOOR_S = 2e-6


def _within(results, device, tolerance=TOLERANCE):
    """Results off their table by more than `tolerance` (faster than the device at all sizes;
    slower only where the device's time per call is above FLOOR_S)."""
    bad = []
    for r in results:
        want = target(device, r)
        if want is None:
            continue
        per_call = (r.size / want) if r.size else 1 / want
        low = (1 - tolerance) * want if per_call >= FLOOR_S else 0
        if not low <= r.per_s <= (1 + tolerance) * want:
            bad.append(f"{r.key} {r.size or ''} B: {r.per_s:,.1f}/s, table {want:,.1f}/s ({r.per_s / want:.3f})")
    return bad


# --- parsing openssl speed (host) -----------------------------------------------------------


def test_parse_openssl_speed_machine_readable_output():
    g = {x.name: x for x in GROUPS}
    text = "+DT:sha256:1:16\n+H:16:64:256:1024:8192:16384\n+F:25:sha256:6808690.00:15184620.00:1:2:3:4\n"
    got = parse_speed(text, g["sha256"])
    assert [(r.key, r.size, r.per_s) for r in got[:2]] == [("digest:sha256", 16, 6808690.0), ("digest:sha256", 64, 15184620.0)]
    got = parse_speed("+F2:2:2048:23.100000:773.900000\n", g["rsa2048"])
    assert [(r.key, r.per_s) for r in got] == [("sign:rsa2048", 23.1), ("verify:rsa2048", 773.9)]
    got = parse_speed("+F5:3:256:150.800000:0.006631\n", g["ecdhp256"])
    assert [(r.key, r.per_s) for r in got] == [("derive:p256", 150.8)]


# --- calibration, where experiments compute --------------------------------------------------


@pytest.mark.netem
@pytest.mark.parametrize("group", [g.name for g in GROUPS])
def test_each_operation_takes_its_table_time(tmp_path, group):
    """seed 002's computer: every operation of its tables (measured and derived) through the
    library, padding by sleeping, against the table it pads to."""
    need_tool("openssl")
    device = builtin_devices()["vehicle-embedded-computer"]
    results = speed(device, [g for g in GROUPS if g.name == group], 1, "sleep", tmp_path)
    assert results
    assert not _within(results, device)


@pytest.mark.netem
def test_the_watch_profile_and_spinning(tmp_path):
    """Another device's tables, and padding by spinning instead of sleeping."""
    need_tool("openssl")
    device = builtin_devices()["lg-g-watch-r"]
    groups = [g for g in GROUPS if g.name in ("rsa2048", "ecdhx25519", "aes-128-gcm")]
    for pad in ("sleep", "spin"):
        bad = _within(speed(device, groups, 1, pad, tmp_path / pad), device)
        assert not bad, (pad, bad)


# --- a TLS client on a device ------------------------------------------------------------------


class FlightRelay:
    """A TCP relay on loopback between a TLS client and server that notes when each side's bytes
    pass: the client's think time is from the server's last byte before the client's reply."""

    def __init__(self, upstream: int):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.upstream = upstream
        self.events: list[tuple[float, str, int]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        for conn in itertools.count():
            c, _ = self.server.accept()
            u = socket.create_connection(("127.0.0.1", self.upstream))
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(c, u, conn, "c"), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, conn, "s"), daemon=True).start()

    def _pump(self, a, b, conn, who):
        while True:
            try:
                data = a.recv(65536)
            except OSError:
                data = b""
            self.events.append((time.monotonic(), conn, who, len(data)))
            if not data:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            b.sendall(data)

    def think_times(self) -> list[float]:
        """Per connection in order: the gap between the server's first flight and the client's
        second (the server's last bytes after the client's first, then the client's next).
        Events are grouped by connection: under load a pump thread of the previous connection can
        note its end after the next connection's first bytes (the reason of one CI failure)."""
        out = []
        for conn in sorted({e[1] for e in self.events}):
            seen_c, last_s = 0, None
            for t, _, who, n in sorted(e for e in self.events if e[1] == conn):
                if who == "c" and n:
                    if seen_c == 1 and last_s is not None:
                        out.append(t - last_s)
                    seen_c += 1
                elif who == "s" and n and seen_c == 1:
                    last_s = t
        return out


@pytest.fixture
def tls_server(tmp_path):
    from wearlab.nodes.certs import make_pki

    openssl = need_tool("openssl")
    ca, certs = make_pki(tmp_path / "pki", "localhost")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([openssl, "s_server", "-quiet", "-accept", f"127.0.0.1:{port}", "-www",
                             "-cert", str(certs["rsa2048"].cert), "-key", str(certs["rsa2048"].key),
                             "-cert_chain", str(certs["rsa2048"].cert)],   # the intermediate, as nginx sends it
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "openssl s_server did not start"
            time.sleep(0.05)
    yield ca, port
    proc.kill()
    proc.wait()


FETCH = r"""
import json, sys
from wearlab.measure.curl import tls_options
from wearlab.measure.fetch_agent import request
ca, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tls = tls_options("1.2", "ECDHE-RSA-AES128-SHA", ca).as_dict()
out = []
for _ in range(n):
    m = request(f"https://localhost:{port}/", resolve=f"localhost:{port}:127.0.0.1", tls=tls)
    assert m["exitcode"] == 0, m["errormsg"]
    out.append(m["time_appconnect"] - m["time_connect"])
print(json.dumps(out))
"""


def _handshakes(ca, port, n, env) -> list[float]:
    import json
    r = subprocess.run([sys.executable, "-c", FETCH, str(ca), str(port), str(n)], env=env, capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-1000:]
    return json.loads(r.stdout)


def _expected(device) -> float:
    """What the watch's client pays in this handshake (TLS 1.2 ECDHE-RSA, the groups wearlab's
    client offers - X25519 first -, cert rsa2048: an RSA-2048 leaf and intermediate under an
    RSA-2048 root), by hand from the papers (tests/test_devices.py): the platform's cost 110.383 ms,
    the chain's two RSA-2048 verifications and the ServerKeyExchange's (3 x 2.5 ms), an X25519 key
    pair and agreement (2 x 3.7535 ms): 125.390 ms. Hashes, PRF and record ciphers are below 1 %."""
    assert device.name == "lg-g-watch-r"
    return 0.110383 + 3 * 0.0025 + 2 * 0.0037535


@pytest.mark.netem
def test_tls_client_handshake_takes_the_devices_time(tmp_path, tls_server):
    ca, port = tls_server
    device = builtin_devices()["lg-g-watch-r"]
    proc = DeviceProcess(device, tmp_path, "client")
    bare = _handshakes(ca, port, 6, dict(os.environ))[1:]
    slow = _handshakes(ca, port, 6, proc.env())[1:]
    want = _expected(device)
    # Without a device: this machine's speed (a few ms in the guest). With it: the device's time,
    # plus what the machine itself spends outside the modelled operations (at most the bare figure).
    assert statistics.median(bare) < 0.03, bare
    assert want * (1 - TOLERANCE) <= statistics.median(slow) <= want * (1 + TOLERANCE) + statistics.median(bare), \
        (slow, want)
    c = read_counters(proc.stats)
    assert c["platform:handshake"].calls == 6
    per_handshake = c["phase:handshake"].device_s / 6
    assert per_handshake == pytest.approx(want, rel=0.02)
    assert c["verify:rsa2048"].calls == 6 and c["x509-chain"].calls == 6


@pytest.mark.netem
def test_platform_cost_sits_before_the_clients_second_flight(tmp_path, tls_server):
    """Seed 000 puts ~87 % of the watch's handshake in the client between the server's flight and
    its own reply (sub-phases 3-7): the reply leaves only after the device's time."""
    ca, port = tls_server
    device = builtin_devices()["lg-g-watch-r"]
    relay = FlightRelay(port)
    _handshakes(ca, relay.port, 3, DeviceProcess(device, tmp_path, "client").env())
    think = relay.think_times()
    assert len(think) == 3, relay.events
    for t in think:
        assert t >= 0.95 * _expected(device), think


def test_no_device_no_library():
    """A process started without a device's environment has nothing preloaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEARLAB_DEVICE")}
    assert str(LIBRARY) not in env.get("LD_PRELOAD", "")


# --- the platform's cost per byte received ----------------------------------------------------

RECEIVE = r"""
import json, socket, ssl, sys, time
kind, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
if kind == "tls":
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    s = ctx.wrap_socket(s)
s.sendall(b"go")
got, t0 = 0, time.monotonic()
while got < n:
    data = s.recv(65536)
    if not data:
        break
    got += len(data)
print(json.dumps({"bytes": got, "seconds": time.monotonic() - t0}))
"""


def _sender(n: int, tls_cert=None) -> int:
    """A local server that sends `n` bytes to whoever connects and says go (over TLS with a cert)."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve():
        import ssl
        c, _ = srv.accept()
        if tls_cert is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls_cert.cert), str(tls_cert.key))
            c = ctx.wrap_socket(c, server_side=True)
        c.recv(2)
        c.sendall(os.urandom(n))
        time.sleep(0.5)
        c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


@pytest.mark.netem
@pytest.mark.parametrize("kind", ["plain", "tls"])
def test_the_watch_consumes_received_bytes_at_its_fitted_rate(tmp_path, kind):
    """The watch's platform cost per byte (seed 000: HTTP 2.6, HTTPS 2.1 Mbit/s at 500 KB, Table
    III's frames): 3,219.77 ns a byte of plain data on recv, 3,944.08 ns a byte of plaintext out
    of SSL_read (the record's cipher and MAC are charged on top, per record) - worked out by hand in
    tests/test_devices.py. 300 KB over loopback: at least 0.9659 s (plain) / 1.1832 s (TLS), at most
    that + 15 %; a TLS connection's socket reads are not charged as plain data too."""
    from wearlab.nodes.certs import make_pki

    n = 300_000
    cert = make_pki(tmp_path / "pki", "localhost", ("rsa2048",))[1]["rsa2048"] if kind == "tls" else None
    proc = DeviceProcess(builtin_devices()["lg-g-watch-r"], tmp_path, f"recv-{kind}", per_byte=True)
    import json
    r = subprocess.run([sys.executable, "-c", RECEIVE, kind, str(_sender(n, cert)), str(n)], env=proc.env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1000:]
    got = json.loads(r.stdout)
    assert got["bytes"] == n
    per_byte = 3219.77e-9 if kind == "plain" else 3944.08e-9
    c = read_counters(proc.stats)
    key, other = ("data:plain", "data:encrypted") if kind == "plain" else ("data:encrypted", "data:plain")
    assert c[key].bytes == n and c[key].device_s == pytest.approx(n * per_byte, rel=1e-5)
    assert other not in c
    assert n * per_byte <= got["seconds"] <= n * per_byte * (1 + TOLERANCE), got


@pytest.mark.netem
def test_per_byte_only_where_asked(tmp_path):
    """Without per_byte (a relaying proxy's process) the same profile charges nothing per byte."""
    n = 100_000
    proc = DeviceProcess(builtin_devices()["lg-g-watch-r"], tmp_path, "recv-none")
    assert "WEARLAB_DEVICE_PER_BYTE" not in proc.env()
    import json
    r = subprocess.run([sys.executable, "-c", RECEIVE, "plain", str(_sender(n)), str(n)], env=proc.env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1000:]
    assert json.loads(r.stdout)["seconds"] < 0.1 * n * 3219.77e-9
    assert "data:plain" not in read_counters(proc.stats)
