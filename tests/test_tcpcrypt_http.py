"""HTTP over tcpcrypt in wearlab (`protocol: tcpcrypt`): unchanged curl and nginx, wearlab's
tcpcryptd at both ends. Checked against RFC 8547/8548 and the link's physics: the key exchange
costs one round trip, the bytes are the ENO options + Init1/Init2 + 20 per frame, both daemons
agree on the session ID, and a phone that splits the connection (CPROXY) makes it fall back to
plain TCP."""

from __future__ import annotations

import csv
import json
import random
import stat
import statistics
import sys
from pathlib import Path

import pytest

from conftest import wearlab
from wearlab.errors import InputError
from wearlab.nodes.tcpcrypt import BINARY
from wearlab.plan.seeds import file_seed
from wearlab.report.decrypt import decrypt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tcpcrypt_wire as tw  # noqa: E402

pytestmark = pytest.mark.netem


@pytest.fixture(autouse=True, scope="module")
def _built():
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is not built: `make test` builds it (make tcpcrypt)", pytrace=False)

ONE_WAY = 0.020
SIZE = 100_000
FRAME = 16384
RTT = 2 * ONE_WAY


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """The experiment's results directory and `wearlab run`'s output. The watch keeps a key log
    (tcpcrypt_key_log: one line per session written at its key exchange, a few hundred bytes: not
    what the physics below measures) for test_the_key_log_decrypts_the_capture."""
    d = tmp_path_factory.mktemp("tcpcrypt")
    (d / "topo.yaml").write_text(f"""
nodes:
  watch: {{role: wearable, tcpcrypt_key_log: true}}
  phone: {{role: phone}}
  ap: {{role: ap}}
  server: {{role: server}}
links:
  - {{between: [watch, ap], delay: {int(ONE_WAY * 500)}ms}}
  - {{between: [ap, server], delay: {int(ONE_WAY * 500)}ms}}
  - {{between: [watch, phone], delay: 5ms}}
  - {{between: [phone, ap], delay: 5ms}}
""")
    (d / "exp.yaml").write_text(f"""
name: tcpcrypt-physics
topology: topo.yaml
repetitions: 3
seed: 8
workload: {{kind: http-get, client: watch, server: server, size: {SIZE}}}
matrix:
  protocol: [http, tcpcrypt]
  path: [ap, phone]
""")
    res = wearlab("run", str(d / "exp.yaml"), "--out", str(d / "results"), timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    return d / "results" / "tcpcrypt-physics" / "latest", res


@pytest.fixture(scope="module")
def runs(experiment):
    latest, _ = experiment
    with (latest / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    with (latest / "series" / "tcpcrypt.csv").open() as f:
        records = list(csv.DictReader(f))
    assert rows and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    return rows, records


def cell(rows, protocol, path):
    return [r for r in rows if r["protocol"] == protocol and r["path"] == path]


def test_direct_path_is_encrypted_with_one_session_id(runs):
    rows, records = runs
    for r in cell(rows, "tcpcrypt", "ap"):
        assert r["tcpcrypt_encrypted"] == "1"
        pair = [x for x in records if x["run"] == r["run"]]
        assert {x["node"] for x in pair} == {"watch", "server"}
        assert {x["mode"] for x in pair} == {"tcpcrypt"}
        assert {x["state"] for x in pair} == {"closed"}            # tcpcrypt_encrypted needs a clean close
        assert {x["reason"] for x in pair} == {""}
        ids = {x["session_id"] for x in pair}
        assert len(ids) == 1 and len(ids.pop()) == 66  # 33 bytes (RFC 8548 3.4), the same at both ends
        assert {x["tep"] for x in pair} == {"TCPCRYPT_ECDHE_Curve25519"}  # 0x23, the required TEP
        # ENO on the wire: A's SYN offers TEPs (kind 69 = 0x45), B's SYN-ACK answers with b = 1.
        watch = next(x for x in pair if x["node"] == "watch")
        assert watch["eno_syn"].startswith("45") and watch["eno_synack"].startswith("45")


def wire(pcaps, *ports: int) -> dict[int, tuple[bytes, bytes]]:
    """The payload bytes each connection (its client end's port) carried on the wire, up and down,
    in capture order: whatever crossed in clear would be in them."""
    out = {p: (bytearray(), bytearray()) for p in ports}
    for pcap in pcaps:
        for s in tw.tcp_segments(pcap):
            if s.sport in out:
                out[s.sport][0].extend(s.payload)
            elif s.dport in out:
                out[s.dport][1].extend(s.payload)
    return {p: (bytes(u), bytes(d)) for p, (u, d) in out.items()}


def test_the_key_log_decrypts_the_capture(experiment, runs, tmp_path):
    """issue 22 item 5: with the watch's key log, `wearlab decrypt --run N` (report.decrypt, in
    this process: the command line's refusals are tests/test_tcpcrypt_keylog.py's) opens a
    tcpcrypt run's connection in the watch's capture to exactly the request curl sent and the
    response nginx served (the generated file, byte for byte: random.Random(file_seed(seed,
    size))), while the same connection's bytes on the wire hold none of it - and a plain HTTP
    run's do (the check sees plaintext where there is some)."""
    latest, res = experiment
    rows, records = runs
    assert "WARNING: tcpcrypt key log kept on watch" in res.stdout
    meta = json.loads((latest / "metadata.json").read_text())
    assert meta["tcpcrypt_key_logs"] == {"watch": "keys/watch.keylog"}
    assert any("these results hold session keys" in n for n in meta["notes"])
    keylog = latest / "keys" / "watch.keylog"
    assert stat.S_IMODE(keylog.stat().st_mode) == 0o600
    assert not (latest / "keys" / "server.keylog").exists()       # only the node that asked

    run = cell(rows, "tcpcrypt", "ap")[0]["run"]
    sid = {x["session_id"] for x in records if x["run"] == run}.pop()
    out, lines = tmp_path / "plain", []
    assert decrypt(latest, run=int(run), out=out, write=lines.append) == 0, lines
    conns = [l for l in lines if l.startswith("connection ")]
    assert len(conns) == 1 and "tcpcrypt, fresh key exchange, TEP 0x23" in conns[0] and sid in conns[0], lines
    a2b, = out.glob("*/conn*-a2b.bin")
    request, response = a2b.read_bytes(), a2b.with_name(a2b.name.replace("a2b", "b2a")).read_bytes()
    assert request.startswith(f"GET /files/{SIZE}.bin HTTP/1.1\r\n".encode()) and request.endswith(b"\r\n\r\n")
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and f"Content-Length: {SIZE}\r\n".encode() in head + b"\r\n"
    assert body == random.Random(file_seed(meta["seed"], SIZE)).randbytes(SIZE)

    crypt = int(conns[0].split(" -> ")[0].rpartition(":")[2])
    plain = int(cell(rows, "http", "ap")[0]["local_port"])
    seen = wire(sorted((latest / "captures").glob("*.pcap")), crypt, plain)
    samples = [body[i:i + 32] for i in (0, SIZE // 2, SIZE - 32)]
    up, down = seen[crypt]
    assert len(down) >= SIZE and b"GET /files" not in up and not any(s in down for s in samples)
    up, down = seen[plain]
    assert request.split(b"\r\n")[0] in up and all(s in down for s in samples)

    fell_back = cell(rows, "tcpcrypt", "phone")[0]["run"]      # plain TCP: nothing to decrypt
    with pytest.raises(InputError) as e:
        decrypt(latest, run=int(fell_back))
    assert "no encrypted connection" in str(e.value)


def test_key_exchange_takes_one_round_trip(runs):
    rows, _ = runs
    kx = [float(r["wire_tls_handshake_s"]) for r in cell(rows, "tcpcrypt", "ap")]
    # Init1 out, Init2 back, then the first frame: one RTT plus two X25519 operations and the
    # daemons' scheduling - far less than a second round trip.
    assert all(RTT - 1e-4 <= k for k in kx), kx
    assert statistics.median(kx) <= RTT + 0.010, kx
    connect = [float(r["wire_connect_s"]) for r in cell(rows, "tcpcrypt", "ap")]
    assert all(RTT - 1e-4 <= c <= RTT + 0.005 for c in connect), connect


def test_bytes_are_the_rfcs(runs):
    """Down bytes beyond plain HTTP's: Init2 (74 B for X25519 with one 2-byte cipher, RFC 8548 4.1)
    in its own segment, ENO in the SYN-ACK (4 B), and 20 B per frame of at most 16 KiB."""
    rows, _ = runs
    http = statistics.median(int(r["bytes_down_total"]) for r in cell(rows, "http", "ap"))
    crypt = statistics.median(int(r["bytes_down_total"]) for r in cell(rows, "tcpcrypt", "ap"))
    frames = -(-(SIZE + 300) // FRAME) + 1  # the response with its headers, and the FINp frame
    least = 74 + 4 + 20 * frames
    # Upper bound: each extra frame may cost one segment's headers (66 B) and an ACK or two.
    assert least <= crypt - http <= least + 66 * (frames + 4), (http, crypt)
    kx_down = statistics.median(int(r["bytes_down_tls_handshake"]) for r in cell(rows, "tcpcrypt", "ap"))
    assert 74 + 54 <= kx_down <= 74 + 3 * 66, kx_down  # Init2 plus its headers (and maybe an ACK)


def test_a_splitting_phone_proxy_falls_back_to_plain_tcp(runs):
    rows, records = runs
    for r in cell(rows, "tcpcrypt", "phone"):
        assert r["tcpcrypt_encrypted"] == "0"
        assert {x["mode"] for x in records if x["run"] == r["run"]} == {"plain"}
        # the fallback is reported with its reason: the phone's proxy answered the watch's SYN
        # without TCP-ENO (RFC 8547 4.6)
        watch = next(x for x in records if x["run"] == r["run"] and x["node"] == "watch")
        assert watch["reason"] == "eno-bpf: SynAckWithoutEno", watch
        assert int(r["bytes_down_tls_handshake"]) == 0
    # Plain TCP on the wire: no Init messages, no frames - the watch receives what plain HTTP's
    # watch receives (the response and its headers; ACK counts vary by a few packets).
    plain = statistics.median(int(r["bytes_down_total"]) for r in cell(rows, "http", "phone"))
    fell = statistics.median(int(r["bytes_down_total"]) for r in cell(rows, "tcpcrypt", "phone"))
    assert abs(fell - plain) <= 3 * 66 + 0.005 * plain, (plain, fell)


def test_daemon_cpu_is_measured(runs):
    rows, _ = runs
    cpu = [float(r["tcpcrypt_cpu_s"]) for r in cell(rows, "tcpcrypt", "ap")]
    # Two X25519s and 100 KB of AES-GCM through two proxies: milliseconds. The guest's kernel
    # accounts CPU time in 10 ms ticks (UML's HZ is 100), so a run reads 0 or 10 ms here.
    assert all(0 <= c <= 0.05 for c in cpu), cpu


def test_a_cbr_stream_over_tcpcrypt_keeps_its_one_way_delay_and_rate(tmp_path):
    """The stream workload with `tcpcrypt: true`: encrypted end to end on the direct path; each
    message still arrives one link delay (+ serialisation and the daemons' few hundred us) after
    it was sent, and the CBR rate is delivered."""
    (tmp_path / "exp.yaml").write_text(f"""
name: tcpcrypt-stream
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 10Mbit, delay: {int(ONE_WAY * 1000)}ms}}]
repetitions: 1
workload: {{kind: stream, client: watch, server: server, pattern: cbr, rate: 1Mbit, direction: down,
           duration: 4s}}
matrix:
  tcpcrypt: [false, true]
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with (tmp_path / "r" / "tcpcrypt-stream" / "latest" / "runs.csv").open() as f:
        rows = {r["tcpcrypt"]: r for r in csv.DictReader(f)}
    crypt, plain = rows["True"], rows["False"]
    assert crypt["status"] == "ok" and crypt["tcpcrypt_encrypted"] == "1", crypt
    # 1000-byte messages + 20 bytes of frame: serialisation of one segment at 10 Mbit/s ~0.85 ms.
    for r in (plain, crypt):
        owd = float(r["down_owd_median_s"])
        assert ONE_WAY <= owd <= ONE_WAY + 0.004, (r["tcpcrypt"], owd)
        assert 0.95e6 <= float(r["down_goodput_bps"]) <= 1.05e6, r["down_goodput_bps"]
    assert float(crypt["down_owd_median_s"]) - float(plain["down_owd_median_s"]) <= 0.002


def test_a_node_that_requires_encryption_resets_the_fallback(tmp_path):
    """`tcpcrypt: require` on the watch (tcpcryptd --require-encryption all): the direct path is
    encrypted as before; through the splitting phone, whose proxy answers the watch's SYN without
    TCP-ENO, the watch's daemon resets the connection instead of sending the request in clear -
    curl sees a reset and the run fails, where an opportunistic watch falls back (above)."""
    (tmp_path / "topo.yaml").write_text(f"""
nodes:
  watch: {{role: wearable, tcpcrypt: require}}
  phone: {{role: phone}}
  ap: {{role: ap}}
  server: {{role: server}}
links:
  - {{between: [watch, ap], delay: {int(ONE_WAY * 500)}ms}}
  - {{between: [ap, server], delay: {int(ONE_WAY * 500)}ms}}
  - {{between: [watch, phone], delay: 5ms}}
  - {{between: [phone, ap], delay: 5ms}}
""")
    (tmp_path / "exp.yaml").write_text("""
name: tcpcrypt-require
topology: topo.yaml
repetitions: 1
workload: {kind: http-get, client: watch, server: server, size: 20000, protocol: tcpcrypt}
matrix:
  path: [ap, phone]
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    latest = tmp_path / "r" / "tcpcrypt-require" / "latest"
    assert (latest / "runs.csv").exists(), res.stdout + res.stderr
    with (latest / "runs.csv").open() as f:
        rows = {r["path"]: r for r in csv.DictReader(f)}
    records = (latest / "series" / "tcpcrypt.csv")
    assert rows["ap"]["status"] == "ok" and rows["ap"]["tcpcrypt_encrypted"] == "1", \
        (rows["ap"], records.read_text() if records.exists() else "no series/tcpcrypt.csv")
    assert rows["phone"]["status"] == "failed", rows["phone"]
    assert "reset" in rows["phone"]["error"].lower(), rows["phone"]["error"]
