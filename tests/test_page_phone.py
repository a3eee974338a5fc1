"""Page loads through the watch's phone (topology-declared: the relay kind's `intercept:` and
`udp:`, nodes/proxies.py): HTTP/1.1 and HTTP/2 ride TCP connections the phone splits, HTTP/3's
QUIC is forwarded as UDP - or, with `udp: drop`, cannot load and its runs say so - on a page
imported from Chromium's HAR (tests/fixtures/har/three-origins.har: three origins on two servers).

Which packets the phone split is read from the watch's capture by their IP TTL (RFC 791: each
router decrements it; RFC 1122 and Linux's net.ipv4.ip_default_ttl: a host sends 64): the split
connections' packets are the phone's relay's own (64 at the watch), forwarded ones the server's,
one hop on (63)."""

from __future__ import annotations

import struct
from collections import Counter

import pytest

from conftest import ROOT, run_rows, wearlab
from wearlab.measure.pcap import read_pcap

pytestmark = pytest.mark.netem

TOPOLOGY = """
  nodes:
    watch: {role: wearable}
    phone: {role: phone, kind: relay, intercept: [80, 443]}
    www: {role: server, kind: caddy, cert: ecdsa-p256}
    cdn: {role: server, kind: caddy, cert: ecdsa-p256}
  links:
    - {between: [watch, phone], rate: 100Mbit, delay: 10ms}
    - {between: [phone, www], delay: 5ms}
    - {between: [phone, cdn], delay: 5ms}
"""
# The HAR fixture's origins (IP addresses in the recording: replayed under their names) on the
# two servers.
HAR_SERVERS = "{ip1270058305: www, ip1270058263: cdn, ip1270052625: cdn}"
ORIGINS = 3
HOST_TTL = 64


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    d = tmp_path_factory.mktemp("pagephone")
    res = wearlab("page", "import", str(ROOT / "tests" / "fixtures" / "har" / "three-origins.har"),
                  "-o", str(d / "three-origins.yaml"))
    assert res.returncode == 0, res.stdout + res.stderr
    (d / "phone.yaml").write_text(f"""
name: page-phone
topology: {TOPOLOGY}
repetitions: 1
seed: 3
timeout: 3s
workload: {{kind: page-load, client: watch, page: three-origins.yaml, protocol: https, servers: {HAR_SERVERS}}}
matrix:
  http_version: [1.1, 2, 3]
  phone.udp: [forward, drop]
""")
    latest, rows = run_rows(d / "phone.yaml", d / "results", "page-phone", timeout=300, all_ok=False)
    return latest, rows


def test_tcp_through_the_split_and_quic_forwarded_load(loads):
    _, rows = loads
    assert len(rows) == 6
    for r in rows:
        if r["http_version"] == "3" and r["phone.udp"] == "drop":
            continue
        assert r["status"] == "ok", (r["http_version"], r["phone.udp"], r["error"])
        n = ORIGINS
        if r["http_version"] == "2":    # one connection per origin, each split at the phone
            assert (int(r["tcp_syns"]), int(r["quic_connections"])) == (n, 0), r
        elif r["http_version"] == "3":  # one QUIC connection per origin, forwarded
            assert (int(r["tcp_syns"]), int(r["quic_connections"])) == (0, n), r
        else:
            assert n <= int(r["tcp_syns"]) <= 6 * n and int(r["quic_connections"]) == 0, r


def test_a_phone_that_drops_udp_cannot_carry_http3_and_says_so(loads):
    _, rows = loads
    dropped = [r for r in rows if r["http_version"] == "3" and r["phone.udp"] == "drop"]
    assert len(dropped) == 1
    for r in dropped:
        assert r["status"] != "ok" and r["error"], r


def _ipv4(frame: bytes, linktype: int) -> bytes | None:
    offset = {1: 14, 113: 16}[linktype]
    ethertype = struct.unpack_from("!H", frame, offset - 2)[0]
    return frame[offset:] if ethertype == 0x0800 else None


def test_the_watch_hears_the_phone_for_tcp_and_the_server_for_quic(loads):
    latest, _ = loads
    ttls: dict[str, Counter] = {"tcp": Counter(), "udp": Counter()}
    for pcap in (latest / "captures").glob("watch-*.pcap"):
        for p in read_pcap(pcap):
            ip = _ipv4(p.frame, p.linktype)
            if ip is None or ip[9] not in (6, 17):
                continue
            ihl = (ip[0] & 0x0F) * 4
            sport = struct.unpack_from("!H", ip, ihl)[0]
            if sport == 443:   # from a server's side of a connection
                ttls["tcp" if ip[9] == 6 else "udp"][ip[8]] += 1
    assert set(ttls["tcp"]) == {HOST_TTL}, ttls          # the relay's own segments: split
    assert set(ttls["udp"]) == {HOST_TTL - 1}, ttls      # the server's datagrams, routed one hop
    assert sum(ttls["udp"].values()) > 20
