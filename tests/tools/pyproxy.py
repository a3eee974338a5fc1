"""A user's own proxy for the `command` node kind in tests: `pyproxy.py LISTEN UPSTREAM [--delay MS]`
(host:port each). Relays both ways with half-close and reset, a thread per direction; --delay
adds that much latency to every chunk in both directions (an injected regression for
`wearlab compare`)."""

import argparse
import socket
import struct
import threading
import time


def pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
    try:
        while data := src.recv(65536):
            if delay:
                time.sleep(delay)
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)  # half-close end to end
    except OSError:
        # The peer reset (or we could not write): reset the other side too. SHUT_RD wakes the
        # thread reading it (a close alone would not), and with linger 0 the close sends a RST.
        try:
            dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            dst.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        dst.close()


def serve(client: socket.socket, upstream: tuple[str, int], delay: float) -> None:
    try:
        server = socket.create_connection(upstream)
    except OSError:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        return
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=pipe, args=(server, client, delay), daemon=True)
    t.start()
    pipe(client, server, delay)
    t.join()
    for s in (client, server):
        try:
            s.close()
        except OSError:
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("listen")
    ap.add_argument("upstream")
    ap.add_argument("--delay", type=float, default=0.0, help="ms per chunk")
    a = ap.parse_args()
    lhost, lport = a.listen.rsplit(":", 1)
    uhost, uport = a.upstream.rsplit(":", 1)
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((lhost, int(lport)))
    lst.listen(1024)
    while True:
        conn, _ = lst.accept()
        threading.Thread(target=serve, args=(conn, (uhost, int(uport)), a.delay / 1000), daemon=True).start()


main()
