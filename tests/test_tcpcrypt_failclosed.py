"""tcpcryptd fails closed, can be required, and can be verified (issue 22 items 1, 2, 4, 5), with the
real eno-bpf program in two namespaces (TcLab of test_tcpcrypt_interop: root, host kernel, no netem).

* A connection whose ENO record is deleted right after the handshake (what an eviction did with the
  old LRU map; tcpcryptd --test-drop-eno-record), as host A and as host B: both connections are
  reset and not one byte of the payload crosses the wire in clear (the capture).
* --require-encryption: a peer without TCP-ENO gets a reset; without it the fallback goes ahead and
  is reported with its reason.
* Both daemons report the same session ID over their control sockets (`session ADDR`), and it is
  the one RFC 8548 §3.3/§3.4 derives from the capture's ENO options, Init1, Init2 and the ES of the
  key log (--key-log), computed here with the independent peer's HKDF (tcpcrypt_rfcpeer); and
  `tcpcryptd decrypt` turns the capture and the key log back into exactly the bytes each side sent
  (a wrong key: exit 1, "wrong key").
* A peer that negotiates ENO and never sends Init1 costs the daemon at most the back-pressure cap of
  data it reads from the service and is reset when --handshake-timeout runs out.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcpcrypt_rfcpeer as rp  # noqa: E402
import tcpcrypt_wire as tw  # noqa: E402
from test_tcpcrypt_interop import (  # noqa: E402,F401  (lab and tcpcrypt_built are fixtures)
    DAEMON_IP, PEER_IP, PEER_PORT, SERVICE_PORT, TCPCRYPTD, Received, lab, recv_until_eof, run,
    start_daemon_inbound, start_daemon_outbound, tcpcrypt_built)
from wearlab.nodes.tcpcrypt import encrypted  # noqa: E402

pytestmark = pytest.mark.root

BUF = 64 * 1024                  # tcpcryptd's relay buffer (DaemonConfig::buf_size)
HIGH_WATER = 4 * BUF             # the upload's back-pressure threshold (outgoing + pending)
CAP = HIGH_WATER + BUF           # what it can hold: it stops reading only once above high water


def leaked(pcap: Path, payload: bytes, window: int = 24) -> bool:
    """Whether any `window`-byte piece of `payload` is in the capture file (tcpdump -s 0 keeps every
    byte of every packet, so plaintext on the wire would be there verbatim)."""
    data = pcap.read_bytes()
    return any(payload[i:i + window] in data for i in range(0, len(payload) - window + 1, window))


def tcp_payloads(pcap: Path, port: int) -> dict[bool, bytes]:
    """Each direction's TCP byte stream of the first connection to `port`, by sequence number
    (True: from the active opener)."""
    data = pcap.read_bytes()
    first_syn: dict[bool, int] = {}
    pieces: dict[bool, dict[int, bytes]] = {True: {}, False: {}}
    for _, _, pkt, lt in tw._records(data):
        l3 = tw._network_layer(pkt, lt)
        r = tw._ip_to_tcp(*l3) if l3 else None
        if r is None:
            continue
        _, _, tcp = r
        sport, dport, seq, _, off_flags = struct.unpack_from(">HHIIH", tcp, 0)
        if port not in (sport, dport):
            continue
        active = dport == port
        if off_flags & tw.TCP_SYN:
            first_syn.setdefault(active, seq)
            continue
        body = bytes(tcp[(off_flags >> 12) * 4:])
        if body and active in first_syn:
            pieces[active].setdefault((seq - first_syn[active] - 1) % (1 << 32), body)
    out = {}
    for d, ps in pieces.items():
        stream = bytearray()
        for off in sorted(ps):
            if off <= len(stream):
                stream[off:off + len(ps[off])] = ps[off]
        out[d] = bytes(stream)
    return out


def decrypted(keylog: Path, pcap: Path, out: Path, port: int) -> tuple[str, dict[int, tuple[bytes, bytes]]]:
    """`tcpcryptd decrypt` of a capture: its report and, per connection number, the application
    bytes A -> B and B -> A (A: the active opener)."""
    r = run([str(TCPCRYPTD), "decrypt", "--key-log", str(keylog), "--pcap", str(pcap), "--port", str(port),
             "--out", str(out)], timeout=30)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    conns = {int(f.name[4:].split("-")[0]) for f in out.glob("conn*-a2b.bin")}
    return r.stdout, {n: ((out / f"conn{n}-a2b.bin").read_bytes(), (out / f"conn{n}-b2a.bin").read_bytes())
                      for n in sorted(conns)}


def wait_for(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def session(d, addr: str) -> dict:
    r = run([str(TCPCRYPTD), "session", addr, "--control", str(d.control)])
    assert r.returncode == 0, r.stderr
    import json
    conns = json.loads(r.stdout)["connections"]
    return conns[0] if conns else {}


# ============================================================================ 1. fail closed

@pytest.mark.parametrize("role", ["A", "B"])
def test_missing_eno_record_resets_and_no_plaintext_crosses(lab, role):
    """ENO completes on the wire (the peer enables encryption), then the daemon's record of the
    connection is gone: the daemon resets both its connections instead of relaying plaintext
    (RFC 8547 §4.6: once encryption is enabled, no plaintext)."""
    payload = os.urandom(200_000)
    cg = lab.eno_attach("p23", [rp.TEP_CURVE25519])
    if role == "A":
        # application -> daemon (host A, record dropped) -> ENO peer (B): the app's payload must not cross.
        d = start_daemon_outbound(lab, "--test-drop-eno-record", "out")
        listener = lab.sock(lab.nsp, cg, bind=(PEER_IP, PEER_PORT), listen=True)
        cap = lab.capture("a")
        client = lab.sock(lab.nsd)
        client.settimeout(20)
        # The reset may come before connect() has returned (the daemon accepts the intercepted
        # connection, connects out and aborts within microseconds): any of the three sees it.
        with pytest.raises(ConnectionResetError):
            client.connect((PEER_IP, PEER_PORT))
            client.sendall(payload)
            client.recv(1)  # a reset, not data, not EOF
        listener.settimeout(20)
        peer, _ = listener.accept()
        lab.sockets.append(peer)
        peer.settimeout(20)
        got = Received()
        recv_until_eof(peer, got)
        assert not got.data and isinstance(got.error, ConnectionResetError), got
        port = PEER_PORT
    else:
        # ENO peer (A) -> daemon (host B, record dropped) -> service: the service's payload must not cross.
        d = start_daemon_inbound(lab, "--test-drop-eno-record", "in")
        service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)

        def serve():
            c, _ = service.accept()
            lab.sockets.append(c)
            try:
                c.sendall(payload)
            except OSError:
                pass
        lab.thread(serve)
        cap = lab.capture("b")
        peer = lab.sock(lab.nsp, cg)
        peer.settimeout(20)
        got = Received()
        try:
            peer.connect((DAEMON_IP, SERVICE_PORT))
        except ConnectionResetError as e:   # the reset came before connect() returned
            got.error = e
        else:
            recv_until_eof(peer, got)
        assert not got.data and isinstance(got.error, ConnectionResetError), got
        port = SERVICE_PORT
    st = d.wait_stats(lambda s: True)
    assert st["state"] == "aborted" and st["mode"] == "none", st
    assert st["reason"].startswith("fail closed: no ENO record"), st
    cap.stop(port)
    w = tw.eno_from_pcap(cap.path, port=port)
    assert w.negotiation.ok and w.third_segment_has_eno, "ENO did complete on the wire (the peer enabled encryption)"
    daemon_is_active = role == "A"
    assert any(s.flags & tw.TCP_RST and s.from_active == daemon_is_active for s in w.segments), "no RST from the daemon"
    assert not any(s.flags & tw.TCP_FIN and s.from_active == daemon_is_active for s in w.segments), "FIN, not abort"
    assert not leaked(cap.path, payload), "plaintext of the payload on the wire"


# ============================================================================ 2. require and verify

@pytest.mark.parametrize("required", [True, False], ids=["required", "opportunistic"])
def test_require_encryption_against_a_peer_without_eno(lab, required):
    """The daemon (A) to a server without TCP-ENO: with --require-encryption for that port the
    application gets a reset and no byte crosses; without it, plain TCP, reported with its reason."""
    extra = ("--require-encryption", str(PEER_PORT)) if required else ()
    d = start_daemon_outbound(lab, *extra)
    listener = lab.sock(lab.nsp, bind=(PEER_IP, PEER_PORT), listen=True)   # no ENO cgroup
    received = Received()

    def serve():
        c, _ = listener.accept()
        lab.sockets.append(c)
        recv_until_eof(c, received)
        try:
            c.sendall(b"pong")
            c.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    lab.thread(serve)
    cap = lab.capture("req")
    payload = os.urandom(50_000)
    client = lab.sock(lab.nsd)
    client.settimeout(20)
    reply = Received()
    try:
        client.connect((PEER_IP, PEER_PORT))
    except ConnectionResetError as e:   # the daemon's reset came before connect() returned
        reply.error = e
    else:
        try:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        recv_until_eof(client, reply)
    st = d.wait_stats(lambda s: True)
    assert st["fallback"] == "eno-bpf: SynAckWithoutEno", st
    assert st["require_encryption"] is required
    cap.stop(PEER_PORT)
    if required:
        assert isinstance(reply.error, ConnectionResetError) and not reply.data, reply
        assert st["state"] == "aborted" and st["mode"] == "none", st
        assert st["reason"] == "encryption required, but ENO fell back: eno-bpf: SynAckWithoutEno", st
        assert not leaked(cap.path, payload)
        assert received.done.wait(10) and not received.data
    else:
        assert reply.eof and bytes(reply.data) == b"pong"
        assert received.done.wait(10) and bytes(received.data) == payload
        assert st["state"] == "closed" and st["mode"] == "plain", st
        assert st["reason"] == "eno-bpf: SynAckWithoutEno"
        # what wearlab's results make of it: not encrypted, and why
        assert not encrypted(st, None)


def test_both_daemons_report_the_session_id_the_rfc_derives_from_capture_and_key_log(lab):
    """client -> tcpcryptd (A, its namespace) -> tcpcryptd (B, the peer namespace) -> service. Both
    daemons give the same session ID for the connection over their control sockets (by the
    application's own socket address); the capture's ENO transcript, Init1 and Init2 and the ES
    from the client daemon's key log give, by RFC 8548's derivation computed here, the same ID."""
    keylog_a, keylog_b = lab.dir / "a.keys", lab.dir / "b.keys"
    da = start_daemon_outbound(lab, "--key-log", str(keylog_a))
    db = lab.daemon("--out-port", "0", "--in-port", "7002", "--service-port", str(PEER_PORT), "--key-log",
                    str(keylog_b), ns=lab.nsp, name="d2")
    service = lab.sock(lab.nsp, bind=(PEER_IP, PEER_PORT), listen=True)
    box: dict = {}

    def serve():
        c, peer = service.accept()
        lab.sockets.append(c)
        box["peer"] = f"{peer[0]}:{peer[1]}"
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        c.shutdown(socket.SHUT_WR)
    lab.thread(serve)
    cap = lab.capture("sid")
    client = lab.sock(lab.nsd)
    client.settimeout(20)
    client.connect((PEER_IP, PEER_PORT))
    client.sendall(b"ping")
    assert client.recv(4) == b"ping"
    app = "%s:%d" % client.getsockname()
    x = wait_for(lambda: session(da, app).get("session_id") and session(da, app), 10, "client daemon's session")
    wait_for(lambda: "peer" in box, 10, "service connection")
    y = wait_for(lambda: session(db, box["peer"]).get("session_id") and session(db, box["peer"]), 10,
                 "server daemon's session")
    assert x["session_id"] == y["session_id"] and len(x["session_id"]) == 66, (x, y)
    assert (x["role"], y["role"], x["mode"], y["mode"]) == ("A", "B", "tcpcrypt", "tcpcrypt")
    client.shutdown(socket.SHUT_WR)
    rest = Received()
    recv_until_eof(client, rest)
    assert rest.eof
    cap.stop(PEER_PORT)

    # RFC 8548 §3.3/§3.4 from the wire and the key log, independently of the daemon.
    w = tw.eno_from_pcap(cap.path, port=PEER_PORT)
    assert w.negotiation.ok
    streams = tcp_payloads(cap.path, PEER_PORT)
    init1_len = struct.unpack(">I", streams[True][4:8])[0]
    init2_len = struct.unpack(">I", streams[False][4:8])[0]
    init1, init2 = streams[True][:init1_len], streams[False][:init2_len]
    assert struct.unpack(">I", init1[:4])[0] == rp.INIT1_MAGIC and struct.unpack(">I", init2[:4])[0] == rp.INIT2_MAGIC
    n_a = init1[9 + 2 * init1[8]:][:32]
    lines = [l.split() for l in keylog_a.read_text().splitlines()]
    es = next(bytes.fromhex(l[2]) for l in lines if l[0] == "TCPCRYPT_ES" and l[1] == n_a.hex())
    prk = rp.extract(n_a, w.transcript + init1 + init2 + es)
    sid = rp.session_id(w.negotiation.tep_byte, prk).hex()
    assert sid == x["session_id"] == y["session_id"]
    ss = next(l for l in lines if l[0] == "TCPCRYPT_SS" and l[1] == sid)
    assert ss[2] == "0" and ss[3] == prk.hex()
    assert sorted(keylog_a.read_text().splitlines()) == sorted(keylog_b.read_text().splitlines())
    # the key log decrypts the capture (tcpcryptd decrypt): exactly what each side sent, both FINp
    report, plain = decrypted(keylog_a, cap.path, lab.dir / "decrypted", PEER_PORT)
    assert list(plain.values()) == [(b"ping", b"ping")], (report, plain)
    assert f"session {sid}" in report and report.count("FINp,") == 0 and report.count(", FINp") == 2, report
    # ... and a key log whose ES is wrong says so, with exit status 1
    wrong = lab.dir / "wrong.keys"
    wrong.write_text(f"TCPCRYPT_ES {n_a.hex()} {bytes(len(es)).hex()}\n")
    r = run([str(TCPCRYPTD), "decrypt", "--key-log", str(wrong), "--pcap", str(cap.path), "--port", str(PEER_PORT)])
    assert r.returncode == 1 and "wrong key" in r.stdout, (r.returncode, r.stdout, r.stderr)
    # the close records: clean at both ends with one session ID = what wearlab counts as encrypted
    ca = da.wait_stats(lambda s: s.get("mode") == "tcpcrypt")
    cb = db.wait_stats(lambda s: s.get("mode") == "tcpcrypt")
    assert ca["state"] == cb["state"] == "closed" and encrypted(ca, cb)


# ============================================================================ 4. bounds

def test_a_peer_that_never_sends_init1_costs_at_most_the_cap_and_is_reset_after_the_timeout(lab):
    """The peer (A) negotiates ENO and then says nothing; the service behind the daemon (B) writes
    8 MiB at once. The daemon reads the service's data into `pending` only until outgoing + pending
    exceeds the high water mark (4 x 64 KiB): it holds more than 256 KiB (it stops reading only
    above) and at most 256 + 64 KiB (one read past it). --handshake-timeout 2 resets the
    connection no earlier than 2 s after it opened and (scheduling, a loaded 2-core host) within
    1 s after."""
    timeout = 2.0
    d = start_daemon_inbound(lab, "--handshake-timeout", str(timeout))
    service = lab.sock(lab.nsd, bind=(DAEMON_IP, SERVICE_PORT), listen=True)

    def serve():
        c, _ = service.accept()
        lab.sockets.append(c)
        try:
            c.sendall(os.urandom(8 << 20))
        except OSError:
            pass
    lab.thread(serve)
    cg = lab.eno_attach("p23", [rp.TEP_CURVE25519])
    peer = lab.sock(lab.nsp, cg)
    peer.settimeout(20)
    t0 = time.monotonic()
    peer.connect((DAEMON_IP, SERVICE_PORT))

    def pending():
        conns = d.status()["connections"]
        return conns[0].get("pending_bytes", 0) if conns else 0
    held = wait_for(lambda: (p := pending()) > HIGH_WATER and p, timeout - 0.5, f"pending > {HIGH_WATER}")
    assert HIGH_WATER < held <= CAP, held
    got = Received()
    recv_until_eof(peer, got)
    elapsed = time.monotonic() - t0
    assert isinstance(got.error, ConnectionResetError) and not got.data, got
    assert timeout <= elapsed <= timeout + 1.0, elapsed
    st = d.wait_stats(lambda s: True)
    assert st["state"] == "aborted" and st["reason"].startswith("handshake timeout"), st
    assert st["pending_bytes"] <= CAP
    print(f"stalled peer: {held} bytes held (cap {CAP}), reset after {elapsed:.3f} s (timeout {timeout} s)")
