"""Stream agent: sends and receives timestamped message streams (CBR, bulk, small messages) over
TCP, one per node, and records every message's one-way delay.

All emulated nodes share one kernel clock, so a message's one-way delay is exact: the sender
writes CLOCK_REALTIME just before handing the message to its socket, the receiver reads the
clock right after the read that completed the message (what an app sees: delivery to the app).

Wire format of a message (`MESSAGE_HEADER`, network byte order) followed by padding to its size:
    magic u16 'WL' | flags u16 | stream u32 | seq u32 | send_ns u64        (20 bytes)

Modes:
  serve --port P     listen; each connection begins with the client's `spec` (4-byte length,
                     JSON); the server then plays the other role: it sends when the client
                     receives, or receives and records when the client sends.
  client             one JSON request per stdin line: {"streams": [spec, ...]}; runs them all at
                     once, answers one JSON line {"streams": [result, ...]} when all have ended.
A spec: {"stream": int, "server": ip, "port": int, "client_role": "recv"|"send", "pattern":
"cbr"|"bulk"|"messages", "rate_bps": int|null, "message_size": int, "interval_s": float|null,
"duration_s": float|null, "bytes": int|null, "out": path (records of the receiving side)}.
Records: one CSV line per message: `seq,send_ns,recv_ns,size`.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from typing import Any

MESSAGE_HEADER = struct.Struct("!HHIIQ")
MAGIC = 0x574C  # "WL"
MIN_MESSAGE = MESSAGE_HEADER.size
CHUNK = 1 << 16
LIVE_FLUSH_S = 0.2


def send_stream(sock: socket.socket, spec: dict[str, Any]) -> dict[str, Any]:
    """Send messages per the spec's pattern: cbr (message_size every message_size*8/rate s),
    messages (message_size every interval_s), bulk (back to back). Ends after duration_s or bytes."""
    size = max(MIN_MESSAGE, int(spec["message_size"]))
    pad = b"\0" * (size - MIN_MESSAGE)
    if spec["pattern"] == "cbr":
        interval = size * 8 / spec["rate_bps"]
    elif spec["pattern"] == "messages":
        interval = float(spec["interval_s"])
    else:
        interval = 0.0
    total_bytes = spec.get("bytes")
    duration = spec.get("duration_s")
    start = time.monotonic()
    sent = seq = 0
    while True:
        if interval:
            # The schedule's offset decides the end, not (start + offset) - start: that loses
            # start's low bits when the sum crosses a power of two (a guest's clock 7.9 s after
            # boot gave 0.9999999999999991 for 1 s, and a 1 s message run sent a second message).
            offset = seq * interval
            due = start + offset
            now = time.monotonic()
            if duration is not None and offset >= duration:
                break
            if due > now:
                time.sleep(due - now)  # absolute schedule: a late message does not delay the next
        elif duration is not None and time.monotonic() - start >= duration:
            break
        if total_bytes is not None and sent >= total_bytes:
            break
        sock.sendall(MESSAGE_HEADER.pack(MAGIC, 0, spec["stream"], seq, time.time_ns()) + pad)
        sent += size
        seq += 1
    sock.shutdown(socket.SHUT_WR)
    return {"sent_messages": seq, "sent_bytes": sent, "send_s": time.monotonic() - start}


def receive_stream(sock: socket.socket, spec: dict[str, Any]) -> dict[str, Any]:
    """Read messages until EOF; write `seq,send_ns,recv_ns,size` per message to spec["out"]."""
    with open(spec["out"], "w", buffering=1 << 20) as out:
        out.write("seq,send_ns,recv_ns,size\n")
        return _receive_into(sock, spec, out)


def _receive_into(sock: socket.socket, spec: dict[str, Any], out) -> dict[str, Any]:
    size = max(MIN_MESSAGE, int(spec["message_size"]))
    buf = bytearray()
    received = messages = 0
    first_ns = last_ns = None
    flushed = time.monotonic()
    while True:
        chunk = sock.recv(CHUNK)
        now = time.time_ns()
        if not chunk:
            break
        if time.monotonic() - flushed > LIVE_FLUSH_S:   # a live view reads the file as it grows
            out.flush()
            flushed = time.monotonic()
        first_ns = first_ns or now
        last_ns = now
        received += len(chunk)
        buf += chunk
        while len(buf) >= size:
            magic, _, _, seq, send_ns = MESSAGE_HEADER.unpack_from(buf)
            if magic != MAGIC:
                raise ValueError(f"stream {spec['stream']}: lost message framing at message {messages}")
            out.write(f"{seq},{send_ns},{now},{size}\n")
            messages += 1
            del buf[:size]
    return {"received_messages": messages, "received_bytes": received, "first_recv_ns": first_ns,
            "last_recv_ns": last_ns}


def _play(sock: socket.socket, spec: dict[str, Any], role: str) -> dict[str, Any]:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return send_stream(sock, spec) if role == "send" else receive_stream(sock, spec)


IPPROTO_MPTCP = 262


def _mptcp_available() -> bool:
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP).close()
        return True
    except OSError:
        return False


def _connect(spec: dict[str, Any], timeout: float) -> socket.socket:
    """TCP, or MPTCP when the spec asks (an MPTCP connection starts as one subflow; the
    kernel's path manager adds more, e.g. when the watch's WiFi comes up)."""
    if not spec.get("mptcp"):
        return socket.create_connection((spec["server"], spec["port"]), timeout=timeout)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    sock.settimeout(timeout)
    try:
        sock.connect((spec["server"], spec["port"]))
    except OSError:
        sock.close()
        raise
    return sock


def serve(port: int) -> None:
    # An MPTCP listener where the kernel has MPTCP: it accepts plain TCP too.
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP if _mptcp_available() else 0)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("0.0.0.0", port))
    lst.listen(64)
    print(json.dumps({"ready": True}), flush=True)

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                spec = _read_spec(conn)
                _play(conn, spec, "send" if spec["client_role"] == "recv" else "recv")
            except (ConnectionError, OSError, ValueError):
                pass

    while True:
        conn, _ = lst.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = sock.recv(n, socket.MSG_WAITALL)
    if len(data) != n:
        raise ValueError("the connection ended inside the stream spec")
    return data


def _read_spec(sock: socket.socket) -> dict[str, Any]:
    """The client's spec: a 4-byte length, then JSON (read exactly, so no stream byte is lost)."""
    (n,) = struct.unpack("!I", _read_exactly(sock, 4))
    return json.loads(_read_exactly(sock, n))


def client_reconnecting(spec: dict[str, Any]) -> dict[str, Any]:
    """A receiving app that notices silence and reconnects (seed 003 section 6, P4): after
    `silence_s` without data it drops the connection and connects again, attempting every
    `retry_s` (each attempt waits at most that long), until `duration_s` is over. The server
    starts a fresh stream on each connection; the records of all connections go to one file."""
    rc = spec["reconnect"]
    t0 = time.time_ns()
    end = time.monotonic() + float(spec["duration_s"])
    connections = attempts = messages = received = 0
    errors: list[str] = []   # the first few failed connects: when and why (a run's diagnosis)
    with open(spec["out"], "w", buffering=1) as out:
        out.write("seq,send_ns,recv_ns,size\n")
        while time.monotonic() < end:
            attempt = time.monotonic()
            attempts += 1
            try:
                sock = _connect(spec, rc["retry_s"])
            except OSError as e:
                if len(errors) < 3:
                    errors.append(f"{time.monotonic() - (end - float(spec['duration_s'])):.2f} s: {type(e).__name__}: {e}")
                time.sleep(max(0.0, min(end, attempt + rc["retry_s"]) - time.monotonic()))
                continue
            connections += 1
            with sock:
                sub = {**spec, "duration_s": max(0.1, end - time.monotonic())}
                sub.pop("reconnect")
                body = json.dumps(sub).encode()
                try:
                    sock.sendall(struct.pack("!I", len(body)) + body)
                    sock.settimeout(rc["silence_s"])
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    r = _receive_into(sock, spec, out)
                    messages += r["received_messages"]
                    received += r["received_bytes"]
                except (OSError, ValueError):
                    pass   # silence or a dead connection: the app reconnects at once
    return {"stream": spec["stream"], "ok": True, "start_ns": t0, "received_messages": messages,
            "received_bytes": received, "connections": connections, "attempts": attempts,
            "connect_errors": errors}


def client_stream(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("reconnect"):
        return client_reconnecting(spec)
    t0 = time.time_ns()
    try:
        sock = _connect(spec, 30)
        sock.settimeout(None)
        with sock:
            body = json.dumps(spec).encode()
            sock.sendall(struct.pack("!I", len(body)) + body)
            result = _play(sock, spec, spec["client_role"])
            if spec["client_role"] == "send":
                # The server closes once its records are on disk: only then is the run over.
                while sock.recv(CHUNK):
                    pass
        return {"stream": spec["stream"], "ok": True, "start_ns": t0, **result}
    except (OSError, ValueError) as e:
        return {"stream": spec["stream"], "ok": False, "error": f"{type(e).__name__}: {e}", "start_ns": t0}


def client() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        streams = json.loads(line)["streams"]
        results: list[dict[str, Any]] = [{}] * len(streams)

        def run(i: int, spec: dict[str, Any]) -> None:
            results[i] = client_stream(spec)

        threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"streams": results}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[3]) if sys.argv[2:3] == ["--port"] else 5001)
    else:
        client()
