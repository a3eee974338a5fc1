"""An HTTP(S) fetch over an emulated link obeys the link's physics and TLS's round trips."""

from __future__ import annotations

import csv
import statistics

import pytest

from conftest import timing_bound, wearlab

pytestmark = pytest.mark.netem

ONE_WAY = 0.050       # s: long enough that round trips dominate crypto and process start-up
RATE = 10_000_000     # bit/s
SYN_FRAME = 74        # bytes: Ethernet 14 + IPv4 20 + TCP 20 + options 20 (MSS, SACK, TS, wscale)
# Physics of the TCP handshake: two propagation delays and two frames serialised at the rate.
RTT = 2 * ONE_WAY + 2 * SYN_FRAME * 8 / RATE



# curl's own timers run on the client's clock around its system calls; in a UML guest each
# system call costs ~15-20 us and libcurl makes ~30 between its name lookup and its connect
# timestamps. That is the client's CPU, not the network: bounded here, measured in bench/.
CURL_CPU = 0.005  # median ~1 ms; the tail grows when the host is busy
# And a process woken by its socket runs at the guest's next scheduler tick when the guest's CPU
# was taken meanwhile (UML: HZ 100, one tick 10 ms; seen once in CI: 110.4 ms for a 100.1 ms
# handshake, the wire's view exact). Still far below a second round trip (+100 ms).
GUEST_TICK = 0.010


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fetch")
    (d / "topo.yaml").write_text(f"""
nodes:
  watch: {{role: wearable}}
  server: {{role: server}}
links:
  - {{between: [watch, server], rate: 10Mbit, delay: {int(ONE_WAY * 1000)}ms}}
""")
    (d / "exp.yaml").write_text("""
name: fetch-physics
topology: topo.yaml
repetitions: 2
seed: 7
workload: {kind: http-get, client: watch, server: server}
matrix:
  protocol: [http, https]
  size: [1MB]
  tls_version: ["1.2", "1.3"]
""")
    res = wearlab("run", str(d / "exp.yaml"), "--out", str(d / "results"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with (d / "results" / "fetch-physics" / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["status"] == "ok" for r in rows), rows
    return rows


def _f(r, k):
    return float(r[k])


# A single run may meet a host scheduling hiccup (another process on the guest's CPU); what
# wearlab reports per cell is the median, which must meet the goal; nine runs in ten stay
# within a millisecond of it.
TAIL = 0.001


def assert_handshakes(rows, rtt: float) -> None:
    wire = [_f(r, "wire_connect_s") for r in rows]
    assert min(wire) >= rtt - 1e-5                      # never faster than the physics
    assert statistics.median(wire) <= rtt + timing_bound(rtt)    # the reported value: exact to the goal
    assert statistics.quantiles(wire, n=10, method="inclusive")[-1] <= rtt + timing_bound(rtt) + TAIL


def test_connect_takes_one_round_trip(runs):
    assert_handshakes(runs, RTT)
    for r in runs:
        # curl's view adds the client's own time around the handshake.
        assert _f(r, "wire_connect_s") <= _f(r, "time_connect") - _f(r, "time_namelookup") <= RTT + CURL_CPU + GUEST_TICK


@pytest.mark.parametrize("version,round_trips", [("1.3", 1), ("1.2", 2)])
def test_tls_handshake_round_trips(runs, version, round_trips):
    hs = [_f(r, "wire_tls_handshake_s") for r in runs if r["protocol"] == "https" and r["tls_version"] == version]
    assert hs
    for h in hs:
        # Round trips plus certificate validation and key exchange (milliseconds here).
        assert round_trips * 2 * ONE_WAY <= h <= round_trips * 2 * ONE_WAY + 0.060


def test_transfer_no_faster_than_the_link(runs):
    wire_bits = 1_000_000 * 8
    for r in runs:
        assert _f(r, "wire_total_s") - _f(r, "wire_starttransfer_s") >= 0.95 * wire_bits / RATE - RTT
        assert _f(r, "wire_total_s") >= wire_bits / RATE
        # and no slower than the wire rate allows for the frames sent, plus the TCP ramp-up
        frames = 1_000_000 * (1514 / 1448) * 8 / RATE
        assert _f(r, "wire_total_s") <= frames + 12 * RTT


def test_phase_bytes_match_the_protocol(runs):
    for r in runs:
        data_down = int(r["bytes_down_data"])
        # File + HTTP header + per-frame TCP/IP/Ethernet overhead (66 B per <= 1448 B payload).
        assert 1_000_000 <= data_down <= 1_000_000 * (1514 / 1448) + 4000
        assert int(r["packets_up_total"]) > 0
        hs = int(r["bytes_up_tls_handshake"]) + int(r["bytes_down_tls_handshake"])
        if r["protocol"] == "http":
            assert hs == 0
        else:
            assert 1500 <= hs <= 10_000  # a few KB: hellos, certificate chain, key exchange
        # SYN, SYN-ACK, ACK: three frames of 66-74 bytes.
        tcp_hs = int(r["bytes_up_tcp_handshake"]) + int(r["bytes_down_tcp_handshake"])
        assert 3 * 60 <= tcp_hs <= 3 * 80


@pytest.fixture(scope="module")
def old_tls_runs(tmp_path_factory):
    """TLS 1.0/1.1 (OpenSSL 3 needs @SECLEVEL=0 for them) with both certificate key types."""
    d = tmp_path_factory.mktemp("oldtls")
    (d / "exp.yaml").write_text(f"""
name: old-tls
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 10Mbit, delay: {int(ONE_WAY * 1000)}ms}}]
repetitions: 1
workload: {{kind: http-get, client: watch, server: server, protocol: https, size: 10KB}}
matrix:
  tls_version: ["1.0", "1.1"]
  cert: [rsa2048, ecdsa-p256]
""")
    res = wearlab("run", str(d / "exp.yaml"), "--out", str(d / "results"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with (d / "results" / "old-tls" / "latest" / "runs.csv").open() as f:
        return list(csv.DictReader(f))


def test_tls10_and_11_handshake_in_two_round_trips(old_tls_runs):
    assert {(r["tls_version"], r["cert"]) for r in old_tls_runs} == {
        ("1.0", "rsa2048"), ("1.0", "ecdsa-p256"), ("1.1", "rsa2048"), ("1.1", "ecdsa-p256")}
    for r in old_tls_runs:
        assert r["status"] == "ok", r["error"]
        assert 2 * 2 * ONE_WAY <= _f(r, "wire_tls_handshake_s") <= 2 * 2 * ONE_WAY + 0.060


@pytest.mark.parametrize("one_way_ms", [3.7, 23.3])
def test_connect_at_odd_delays(tmp_path, one_way_ms):
    """Delays that are no multiple of any timer tick: the handshake is still exact to the goal."""
    (tmp_path / "exp.yaml").write_text(f"""
name: odd-delay
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], delay: {one_way_ms}ms}}]
repetitions: 8
workload: {{kind: http-get, client: watch, server: server, protocol: http, size: 1KB}}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "results"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with (tmp_path / "results" / "odd-delay" / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    assert_handshakes(rows, 2 * one_way_ms / 1000)  # no rate limit: no serialisation time
