"""Phase accounting on synthetic captures built with dpkt.

Every synthetic packet carries the phase the module docstring's rules assign to it; the tests
check the classification packet by packet and that the byte sums are the frame lengths.
"""

from __future__ import annotations

import io
import random
import socket
import struct

import dpkt
import pytest

from wearlab.measure.pcap import Packet, PcapReader, read_pcap
from wearlab.measure.phases import (
    PHASES,
    PhaseBytes,
    classify_packets,
    phases_from_pcap,
    connection_phases,
    split_phases,
)
from wearlab.measure.tcp import ACK, FIN, PSH, RST, SYN, ConnPacket, connection_packets
from wearlab.measure.tls_records import detect_tls_version

HS, TLS, DATA, TD = PHASES
CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.2", 443)

# ------------------------------------------------------------------------------------------
# builders


def tls_record(ctype: int, body_len: int, *, version: int = 0x0303, fill: int = 0xAB) -> bytes:
    return bytes([ctype]) + struct.pack("!HH", version, body_len) + bytes([fill]) * body_len


def server_hello(version: str) -> bytes:
    """A handshake record holding a minimal ServerHello selecting ``version``."""
    legacy = {"1.0": 0x0301, "1.1": 0x0302, "1.2": 0x0303, "1.3": 0x0303}[version]
    exts = b""
    if version == "1.3":
        exts = struct.pack("!HHH", 43, 2, 0x0304)  # supported_versions
    exts = struct.pack("!HHB", 0xFF01, 1, 0) + exts  # renegotiation_info first
    body = (struct.pack("!H", legacy) + bytes(32) + bytes([32]) + bytes(range(32))
            + struct.pack("!HB", 0x1301 if version == "1.3" else 0xC02F, 0)
            + struct.pack("!H", len(exts)) + exts)
    msg = bytes([2]) + len(body).to_bytes(3, "big") + body
    return bytes([22]) + struct.pack("!HH", 0x0303, len(msg)) + msg


def tcp_frame(src, dst, sport, dport, seq, ack, flags, payload=b"", *, v6=False, opts=b""):
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                       flags=flags, win=65535, opts=opts, data=payload)
    tcp.off = 5 + len(opts) // 4
    if v6:
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src),
                          dst=socket.inet_pton(socket.AF_INET6, dst), nxt=6, hlim=64, data=tcp)
        ip.plen = len(bytes(tcp))
        etype = dpkt.ethernet.ETH_TYPE_IP6
    else:
        ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=6, ttl=64,
                        data=tcp)
        etype = dpkt.ethernet.ETH_TYPE_IP
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=etype, data=ip))


class Conn:
    """Builds one TCP connection packet by packet, remembering each packet's expected phase."""

    def __init__(self, *, client=CLIENT, server=SERVER, v6=False, isn_c=1000, isn_s=900000):
        self.client, self.server, self.v6 = client, server, v6
        self.seq = {"up": isn_c, "down": isn_s}
        self.isn = {"up": isn_c, "down": isn_s}
        self.frames: list[tuple[float, bytes]] = []
        self.expected: list[str] = []
        self.dirs: list[str] = []
        self.t = 1700000000.0

    def send(self, direction, flags, payload=b"", phase=None, *, seq=None, opts=b""):
        """Send new data (seq=None advances the stream) or retransmit at an absolute ``seq``."""
        other = "down" if direction == "up" else "up"
        if seq is None:
            seq = self.seq[direction]
            self.seq[direction] += len(payload) + (1 if flags & (SYN | FIN) else 0)
        ack = self.seq[other] if flags & ACK else 0
        src, dst = (self.client, self.server) if direction == "up" else (self.server, self.client)
        frame = tcp_frame(src[0], dst[0], src[1], dst[1], seq, ack, flags, payload, v6=self.v6,
                          opts=opts)
        self.t += 0.001
        self.frames.append((self.t, frame))
        self.expected.append(phase)
        self.dirs.append(direction)
        return self

    def handshake(self):
        mss = b"\x02\x04\x05\xb4"
        self.send("up", SYN, phase=HS, opts=mss)
        self.send("down", SYN | ACK, phase=HS, opts=mss)
        return self.send("up", ACK, phase=HS)

    def stream_offset_seq(self, direction, offset):
        return self.isn[direction] + 1 + offset

    def packets(self, linktype=dpkt.pcap.DLT_EN10MB):
        return [Packet(ts, f, linktype) for ts, f in self.frames]

    def pcap_bytes(self, snaplen=262144, nano=False):
        buf = io.BytesIO()
        buf.write(struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0,
                              snaplen, 1))
        for ts, f in self.frames:
            sec = int(ts)
            frac = round((ts - sec) * (1e9 if nano else 1e6))
            cap = f[:snaplen]
            buf.write(struct.pack("<IIII", sec, frac, len(cap), len(f)) + cap)
        return buf.getvalue()


def conn_of(c: Conn, **kw) -> list[ConnPacket]:
    return connection_packets(c.packets(**kw), c.client)


def check(c: Conn, tls_version):
    pkts = conn_of(c)
    assert len(pkts) == len(c.frames)
    assert [p.direction for p in pkts] == c.dirs
    got = classify_packets(pkts, tls_version=tls_version)
    rows = zip(c.dirs, c.expected, got, strict=False)
    assert got == c.expected, "\n".join(
        f"{i:2d} {d:4s} exp={e:13s} got={g}" for i, (d, e, g) in enumerate(rows))
    pb = split_phases(pkts, tls_version=tls_version)
    # byte sums are frame lengths, per phase and direction
    for direction, table, counts in (("up", pb.up, pb.up_packets), ("down", pb.down, pb.down_packets)):
        for ph in PHASES:
            frames = [len(f) for (_, f), d, e in zip(c.frames, c.dirs, c.expected, strict=True)
                      if d == direction and e == ph]
            assert table[ph] == sum(frames), (direction, ph)
            assert counts[ph] == len(frames), (direction, ph)
    assert pb.total_up() + pb.total_down() == sum(len(f) for _, f in c.frames)
    return pb


# ------------------------------------------------------------------------------------------
# scenarios


def http_conn(**kw) -> Conn:
    c = Conn(**kw).handshake()
    c.send("up", ACK | PSH, b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n", DATA)
    c.send("down", ACK, b"", DATA)
    c.send("down", ACK, b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n" + b"x" * 1000, DATA)
    c.send("down", ACK | PSH, b"x" * 1000, DATA)
    c.send("up", ACK, b"", DATA)
    c.send("up", FIN | ACK, b"", TD)
    c.send("down", FIN | ACK, b"", TD)
    c.send("up", ACK, b"", TD)
    return c


def tls12_conn() -> Conn:
    c = Conn().handshake()
    c.send("up", ACK | PSH, tls_record(22, 200, version=0x0301), TLS)  # ClientHello
    c.send("down", ACK, b"", TLS)
    flight = server_hello("1.2") + tls_record(22, 1800) + tls_record(22, 300) + tls_record(22, 4)
    c.send("down", ACK, flight[:1448], TLS)
    c.send("down", ACK | PSH, flight[1448:], TLS)
    c.send("up", ACK | PSH, tls_record(22, 70) + tls_record(20, 1) + tls_record(22, 40), TLS)
    c.send("down", ACK | PSH, tls_record(20, 1) + tls_record(22, 40), TLS)
    c.send("up", ACK | PSH, tls_record(23, 100), DATA)  # the request
    resp = tls_record(23, 2500) + tls_record(23, 300)
    c.send("down", ACK, resp[:1448], DATA)
    c.send("down", ACK, resp[1448:2896], DATA)
    c.send("down", ACK | PSH, resp[2896:], DATA)
    c.send("up", ACK, b"", DATA)
    c.send("up", ACK | PSH, tls_record(21, 26), TD)  # close_notify
    c.send("up", FIN | ACK, b"", TD)
    c.send("down", ACK | PSH, tls_record(21, 26), TD)
    c.send("down", RST, b"", TD)
    return c


def tls13_conn(coalesce_finished_and_request=False) -> Conn:
    c = Conn().handshake()
    c.send("up", ACK | PSH, tls_record(22, 512, version=0x0301), TLS)
    c.send("down", ACK, b"", TLS)
    flight = (server_hello("1.3") + tls_record(20, 1) + tls_record(23, 30) + tls_record(23, 900)
              + tls_record(23, 280) + tls_record(23, 60))
    c.send("down", ACK, flight[:1448], TLS)
    c.send("down", ACK | PSH, flight[1448:], TLS)
    fin = tls_record(20, 1) + tls_record(23, 60)  # CCS (compat) + encrypted Finished
    req = tls_record(23, 120)
    if coalesce_finished_and_request:
        c.send("up", ACK | PSH, fin + req, DATA)
    else:
        c.send("up", ACK | PSH, fin, TLS)
        c.send("up", ACK | PSH, req, DATA)
    c.send("down", ACK | PSH, tls_record(23, 250) + tls_record(23, 250), DATA)  # tickets
    c.send("down", ACK | PSH, tls_record(23, 1200), DATA)  # response
    c.send("up", ACK, b"", DATA)
    c.send("up", ACK | PSH, tls_record(23, 19), DATA)  # encrypted close_notify: invisible
    c.send("up", FIN | ACK, b"", TD)
    c.send("down", ACK | PSH, tls_record(23, 19), TD)
    c.send("down", FIN | ACK, b"", TD)
    c.send("up", ACK, b"", TD)
    return c


# ------------------------------------------------------------------------------------------
# tests: phases


def test_http_get():
    pb = check(http_conn(), None)
    assert pb.up_packets[HS] + pb.down_packets[HS] == 3
    assert pb.up[TLS] == pb.down[TLS] == 0
    # SYN/SYN-ACK: 14 Ethernet + 20 IPv4 + 24 TCP (with MSS option); third-leg ACK: 54
    assert pb.up[HS] == 58 + 54 and pb.down[HS] == 58


def test_http_third_leg_ack_with_payload_counts_as_data():
    c = Conn()
    c.send("up", SYN, phase=HS).send("down", SYN | ACK, phase=HS)
    c.send("up", ACK | PSH, b"GET / HTTP/1.1\r\n\r\n", DATA)
    c.send("down", ACK | PSH, b"HTTP/1.1 204 No Content\r\n\r\n", DATA)
    c.send("down", FIN | ACK, phase=TD).send("up", FIN | ACK, phase=TD)
    pb = check(c, None)
    assert pb.up_packets[HS] == 1 and pb.down_packets[HS] == 1


def test_http_ipv6_and_retransmitted_syn():
    c = Conn(client=("fd00::1", 50000), server=("fd00::2", 80), v6=True)
    c.send("up", SYN, phase=HS, seq=1000)  # SYN retransmitted before the SYN-ACK
    c.handshake()
    c.send("up", ACK | PSH, b"GET / HTTP/1.1\r\n\r\n", DATA)
    c.send("down", ACK | PSH, b"HTTP/1.1 200 OK\r\n\r\nhi", DATA)
    c.send("up", RST | ACK, phase=TD)
    check(c, None)


def test_tls12():
    pb = check(tls12_conn(), "1.2")
    assert pb.up_packets[HS] + pb.down_packets[HS] == 3
    assert pb.up[TLS] > 0 and pb.down[TLS] > 0
    row = pb.as_row()
    assert row["bytes_up_total"] == pb.total_up()
    assert row["bytes_down_total"] == pb.total_down()
    assert row["packets_up_total"] + row["packets_down_total"] == len(tls12_conn().frames)
    assert sum(row[f"bytes_up_{p}"] for p in PHASES) == row["bytes_up_total"]
    assert sum(row[f"bytes_down_{p}"] for p in PHASES) == row["bytes_down_total"]


def test_tls12_teardown_starts_at_client_close_notify_before_fin():
    c = tls12_conn()
    first_td = c.expected.index(TD)
    assert c.frames[first_td][1][-31] == 21  # the frame ends with a 5+26-byte alert record
    assert not conn_of(c)[first_td].flags & FIN and conn_of(c)[first_td + 1].flags & FIN


def test_tls13():
    c = tls13_conn()
    check(c, "1.3")
    assert detect_tls_version(conn_of(c)) == "1.3"
    check(c, "auto")


def test_tls13_finished_and_request_in_one_segment_is_data():
    check(tls13_conn(coalesce_finished_and_request=True), "1.3")


def test_tls12_rule_on_tls13_capture_is_rejected():
    with pytest.raises(ValueError, match="ServerHello selected TLS 1.3"):
        classify_packets(conn_of(tls13_conn()), tls_version="1.2")


def test_auto_detects_version_and_plain_http():
    assert detect_tls_version(conn_of(tls12_conn())) == "1.2"
    assert detect_tls_version(conn_of(http_conn())) is None
    check(tls12_conn(), "auto")
    check(http_conn(), "auto")


def test_tls_rule_on_plain_http_is_a_clear_error():
    with pytest.raises(ValueError, match="invalid TLS record header"):
        split_phases(conn_of(http_conn()), tls_version="1.2")


def test_bad_tls_version_argument():
    with pytest.raises(ValueError, match="tls_version"):
        split_phases([], tls_version="1.4")


def test_retransmissions_and_split_records():
    """Client stream: ClientHello retransmitted; handshake records split across segments with a
    header cut in the middle; the request record split across two segments and its first
    segment retransmitted; server segment duplicated."""
    c = Conn().handshake()
    ch = tls_record(22, 300, version=0x0301)
    c.send("up", ACK | PSH, ch, TLS)
    c.send("up", ACK | PSH, ch, TLS, seq=c.stream_offset_seq("up", 0))  # retransmission
    flight = server_hello("1.2") + tls_record(22, 900)
    c.send("down", ACK | PSH, flight, TLS)
    c.send("down", ACK | PSH, flight, TLS, seq=c.stream_offset_seq("down", 0))  # dup
    kx = tls_record(22, 70) + tls_record(20, 1) + tls_record(22, 40)
    c.send("up", ACK, kx[:77], TLS)  # cut inside the CCS record header (75..79)
    c.send("up", ACK | PSH, kx[77:], TLS)
    c.send("down", ACK | PSH, tls_record(20, 1) + tls_record(22, 40), TLS)
    req = tls_record(23, 3000)
    off = len(ch) + len(kx)
    c.send("up", ACK, req[:3], DATA)  # header split: first 3 bytes alone
    c.send("up", ACK, req[3:1448], DATA)
    c.send("up", ACK, req[:1448], DATA, seq=c.stream_offset_seq("up", off))  # retransmission
    c.send("up", ACK | PSH, req[1448:], DATA)
    c.send("down", ACK | PSH, tls_record(23, 500), DATA)
    c.send("down", FIN | ACK, phase=TD)
    c.send("up", FIN | ACK, phase=TD)
    check(c, "1.2")


def test_reordered_request_segment_is_first_covering_packet():
    """The request's second half is captured before its first half: the data phase starts at
    the first packet carrying the record's first byte; the earlier packet (whose bytes belong to
    the request too, but not its first byte) is still handshake by the per-packet rule."""
    c = Conn().handshake()
    ch = tls_record(22, 100, version=0x0301)
    c.send("up", ACK | PSH, ch, TLS)
    c.send("down", ACK | PSH, server_hello("1.2"), TLS)
    kx = tls_record(22, 70) + tls_record(20, 1) + tls_record(22, 40)
    c.send("up", ACK | PSH, kx, TLS)
    c.send("down", ACK | PSH, tls_record(20, 1) + tls_record(22, 40), TLS)
    req = tls_record(23, 200)
    off = len(ch) + len(kx)
    c.send("up", ACK | PSH, req[100:], TLS, seq=c.stream_offset_seq("up", off + 100))
    c.send("up", ACK, req[:100], DATA, seq=c.stream_offset_seq("up", off))
    c.send("down", ACK | PSH, tls_record(23, 300), DATA)
    check(c, "1.2")


def test_two_records_in_one_segment_request_and_alert():
    """Finished + request together (TLS 1.2 abbreviated style): data; alert + FIN later."""
    c = Conn().handshake()
    c.send("up", ACK | PSH, tls_record(22, 100, version=0x0301), TLS)
    c.send("down", ACK | PSH, server_hello("1.2") + tls_record(20, 1) + tls_record(22, 40), TLS)
    c.send("up", ACK | PSH, tls_record(20, 1) + tls_record(22, 40) + tls_record(23, 90), DATA)
    c.send("down", ACK | PSH, tls_record(23, 400) + tls_record(21, 26), TD)  # response + alert
    c.send("down", FIN | ACK, phase=TD)
    c.send("up", ACK, phase=TD)
    check(c, "1.2")


def test_alert_before_data_is_handshake_failure():
    c = Conn().handshake()
    c.send("up", ACK | PSH, tls_record(22, 100, version=0x0301), TLS)
    c.send("down", ACK | PSH, tls_record(21, 2), TLS)  # handshake_failure alert
    c.send("down", FIN | ACK, phase=TD)
    c.send("up", FIN | ACK, phase=TD)
    c.send("down", ACK, phase=TD)
    pb = check(c, "1.2")
    assert pb.up[DATA] == pb.down[DATA] == 0


def test_sequence_wraparound():
    c = Conn(isn_c=0xFFFFFF00, isn_s=0xFFFFFFF0).handshake()
    c.send("up", ACK | PSH, tls_record(22, 400, version=0x0301), TLS)  # crosses 2**32
    c.send("down", ACK | PSH, server_hello("1.2") + tls_record(22, 100), TLS)
    c.send("up", ACK | PSH, tls_record(20, 1) + tls_record(22, 40), TLS)
    c.send("up", ACK | PSH, tls_record(23, 50), DATA)
    c.send("down", ACK | PSH, tls_record(23, 50), DATA)
    c.send("up", FIN | ACK, phase=TD)
    check(c, "1.2")


def test_capture_without_handshake_or_teardown():
    full = tls13_conn()
    c = Conn()
    c.frames, c.expected, c.dirs = full.frames[3:10], full.expected[3:10], full.dirs[3:10]
    check(c, "1.3")


def test_capture_starting_mid_stream_with_old_retransmission():
    """No SYN captured: the client stream starts at the first payload seen; a later
    retransmission of bytes from before that point is clipped, not taken as a huge offset."""
    c = Conn()
    ch = tls_record(22, 200, version=0x0301)
    c.seq["up"] += 1 + len(ch)  # the ClientHello went out before the capture started
    fin = tls_record(20, 1) + tls_record(22, 40)
    req = tls_record(23, 80)
    c.send("up", ACK | PSH, fin, TLS)
    c.send("down", ACK | PSH, tls_record(20, 1) + tls_record(22, 40), TLS)
    # one retransmission of everything, the request included (its first transmission)
    c.send("up", ACK | PSH, ch + fin + req, DATA, seq=c.stream_offset_seq("up", 0))
    c.send("down", ACK | PSH, tls_record(23, 800), DATA)
    c.send("down", FIN | ACK, phase=TD)
    check(c, "1.2")


@pytest.mark.parametrize("build,version,expect_ms", [
    # packets are 1 ms apart: SYN at 0, SYN-ACK at 1, request, first and last response bytes
    (http_conn, None, {"wire_connect_s": 1, "wire_pretransfer_s": 3, "wire_tls_handshake_s": None,
                       "wire_starttransfer_s": 5, "wire_total_s": 6}),
    (tls12_conn, "1.2", {"wire_connect_s": 1, "wire_pretransfer_s": 9, "wire_tls_handshake_s": 8,
                         "wire_starttransfer_s": 10, "wire_total_s": 11}),
])
def test_wire_times_mark_phase_boundaries_like_curl(build, version, expect_ms):
    times = connection_phases(conn_of(build()), tls_version=version).times
    assert times == {k: v if v is None else pytest.approx(v / 1000, abs=1e-6) for k, v in expect_ms.items()}


def test_wire_times_of_a_connection_without_syn_are_empty():
    c = tls12_conn()
    pkts = conn_of(c)[3:]
    assert set(connection_phases(pkts, tls_version="1.2").times.values()) == {None}


def test_empty_connection():
    pb = split_phases([], tls_version=None)
    assert pb == PhaseBytes() and pb.total_up() == 0
    assert set(pb.as_row()) >= {f"bytes_{d}_{p}" for d in ("up", "down") for p in PHASES}


# ------------------------------------------------------------------------------------------
# tests: connection_packets / link types


def test_connection_packets_filters_other_traffic():
    a = tls12_conn()
    b = http_conn(client=("10.0.0.1", 40001))  # same client IP, other port
    udp = bytes(dpkt.ethernet.Ethernet(
        src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP,
        data=dpkt.ip.IP(src=socket.inet_aton("10.0.0.1"), dst=socket.inet_aton("10.0.0.2"),
                        p=17, data=dpkt.udp.UDP(sport=40000, dport=53, data=b"q"))))
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + bytes(28)
    mixed = []
    for i in range(max(len(a.frames), len(b.frames))):
        for c in (a, b):
            if i < len(c.frames):
                mixed.append(c.frames[i])
        mixed += [(0.0, udp), (0.0, arp)]
    pkts = [(ts, f, 1) for ts, f in mixed]
    ca = connection_packets(pkts, a.client)
    cb = connection_packets(pkts, ("10.0.0.1", 40001))
    assert [p.frame_len for p in ca] == [len(f) for _, f in a.frames]
    assert [p.frame_len for p in cb] == [len(f) for _, f in b.frames]
    assert connection_packets(pkts, ("10.9.9.9", 40000)) == []
    assert [p.frame_len for p in connection_packets(pkts, ("::ffff:10.0.0.1", 40000))] == \
        [p.frame_len for p in ca]


def test_client_endpoint_validation():
    with pytest.raises(ValueError):
        connection_packets([], ("not-an-ip", 1))
    with pytest.raises(ValueError):
        connection_packets([], ("10.0.0.1", 70000))


def _relink(frame: bytes, linktype: int) -> bytes:
    etype, ip = frame[12:14], frame[14:]
    if linktype == 113:  # Linux cooked v1
        return struct.pack("!HHH", 0, 1, 6) + b"\x02" * 6 + b"\x00\x00" + etype + ip
    if linktype == 276:  # Linux cooked v2
        return etype + b"\x00\x00" + struct.pack("!IHBB", 1, 1, 0, 6) + b"\x02" * 6 + b"\x00\x00" + ip
    if linktype == 0:  # BSD loopback, little-endian host
        return struct.pack("<I", 2) + ip
    if linktype == 108:
        return struct.pack("!I", 2) + ip
    if linktype == 101:
        return ip
    if linktype == 1:  # 802.1Q tagged
        return frame[:12] + b"\x81\x00\x00\x05" + frame[12:]
    raise AssertionError(linktype)


@pytest.mark.parametrize("linktype", [0, 1, 101, 108, 113, 276])
def test_other_link_types(linktype):
    c = tls12_conn()
    frames = [(ts, _relink(f, linktype)) for ts, f in c.frames]
    pkts = connection_packets([(ts, f, linktype) for ts, f in frames], c.client)
    assert [p.frame_len for p in pkts] == [len(f) for _, f in frames]
    assert classify_packets(pkts, tls_version="1.2") == c.expected


def test_unsupported_link_type_is_clear_error():
    with pytest.raises(ValueError, match="unsupported pcap link type 105"):
        connection_packets([(0.0, b"x" * 60, 105)], CLIENT)


# ------------------------------------------------------------------------------------------
# tests: pcap files


def test_pcap_roundtrip_matches_dpkt_reader(tmp_path):
    c = tls12_conn()
    path = tmp_path / "c.pcap"
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for ts, frame in c.frames:
            w.writepkt(frame, ts=ts)
    mine = read_pcap(path)
    with open(path, "rb") as f:
        theirs = list(dpkt.pcap.Reader(f))
    assert len(mine) == len(theirs) == len(c.frames)
    for (ts, frame, lt), (ts2, frame2) in zip(mine, theirs, strict=True):
        assert frame == frame2 and lt == 1 and abs(ts - ts2) < 1e-6
    pb = phases_from_pcap(path, c.client, tls_version="1.2")
    assert pb == split_phases(conn_of(c), tls_version="1.2")


@pytest.mark.parametrize("nano", [False, True])
def test_snaplen_truncation_does_not_change_counts(tmp_path, nano):
    """orig_len is counted; TLS record walking needs only the record headers of the client
    stream, which a 200-byte snaplen still captures here (server records are cut, so only the
    client-side alert rule could apply - and the FIN rule)."""
    for c, v in ((http_conn(), None), (tls12_conn(), "1.2"), (tls13_conn(), "1.3")):
        full = tmp_path / "full.pcap"
        cut = tmp_path / "cut.pcap"
        full.write_bytes(c.pcap_bytes(nano=nano))
        cut.write_bytes(c.pcap_bytes(snaplen=200 if v else 60, nano=nano))
        pkts = read_pcap(cut)
        assert any(len(p.frame) < p.wire_len for p in pkts)
        assert [p.wire_len for p in pkts] == [len(f) for _, f in c.frames]
        assert phases_from_pcap(cut, c.client, tls_version=v) == \
            phases_from_pcap(full, c.client, tls_version=v)
        assert classify_packets(connection_packets(pkts, c.client), tls_version=v) == c.expected


def test_big_endian_pcap(tmp_path):
    c = http_conn()
    buf = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for ts, f in c.frames:
        buf += struct.pack(">IIII", int(ts), 5, len(f), len(f)) + f
    (tmp_path / "be.pcap").write_bytes(buf)
    pkts = read_pcap(tmp_path / "be.pcap")
    assert [p.frame for p in pkts] == [f for _, f in c.frames]


def test_incremental_reader_tolerates_partial_records(tmp_path):
    c = tls13_conn()
    data = c.pcap_bytes()
    path = tmp_path / "live.pcap"
    r = PcapReader(path)
    assert r.read_new() == []  # file not created yet
    got = []
    with open(path, "wb") as f:
        pos = 0
        rng = random.Random(1)
        while pos < len(data):
            step = rng.randint(1, 300)
            f.write(data[pos:pos + step])
            f.flush()
            pos += step
            got += r.read_new()
    got += r.read_new()
    r.close()
    assert [p.frame for p in got] == [f for _, f in c.frames]
    assert [round(p.ts, 6) for p in got] == [round(ts, 6) for ts, _ in c.frames]
    assert r.offset == len(data)


def test_not_a_pcap(tmp_path):
    (tmp_path / "ng.pcap").write_bytes(struct.pack("<I", 0x0A0D0D0A) + bytes(40))
    with pytest.raises(ValueError, match="pcapng"):
        read_pcap(tmp_path / "ng.pcap")
    (tmp_path / "txt.pcap").write_bytes(b"hello world, not a capture at all")
    with pytest.raises(ValueError, match="not a pcap"):
        read_pcap(tmp_path / "txt.pcap")
    (tmp_path / "short.pcap").write_bytes(struct.pack("<I", 0xA1B2C3D4))
    with pytest.raises(ValueError, match="truncated pcap header"):
        read_pcap(tmp_path / "short.pcap")


def test_corrupt_record_length(tmp_path):
    data = bytearray(http_conn().pcap_bytes())
    struct.pack_into("<I", data, 24 + 8, 10**9)  # incl_len of the first record
    (tmp_path / "bad.pcap").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt pcap record"):
        read_pcap(tmp_path / "bad.pcap")


def test_packet_tuple_shape():
    p = Packet(1.5, b"abc", 1, 99)
    ts, frame, lt = p
    assert (ts, frame, lt, p.wire_len) == (1.5, b"abc", 1, 99)
    import pickle
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.wire_len == 99


# ------------------------------------------------------------------------------------------
# fuzz-style robustness: parsers never crash (ValueError is the only allowed failure)


LINKTYPES = [0, 1, 12, 101, 108, 113, 228, 229, 276]


def test_fuzz_random_frames():
    rng = random.Random(1234)
    templates = [f for c in (http_conn(), tls12_conn(), tls13_conn(),
                             http_conn(client=("fd00::1", 1), server=("fd00::2", 2), v6=True))
                 for _, f in c.frames]
    for _ in range(4000):
        kind = rng.random()
        if kind < 0.3:
            frame = rng.randbytes(rng.randint(0, 120))
        else:
            frame = bytearray(rng.choice(templates))
            if kind < 0.6:
                frame = frame[:rng.randint(0, len(frame))]
            else:
                for _ in range(rng.randint(1, 8)):
                    if frame:
                        frame[rng.randrange(len(frame))] = rng.randrange(256)
            frame = bytes(frame)
        lt = rng.choice(LINKTYPES)
        for client in (CLIENT, ("fd00::1", 1)):
            pk = connection_packets([(0.0, frame, lt)], client)
            for p in pk:
                split_phases(pk, tls_version=None)
                assert p.payload_len >= 0 and len(p.payload) <= p.payload_len


def _mutated_stream(rng, base: list[ConnPacket]) -> list[ConnPacket]:
    pkts = list(base)
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(pkts))
        p = pkts[i]
        action = rng.randrange(6)
        if action == 0 and p.payload:
            b = bytearray(p.payload)
            b[rng.randrange(len(b))] = rng.randrange(256)
            pkts[i] = p._replace(payload=bytes(b))
        elif action == 1:
            cut = rng.randint(0, len(p.payload))
            pkts[i] = p._replace(payload=p.payload[:cut])  # as if snaplen-truncated
        elif action == 2:
            pkts[i] = p._replace(seq=rng.randrange(2**32))
        elif action == 3:
            pkts[i] = p._replace(flags=rng.randrange(512))
        elif action == 4:
            del pkts[i]
            if not pkts:
                return pkts
        else:
            pkts.insert(rng.randrange(len(pkts) + 1), p)
    return pkts


def test_fuzz_phase_split_on_mutated_connections():
    rng = random.Random(99)
    bases = [(conn_of(c), v) for c, v in ((http_conn(), None), (tls12_conn(), "1.2"),
                                          (tls13_conn(), "1.3"))]
    outcomes = {"ok": 0, "ValueError": 0}
    for _ in range(3000):
        base, v = rng.choice(bases)
        pkts = _mutated_stream(rng, base)
        for version in (v, "auto", "1.2"):
            try:
                pb = split_phases(pkts, tls_version=version)
            except ValueError as e:
                assert str(e)
                outcomes["ValueError"] += 1
                continue
            outcomes["ok"] += 1
            assert pb.total_up() + pb.total_down() == sum(p.frame_len for p in pkts)
    assert outcomes["ok"] > 1000


def test_fuzz_pcap_files(tmp_path):
    rng = random.Random(7)
    good = tls12_conn().pcap_bytes()
    path = tmp_path / "f.pcap"
    for n in range(0, len(good), 37):  # every truncation point class: never an error
        path.write_bytes(good[:n])
        with PcapReader(path) as r:
            pkts = r.read_new()
        assert len(pkts) <= len(tls12_conn().frames)
    for _ in range(300):
        data = bytearray(good if rng.random() < 0.7 else rng.randbytes(rng.randint(0, 400)))
        for _ in range(rng.randint(1, 10)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[:rng.randint(0, len(data))]
        path.write_bytes(bytes(data))
        try:
            pkts = read_pcap(path)
        except ValueError:
            continue
        for client in (CLIENT, ("10.0.0.2", 443)):
            try:
                split_phases(connection_packets(pkts, client), tls_version="auto")
            except ValueError:
                pass
