"""The origin's application, a stand-in: what makes an object's `server_time` real on a `caddy`
node (nodes.caddy). Run as `python -m wearlab.nodes.origin_app --listen 127.0.0.1:PORT` in the
server's namespace.

A page whose object has a server time is one an application renders before its first byte (seed
002: Laravel under Apache on a Raspberry Pi, ~0.4-1 s a page). A web engineer's deployment of that
is a front server proxying to an application server, so that is what runs: Caddy's `reverse_proxy`
sends the request here with the object's server time in a header, this waits that long on a timer
(asyncio: the process sleeps in epoll, costing the guest's one CPU nothing while it waits, however
many requests wait at once, as an application server's many workers would) and answers 204, and
Caddy then serves the object's generated body itself (`handle_response`, the X-Accel-Redirect
pattern). So the bytes on the wire are exactly those of an object without a server time - the same
handler, headers and framing over HTTP/1.1, HTTP/2 and HTTP/3, plain, TLS or tcpcrypt - only later.

Rejected: a delay directive in Caddy (2.6 has none; third-party modules are not in Debian);
netem delay on the server's link (it would delay every packet, handshakes included, not one
response's first byte); the wait in Caddy's config language alone (no sleeping handler exists).

Standard library only (it starts in the guest, where every import costs system calls). Anything
it cannot read is answered 400, which Caddy passes to the client as the object's response (the
load then fails on its size, loudly), never a silent zero wait.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

# The request header Caddy sets (nodes.caddy) to the object's server time, in seconds.
SERVER_TIME_HEADER = "Wearlab-Server-Time"
_HEADER = SERVER_TIME_HEADER.lower().encode()
_DONE = b"HTTP/1.1 204 No Content\r\n\r\n"
_BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def server_time(head: bytes) -> float | None:
    """The wait a request's head asks for (seconds), None when it asks for none readable."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == _HEADER:
            try:
                wait = float(value.strip())
            except ValueError:
                return None
            return wait if 0 <= wait < 3600 else None
    return None


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # One persistent HTTP/1.1 connection from Caddy's pool: requests in turn (Caddy sends GETs
    # without bodies and opens more connections for concurrent requests).
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            wait = server_time(head)
            if wait is None:
                writer.write(_BAD)
                await writer.drain()
                return
            await asyncio.sleep(wait)
            writer.write(_DONE)
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(host: str, port: int) -> None:
    server = await asyncio.start_server(_serve, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT (the node's loopback)")
    a = ap.parse_args()
    h, _, p = a.listen.rpartition(":")
    asyncio.run(main(h, int(p)))
