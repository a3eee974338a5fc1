"""The phone's TCP relay (the seeds' CPROXY mode, plain for now): it accepts the wearable's
connection and opens its own to the server, splitting the TCP connection in two as Wear OS's
phone proxy does. Run as `python -m wearlab.nodes.relay LISTEN_PORT=HOST:PORT ...`; prints
`ready` once every listener is up."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # keep half-closes end to end
    except (ConnectionError, OSError):
        writer.transport.abort()


def _nodelay(w: asyncio.StreamWriter) -> None:
    # A relay forwards what it has at once; Nagle would hold small segments (TLS handshake
    # messages) for the peer's delayed ACK and add tens of ms the real proxy does not.
    sock = w.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _serve_one(target: tuple[str, int], cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
    try:
        sr, sw = await asyncio.open_connection(*target)
    except OSError:
        cw.transport.abort()
        return
    _nodelay(cw)
    _nodelay(sw)
    await asyncio.gather(_pipe(cr, sw), _pipe(sr, cw))
    for w in (cw, sw):
        w.close()


async def main(specs: list[str]) -> None:
    servers = []
    for spec in specs:
        port, target = spec.split("=", 1)
        host, tport = target.rsplit(":", 1)
        servers.append(await asyncio.start_server(
            lambda r, w, t=(host, int(tport)): _serve_one(t, r, w), host="0.0.0.0", port=int(port),
            reuse_address=True))
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="+")
    for opt in ("--app-buffer", "--events", "--sndbuf", "--rcvbuf"):  # accepted, not yet used
        ap.add_argument(opt)
    asyncio.run(main(ap.parse_args().specs))
