"""tcpcrypt session resumption on real connections (issue 22 item 3, RFC 8548 §3.5), with the real
eno-bpf program in two namespaces (TcLab of test_tcpcrypt_interop: root, host kernel, no netem).

client -> tcpcryptd (A, outbound) -> tcpcryptd (B, inbound) -> service: six sequential fetches. The
first runs a key exchange (Init1/Init2); the next five resume: the SYN names the ticket the last
session left (its identifier half and an 8-byte nonce), the SYN-ACK agrees (its half), and neither
stream carries Init1 or Init2. The client daemon's key log then decrypts all six connections from the
capture (`tcpcryptd decrypt`: the resumed ones keyed by their TCPCRYPT_SS lines) to exactly the
requests and responses.

The round trip a resumption saves, counted on the wire rather than timed (the host kernel here has no
netem, and a veth's round trip is tens of microseconds, below what scheduling noise lets a test
bound): after the three-way handshake, A's first application frame

- fresh: follows B's Init2, which answers A's Init1: A waited one round trip past the handshake
  (one segment from B with payload precedes A's first frame);
- resumed: has the keys from the ticket, so it leaves before B has sent any payload at all
  (zero such segments): one round trip earlier.
"""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcpcrypt_rfcpeer as rp  # noqa: E402
import tcpcrypt_wire as tw  # noqa: E402
from test_tcpcrypt_interop import (  # noqa: E402,F401  (lab and tcpcrypt_built are fixtures)
    PEER_IP, PEER_PORT, Received, lab, recv_until_eof, start_daemon_outbound, tcpcrypt_built)
from test_tcpcrypt_failclosed import decrypted  # noqa: E402
from wearlab.nodes.tcpcrypt import encrypted  # noqa: E402

pytestmark = pytest.mark.root

FETCHES = 6
RESPONSE = bytes(range(256)) * 8     # 2 KiB


def resume_sub(opt: bytes) -> bytes | None:
    """The data of the resumption suboption (v = 1, >= 9 bytes: identifier half + nonce) in a
    SYN-form ENO option (kind, len, global/TEP suboptions), if there is one: the last suboption
    with v = 1 and no length byte (the form tcpcryptd and eno-bpf send)."""
    i = 2
    while i < len(opt):
        c = opt[i]
        if c < 0x20 or (0x20 <= c < 0x80):
            i += 1
        elif 0x80 <= c < 0xa0:               # length byte: a suboption with explicit length follows
            i += 1 + (c & 0x1f) + 1
        else:                                 # v = 1, data to the end of the option
            return opt[i + 1:] if len(opt) - i - 1 >= 9 else None
    return None


def connections(pcap: Path) -> dict[int, list[tw.Segment]]:
    """The capture's segments by A's port (connections to PEER_PORT)."""
    by: dict[int, list[tw.Segment]] = {}
    for s in tw.tcp_segments(pcap):
        if s.dport == PEER_PORT:
            by.setdefault(s.sport, []).append(s)
        elif s.sport == PEER_PORT:
            by.setdefault(s.dport, []).append(s)
    return by


def test_six_fetches_one_key_exchange_five_resumptions(lab):
    keylog = lab.dir / "a.keys"
    da = start_daemon_outbound(lab, "--key-log", str(keylog))
    db = lab.daemon("--out-port", "0", "--in-port", "7002", "--service-port", str(PEER_PORT), ns=lab.nsp, name="d2")
    service = lab.sock(lab.nsp, bind=(PEER_IP, PEER_PORT), listen=True)

    def serve():
        for _ in range(FETCHES):
            c, _ = service.accept()
            lab.sockets.append(c)
            req = b""
            while not req.endswith(b"\n"):
                b = c.recv(4096)
                if not b:
                    break
                req += b
            c.sendall(RESPONSE)
            c.shutdown(socket.SHUT_WR)
    lab.thread(serve)
    cap = lab.capture("resume")
    ports = []
    for k in range(FETCHES):
        client = lab.sock(lab.nsd)
        client.settimeout(20)
        client.connect((PEER_IP, PEER_PORT))
        client.sendall(b"GET /%d\n" % k)
        rec = Received()
        recv_until_eof(client, rec)
        assert rec.eof and bytes(rec.data) == RESPONSE, (k, rec.error, len(rec.data))
        client.close()
        # both daemons' close records of this fetch before the next one (sequential fetches)
        da.wait_stats(lambda s, n=k + 1: sum(1 for x in da.stats() if x.get("mode") == "tcpcrypt") >= n)
        db.wait_stats(lambda s, n=k + 1: sum(1 for x in db.stats() if x.get("mode") == "tcpcrypt") >= n)
    sa = [s for s in da.stats() if s.get("mode") == "tcpcrypt"]
    sb = [s for s in db.stats() if s.get("mode") == "tcpcrypt"]
    cap.stop(PEER_PORT)

    # the daemons: one key exchange, then five resumptions, each with one session ID at both ends
    assert [s["resumed"] for s in sa] == [False] + [True] * (FETCHES - 1), sa
    assert [s["resumed"] for s in sb] == [False] + [True] * (FETCHES - 1), sb
    assert len({s["session_id"] for s in sa}) == FETCHES
    for x in sa:
        y = next(y for y in sb if y["session_id"] == x["session_id"])
        assert x["state"] == y["state"] == "closed" and encrypted(x, y), (x, y)

    # the wire
    conns = connections(cap.path)
    assert len(conns) == FETCHES, sorted(conns)
    offsets, waited = [], []
    for i, (port, segs) in enumerate(sorted(conns.items(), key=lambda kv: kv[1][0].ts)):
        syn = next(s for s in segs if s.syn and not s.flags & tw.TCP_ACK and s.sport == port)
        synack = next(s for s in segs if s.syn and s.flags & tw.TCP_ACK)
        a_data = [s for s in segs if s.sport == port and s.payload_len > 0]
        (syn_eno,), (synack_eno,) = syn.eno, synack.eno
        a_res, b_res = resume_sub(syn_eno), resume_sub(synack_eno)
        a_magic = stream_start(cap.path, port, True)
        b_magic = stream_start(cap.path, port, False)
        if i == 0:
            assert a_res is None and b_res is None, (syn_eno.hex(), synack_eno.hex())
            assert a_magic == rp.INIT1_MAGIC and b_magic == rp.INIT2_MAGIC
            init1_len = stream_len_field(cap.path, port)
            data = min((s for s in a_data if s.seq - syn.seq - 1 >= init1_len), key=lambda s: s.ts)
        else:
            # SYN: the ticket's half (9 bytes) + an 8-byte nonce_a; SYN-ACK: B's half, nonce_b empty
            assert a_res is not None and len(a_res) == 17, syn_eno.hex()
            assert b_res is not None and len(b_res) == 9, synack_eno.hex()
            assert a_magic != rp.INIT1_MAGIC and b_magic != rp.INIT2_MAGIC, (hex(a_magic), hex(b_magic))
            data = min(a_data, key=lambda s: s.ts)
        offsets.append(data.ts - syn.ts)
        # segments from B with payload that A had seen before its first application frame
        waited.append(sum(1 for s in segs if s.dport == port and s.payload_len > 0 and s.index < data.index))
    print(f"first application frame after the SYN: fresh {offsets[0] * 1e3:.2f} ms, resumed "
          + ", ".join(f"{x * 1e3:.2f}" for x in offsets[1:]) + f" ms; B's segments with payload before it: {waited}")
    assert waited == [1] + [0] * (FETCHES - 1), waited

    # the client daemon's key log decrypts all six from the capture (tcpcryptd decrypt): the fresh
    # session and the five resumed ones, each to exactly the request and the response
    report, plain = decrypted(keylog, cap.path, lab.dir / "decrypted", PEER_PORT)
    assert list(plain.values()) == [(b"GET /%d\n" % k, RESPONSE) for k in range(FETCHES)], report
    assert report.count("fresh key exchange") == 1 and report.count("resumed") == FETCHES - 1, report
    assert all(f"session {x['session_id']}" in report for x in sa), report


def _stream(pcap: Path, port: int, from_a: bool) -> bytes:
    segs = [s for s in tw.tcp_segments(pcap) if (s.sport == port if from_a else s.dport == port)]
    syn = next(s for s in segs if s.syn)
    out = bytearray()
    data = pcap.read_bytes()
    pieces: dict[int, bytes] = {}
    for _, _, pkt, lt in tw._records(data):
        l3 = tw._network_layer(pkt, lt)
        r = tw._ip_to_tcp(*l3) if l3 else None
        if r is None:
            continue
        _, _, tcp = r
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        if (sport, dport) != ((port, PEER_PORT) if from_a else (PEER_PORT, port)):
            continue
        doff = (tcp[12] >> 4) * 4
        if len(tcp) > doff:
            pieces[(seq - syn.seq - 1) % (1 << 32)] = bytes(tcp[doff:])
    for off in sorted(pieces):
        if off == len(out):
            out += pieces[off]
        elif off < len(out):
            out += pieces[off][len(out) - off:]
    return bytes(out)


def stream_start(pcap: Path, port: int, from_a: bool) -> int:
    """The first 4 bytes of one direction's byte stream (Init1/Init2 magic in a key exchange)."""
    return struct.unpack(">I", _stream(pcap, port, from_a)[:4])[0]


def stream_len_field(pcap: Path, port: int) -> int:
    """Init1's length field (bytes 4..8 of A's stream)."""
    return struct.unpack(">I", _stream(pcap, port, True)[4:8])[0]


def test_a_peer_without_the_ticket_gets_a_fresh_key_exchange(lab):
    """A holds a ticket, B's daemon restarted (its cache and its eno_resume map are gone): A's SYN
    offers the resumption, B's SYN-ACK names a plain TEP, and the connection runs Init1/Init2 -
    the fallback is a fresh key exchange, never a failure. The offered ticket is spent (§3.5): the
    fetch after that resumes from the new session's ticket."""
    da = start_daemon_outbound(lab)
    service = lab.sock(lab.nsp, bind=(PEER_IP, PEER_PORT), listen=True)

    def serve():
        while True:
            try:
                c, _ = service.accept()
            except OSError:
                return
            lab.sockets.append(c)
            req = b""
            while not req.endswith(b"\n"):
                b = c.recv(4096)
                if not b:
                    break
                req += b
            c.sendall(RESPONSE)
            c.shutdown(socket.SHUT_WR)
    lab.thread(serve)

    def fetch(db, n):
        client = lab.sock(lab.nsd)
        client.settimeout(20)
        client.connect((PEER_IP, PEER_PORT))
        client.sendall(b"GET\n")
        rec = Received()
        recv_until_eof(client, rec)
        assert rec.eof and bytes(rec.data) == RESPONSE, (rec.error, len(rec.data))
        client.close()
        da.wait_stats(lambda s: sum(1 for x in da.stats() if x.get("mode") == "tcpcrypt") >= n)
        return db.wait_stats(lambda s: s.get("mode") == "tcpcrypt" and s not in done)

    done: list[dict] = []
    db = lab.daemon("--out-port", "0", "--in-port", "7002", "--service-port", str(PEER_PORT), ns=lab.nsp, name="b1")
    done.append(fetch(db, 1))
    db.stop()
    db2 = lab.daemon("--out-port", "0", "--in-port", "7002", "--service-port", str(PEER_PORT), ns=lab.nsp, name="b2")
    cap = lab.capture("fallback")
    y2 = fetch(db2, 2)
    done.append(y2)
    y3 = fetch(db2, 3)
    cap.stop(PEER_PORT)
    sa = [s for s in da.stats() if s.get("mode") == "tcpcrypt"]
    assert [s["resumed"] for s in sa] == [False, False, True], sa
    assert (y2["resumed"], y3["resumed"]) == (False, True)
    assert encrypted(sa[1], y2) and encrypted(sa[2], y3)
    conns = sorted(connections(cap.path).items(), key=lambda kv: kv[1][0].ts)
    assert len(conns) == 2
    port, segs = conns[0]
    syn = next(s for s in segs if s.syn and not s.flags & tw.TCP_ACK)
    synack = next(s for s in segs if s.syn and s.flags & tw.TCP_ACK)
    assert resume_sub(syn.eno[0]) is not None and resume_sub(synack.eno[0]) is None, (syn.eno, synack.eno)
    assert stream_start(cap.path, port, True) == rp.INIT1_MAGIC and stream_start(cap.path, port, False) == rp.INIT2_MAGIC
