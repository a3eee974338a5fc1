"""TLS 1.2 session tickets for libcurl, as a browser offers them: wearlab's ticket hook
(src/tlstickets/, built by `make setup`), an LD_PRELOAD library that clears SSL_OP_NO_TICKET where
libcurl sets it.

Why: libcurl never offers a TLS 1.2 ticket (it sets SSL_OP_NO_TICKET: its ClientHello has no
SessionTicket extension, RFC 5077 3.2) and resumes 1.2 by session ID only, which Caddy's Go TLS
never issues - so without the hook no TLS 1.2 connection of a page load ever resumes, while a
browser's (Chromium's BoringSSL offers a ticket in every 1.2 ClientHello) would. With it, libcurl's
OpenSSL offers the SessionTicket extension, Caddy sends a NewSessionTicket in each full handshake,
and a later connection to that origin resumes it in TLS 1.2's abbreviated handshake (RFC 5246 7.3:
no key exchange, no certificate). A TLS 1.2 session may be resumed more than once (unlike a TLS
1.3 ticket, RFC 8446 C.4), so connections opened at once after one full handshake all resume.

The page workload preloads the hook into its agent when a cell loads over TLS 1.2 with resumption
on (`preload`); the agent switches it on for such loads only (`switch`), so every other load's
ClientHello is libcurl's own.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from wearlab.errors import EnvironmentProblem

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ROOT / "build" / "tlstickets" / "libwearlab-tls12-tickets.so"
FACTS = ("TLS 1.2 with resumption on: libcurl sets SSL_OP_NO_TICKET (no SessionTicket extension, RFC 5077) and "
         "Caddy's Go TLS issues no session IDs, so libcurl alone never resumes 1.2; wearlab's ticket hook "
         "(LD_PRELOAD build/tlstickets/libwearlab-tls12-tickets.so, src/tlstickets) clears SSL_OP_NO_TICKET in the "
         "page agent's SSL_CTX_set_options for these loads only, so its ClientHello offers a ticket as a browser's "
         "TLS 1.2 does; later connections to an origin resume in the abbreviated handshake (RFC 5246 7.3). Other "
         "loads' ClientHellos are libcurl's own")


def preload(env: dict[str, str]) -> dict[str, str]:
    """`env` with the hook added to LD_PRELOAD."""
    if not LIBRARY.is_file():
        raise EnvironmentProblem(f"a page load over TLS 1.2 with resumption on needs wearlab's TLS 1.2 ticket hook at "
                                 f"{LIBRARY}: build it with `make tlstickets` (make setup does)")
    preloaded = [p for p in env.get("LD_PRELOAD", "").split() if p]
    return {**env, "LD_PRELOAD": " ".join([*preloaded, str(LIBRARY)])}


def _hook():
    """The hook's functions in this process (it was preloaded), or None."""
    process = ctypes.CDLL(None)
    try:
        switch, cleared = process.wearlab_tls12_tickets, process.wearlab_tls12_tickets_cleared
    except AttributeError:
        return None
    switch.argtypes, switch.restype = [ctypes.c_int], ctypes.c_int
    cleared.argtypes, cleared.restype = [], ctypes.c_uint64
    return switch, cleared


def switch(on: bool) -> int:
    """Turn the hook on or off in this process; returns how many SSL contexts it has let offer
    tickets so far. Turning it on where it was not preloaded is an error; off is a no-op then."""
    hook = _hook()
    if hook is None:
        if on:
            raise RuntimeError("TLS 1.2 tickets asked for, but this process runs without wearlab's ticket hook "
                               f"(LD_PRELOAD {LIBRARY})")
        return 0
    hook[0](1 if on else 0)
    return hook[1]()
