"""A device on a node, end to end in `wearlab run` (where experiments compute): the http-get
client's TLS handshake and tcpcryptd's key exchange and frames take the watch's time, rows and
records carry the device's CPU time, metadata.json names the device and the mechanism; the same
experiment without `device:` keeps this machine's speed."""

from __future__ import annotations

import csv
import json
import statistics

import pytest

from conftest import wearlab
from wearlab.model.devices import builtin_devices
from wearlab.nodes.tcpcrypt import BINARY

pytestmark = pytest.mark.netem

ONE_WAY = 0.005
SIZE = 100_000
WATCH = builtin_devices()["lg-g-watch-r"]


def _run(d, device: str | None, name: str):
    device_line = f", device: {device}" if device else ""
    (d / f"{name}.yaml").write_text(f"""
name: {name}
topology:
  nodes:
    watch: {{role: wearable{device_line}}}
    ap: {{role: ap}}
    server: {{role: server}}
  links:
    - {{between: [watch, ap], delay: {int(ONE_WAY * 1000)}ms}}
    - {{between: [ap, server], delay: 0ms}}
repetitions: 4
seed: 3
workload: {{kind: http-get, client: watch, server: server, size: {SIZE}, path: ap, tls_version: 1.2,
            cipher: ECDHE-RSA-AES128-SHA, cert: rsa2048}}
matrix:
  protocol: [https, tcpcrypt]
""")
    res = wearlab("run", str(d / f"{name}.yaml"), "--out", str(d / "results"), timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    latest = d / "results" / name / "latest"
    with (latest / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    with (latest / "series" / "tcpcrypt.csv").open() as f:
        records = list(csv.DictReader(f))
    assert rows and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    return rows, records, json.loads((latest / "metadata.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is not built: `make test` builds it (make tcpcrypt)", pytrace=False)
    d = tmp_path_factory.mktemp("device")
    return {"watch": _run(d, "lg-g-watch-r", "device-on"), "none": _run(d, None, "device-off")}


def _cell(rows, protocol):
    return [r for r in rows if r["protocol"] == protocol]


def test_https_handshake_takes_the_watchs_time(runs):
    rows, _, meta = runs["watch"]
    bare, _, bare_meta = runs["none"]
    rtts = 2 * (2 * ONE_WAY)
    c = WATCH.cost
    # TLS 1.2 ECDHE-RSA: the platform's cost, the test CA's P-256 signature, the RSA-2048
    # ServerKeyExchange, an X25519 key pair and agreement (X25519 is the client's first group).
    want = (WATCH.handshake.seconds() + c("verify:p256").seconds() + c("verify:rsa2048").seconds()
            + c("keygen:x25519").seconds() + c("derive:x25519").seconds())
    hs = [float(r["tls_handshake_s"]) - rtts for r in _cell(rows, "https")]
    base = statistics.median(float(r["tls_handshake_s"]) - rtts for r in _cell(bare, "https"))
    assert base < 0.03, base                                                  # this machine: a few ms
    assert want * 0.85 <= statistics.median(hs) <= want * 1.15 + base, (hs, want)
    dev = [float(r["device_cpu_handshake_s"]) for r in _cell(rows, "https")]
    assert statistics.median(dev) == pytest.approx(want, rel=0.02)
    assert all(r["device_cpu_handshake_s"] == "" for r in bare)             # no device, no column value
    assert meta["devices"]["watch"]["device"] == "lg-g-watch-r"
    assert "devicecpu" in meta["devices"]["watch"]["mechanism"]["openssl_processes"]
    assert bare_meta["devices"] == {}


def test_tcpcryptd_computes_in_the_watchs_time(runs):
    rows, records, _ = runs["watch"]
    bare_rows, _, _ = runs["none"]
    c = WATCH.cost
    kx = c("keygen:x25519").seconds() + c("derive:x25519").seconds()
    # The client daemon: key pair, agreement, key schedule, then the 100 KB response opened in
    # 16 KiB frames (and the request sealed).
    frames = -(-SIZE // 16384)
    opened = (frames - 1) * c("cipher:aes-128-gcm").seconds(16384) + c("cipher:aes-128-gcm").seconds(SIZE % 16384)
    mine = [float(x["device_ms"]) / 1e3 for x in records if x["node"] == "watch"]
    assert len(mine) == 4
    for m in mine:
        assert kx + opened <= m <= (kx + opened) * 1.05 + 0.0005, (m, kx, opened)
    assert all(x["device_ms"] == "" for x in records if x["node"] == "server")   # the server has no device
    # The key exchange, timed by the client's daemon (connect -> keys ready): one round trip plus
    # the device's key pair and agreement (the server's at this machine's speed).
    slow = statistics.median(float(r["tcpcrypt_handshake_s"]) for r in _cell(rows, "tcpcrypt"))
    fast = statistics.median(float(r["tcpcrypt_handshake_s"]) for r in _cell(bare_rows, "tcpcrypt"))
    # Lower bound from physics (the pads sleep: nothing is ready before the round trip and the
    # device's key pair and agreement), not from the difference of two medians, whose noise on a
    # busy machine is a few ms (CI: 6.65 ms against 0.9 x 7.5 ms).
    assert slow >= 2 * ONE_WAY + kx, (slow, fast, kx)
    assert slow - fast <= 1.15 * kx + 0.005, (slow, fast, kx)


@pytest.fixture(scope="module")
def relayed(tmp_path_factory):
    """A watch fetching 1 MB through its phone's relay (20 Mbit/s links: the client's capture keeps
    every packet), the phone a Nexus 4 or no device."""
    d = tmp_path_factory.mktemp("relay")
    out = {}
    for name, device in (("phone-device", "nexus-4"), ("phone-none", None)):
        device_line = f", device: {device}" if device else ""
        (d / f"{name}.yaml").write_text(f"""
name: {name}
topology:
  nodes:
    watch: {{role: wearable}}
    phone: {{role: phone, kind: relay{device_line}}}
    ap: {{role: ap}}
    server: {{role: server}}
  links:
    - {{between: [watch, phone], delay: 1ms, rate: 20Mbit}}
    - {{between: [phone, ap], delay: 1ms, rate: 20Mbit}}
    - {{between: [ap, server], delay: 0ms}}
repetitions: 3
seed: 4
workload: {{kind: http-get, client: watch, server: server, size: 1MB, path: phone, protocol: http}}
""")
        res = wearlab("run", str(d / f"{name}.yaml"), "--out", str(d / "results"), timeout=400)
        assert res.returncode == 0, res.stdout + res.stderr
        latest = d / "results" / name / "latest"
        with (latest / "runs.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert rows and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
        out[name] = (rows, json.loads((latest / "metadata.json").read_text()))
    return out


def test_phone_relay_computes_by_the_devices_cpu_factor(relayed):
    rows, meta = relayed["phone-device"]
    bare, _ = relayed["phone-none"]
    factor = builtin_devices()["nexus-4"].cpu_factor.value
    cpu = [float(r["proxy_device_cpu_s"]) for r in rows]
    total = [float(r["wire_total_s"]) for r in rows]
    # The relay's own computation between its system calls, on the phone's device: present, and
    # (factor times a share of the run's time on this machine) never more than the run lasted
    # times the factor.
    assert all(0 < c <= t * factor for c, t in zip(cpu, total)), (cpu, total)
    assert all(r["proxy_device_cpu_s"] == "" for r in bare)
    relay = meta["nodes"]["phone"][0]["device"][0]
    assert relay["device"] == "nexus-4" and relay["cpu_factor"] == pytest.approx(factor)
    # Padding only adds time: the relayed download is not faster than without the device.
    assert statistics.median(total) >= 0.95 * statistics.median(float(r["wire_total_s"]) for r in bare)
