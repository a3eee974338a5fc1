"""Real captures on loopback: nginx (self-signed certificate, 100 KB file) + tcpdump + curl.

Only 127.0.0.1 is contacted. nginx and tcpdump are started once per module and always killed.

A capture is only evidence when it is complete, and these tests used to fail now and then on a
busy machine (2 in 30 beside `stress-ng --cpu 2`) for two reasons, both found in the failing
pcaps:
- the capture lost a packet the client acknowledged: tcpdump in immediate mode uses a TPACKET_V2
  ring of fixed-size frames sized for lo's 64 KB MTU, and lo shows every packet twice (out and
  in), so the default 2 MB ring held about 15 packets - a few ms without the CPU and the kernel
  dropped the rest. The ring is now 64 MB, tcpdump's own drop count must be 0, and every byte the
  client acknowledged must be in the capture (`assert_no_holes`);
- TCP retransmitted a segment (a tail-loss probe: on lo the RTT is microseconds, so a receiver
  that waits a few ms for the CPU looks like a loss): the bytes are really on the wire twice, so
  the bounds count retransmitted frames as what they are instead of failing on them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import need_tool

from wearlab.measure.curl import curl_argv, parse_write_out
from wearlab.measure.pcap import PcapReader
from wearlab.measure.phases import classify_packets, split_phases
from wearlab.measure.tcp import FIN, RST, connection_packets
from wearlab.measure.tls_records import detect_tls_version

FILE_SIZE = 100 * 1024
RING_KB = 65536   # tcpdump -B: room for ~500 of lo's 64 KB frames (module doc)

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to capture with tcpdump"),
]


@pytest.fixture(autouse=True, scope="module")
def _tools():
    for tool in ("tcpdump", "nginx", "openssl", "curl"):
        need_tool(tool)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


NGINX_CONF = """
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    default_type application/octet-stream;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    root {d}/www;
    server {{ listen 127.0.0.1:{http}; }}
    server {{
        listen 127.0.0.1:{https} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;
        ssl_ciphers DEFAULT:@SECLEVEL=0;
    }}
}}
"""


class Lab:
    def __init__(self, d: Path):
        self.dir = d
        self.http_port = free_port()
        self.https_port = free_port()
        self.pcap = d / "cap.pcap"
        self.reader = PcapReader(self.pcap)
        self.packets: list = []

    def collect(self) -> None:
        self.packets += self.reader.read_new()

    def curl(self, url: str, **kw) -> dict:
        p = subprocess.run(curl_argv(url, timeout_s=20, **kw), capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return parse_write_out(p.stdout)

    def connection(self, client: tuple[str, int]) -> list:
        """The connection's packets once both sides have closed (FIN/RST), read live."""
        deadline = time.monotonic() + 10
        while True:
            self.collect()
            conn = connection_packets(self.packets, client)
            closed = {p.direction for p in conn if p.flags & (FIN | RST)}
            if closed == {"up", "down"} or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        time.sleep(0.2)  # the last ACK
        self.collect()
        return connection_packets(self.packets, client)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure-lab")
    (d / "www").mkdir()
    (d / "www" / "f.bin").write_bytes(os.urandom(FILE_SIZE))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True, timeout=60)
    lab = Lab(d)
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=d, http=lab.http_port, https=lab.https_port))
    procs: list[subprocess.Popen] = []
    stderr_lines: list[str] = []
    try:
        nginx = subprocess.Popen(["nginx", "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(nginx)
        deadline = time.monotonic() + 10
        for port in (lab.http_port, lab.https_port):
            while True:
                if nginx.poll() is not None:
                    pytest.fail(f"nginx exited: {nginx.stderr.read().decode()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail("nginx did not start listening")
                    time.sleep(0.05)

        flt = f"tcp and host 127.0.0.1 and (port {lab.http_port} or port {lab.https_port})"
        tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "-n", "-U", "--immediate-mode", "-B", str(RING_KB),
                                    "-w", str(lab.pcap), flt],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(tcpdump)
        ready = threading.Event()

        def drain():
            for line in tcpdump.stderr:
                stderr_lines.append(line)
                if "listening on" in line:
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(10):
            pytest.fail(f"tcpdump not ready: {''.join(stderr_lines)}")
        yield lab
    finally:
        for p in reversed(procs):
            stop(p)
        lab.reader.close()
    # tcpdump prints its kernel's counters when it stops (the drain thread has its stderr).
    deadline = time.monotonic() + 5
    while not any("dropped by kernel" in l for l in stderr_lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    dropped = [l for l in stderr_lines if "dropped by kernel" in l]
    assert dropped and dropped[0].split()[0] == "0", f"tcpdump's ring overflowed: {dropped or stderr_lines}"


def assert_no_holes(conn) -> None:
    """Every byte the client acknowledged is in the capture: the server's payload covers
    [1, highest ack) without a gap (sequence numbers relative to the SYN-ACK's)."""
    isn = next(p.seq for p in conn if p.direction == "down" and p.flags & 0x02)
    acked = max((p.ack - isn) & 0xFFFFFFFF for p in conn if p.direction == "up" and p.flags & 0x10)
    have, covered = sorted(((p.seq - isn) & 0xFFFFFFFF, p.payload_len) for p in conn
                           if p.direction == "down" and p.payload_len), 1
    for start, length in have:
        assert start <= covered, f"the capture lacks server bytes {covered}..{start} the client acknowledged"
        covered = max(covered, start + length)
    # the FIN takes one sequence number beyond the payload
    assert covered >= acked - 1, f"the capture lacks server bytes {covered}..{acked - 1} the client acknowledged"


def retransmitted_down(conn) -> int:
    """Frame bytes of server segments that repeat payload already sent (retransmissions)."""
    seen, extra = set(), 0
    for p in conn:
        if p.direction == "down" and p.payload_len:
            if p.seq in seen:
                extra += p.frame_len
            seen.add(p.seq)
    return extra


def check_common(conn, pb, curl_result):
    assert conn, "no packets captured for the curl connection"
    assert_no_holes(conn)
    # TCP handshake: SYN, SYN-ACK, ACK
    assert pb.up_packets["tcp_handshake"] == 2 and pb.down_packets["tcp_handshake"] == 1
    assert pb.up["tcp_handshake"] > 0 and pb.down["tcp_handshake"] > 0
    # every frame is counted once
    assert pb.total_up() == sum(p.frame_len for p in conn if p.direction == "up")
    assert pb.total_down() == sum(p.frame_len for p in conn if p.direction == "down")
    # the response body (plus headers/TLS overhead) is in the data phase, not elsewhere
    assert FILE_SIZE <= pb.down["data"] <= FILE_SIZE * 1.1 + 2000 + retransmitted_down(conn)
    assert pb.up["data"] > 0
    assert pb.up_packets["teardown"] >= 1 and pb.down_packets["teardown"] >= 1
    assert curl_result["http_code"] == 200 and curl_result["size_download"] == FILE_SIZE
    assert curl_result["num_connects"] == 1 and curl_result["exitcode"] == 0
    t = curl_result
    assert 0 <= t["time_namelookup"] <= t["time_connect"] <= t["time_pretransfer"]
    assert t["time_pretransfer"] <= t["time_starttransfer"] <= t["time_total"]


@pytest.mark.parametrize("version", ["1.1", "1.2", "1.3", None])
def test_https_capture(lab, version):
    url = f"https://localhost:{lab.https_port}/f.bin"
    r = lab.curl(url, resolve=f"localhost:{lab.https_port}:127.0.0.1", tls_version=version,
                 cacert=str(lab.dir / "cert.pem"))
    assert r["ssl_verify_result"] == 0  # the certificate was really verified
    assert r["time_connect"] <= r["time_appconnect"] <= r["time_starttransfer"] <= r["time_total"]
    assert r["time_appconnect"] > 0
    conn = lab.connection((r["local_ip"], r["local_port"]))
    negotiated = detect_tls_version(conn)
    assert negotiated == (version or "1.3")
    pb = split_phases(conn, tls_version=version or "auto")
    check_common(conn, pb, r)
    tls_bytes = pb.up["tls_handshake"] + pb.down["tls_handshake"]
    assert 1000 <= tls_bytes <= 10000, pb
    assert pb.down["tls_handshake"] > pb.up["tls_handshake"]  # the certificate flows down
    phases = classify_packets(conn, tls_version=negotiated)
    # phases are contiguous and in order (handshake packets first, teardown last)
    order = ["tcp_handshake", "tls_handshake", "data", "teardown"]
    ranks = [order.index(ph) for ph in phases]
    assert ranks == sorted(ranks), phases


def test_http_capture(lab):
    url = f"http://127.0.0.1:{lab.http_port}/f.bin"
    r = lab.curl(url)
    assert r["time_appconnect"] == 0.0
    conn = lab.connection((r["local_ip"], r["local_port"]))
    assert detect_tls_version(conn) is None
    pb = split_phases(conn, tls_version=None)
    check_common(conn, pb, r)
    assert pb.up["tls_handshake"] == pb.down["tls_handshake"] == 0
    assert split_phases(conn, tls_version="auto") == pb
    # the request is one small packet: data up is the GET plus the client's ACKs
    assert pb.up_packets["data"] >= 1
