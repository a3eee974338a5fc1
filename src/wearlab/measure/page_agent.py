"""The client's page agent: a long-lived process in the client's namespace that loads one page per
request as a browser would, with libcurl's multi interface (pycurl), and answers with each
object's timing and connection.

How it behaves like a browser (and where it does not):

- An object is requested as soon as the object it depends on has arrived and that object's
  compute time has passed (the browser parsing the HTML, running the script). Compute is a wait
  on this process's clock: the page's time (the calibration machine's) x `compute_factor` (the
  client's device's general CPU factor; 1 without a device). The network keeps running meanwhile.
- HTTP/1.1: at most `connections_per_origin` persistent connections per origin
  (CURLMOPT_MAX_HOST_CONNECTIONS; libcurl queues the rest until a connection is free), no
  pipelining (CURLMOPT_PIPELINING = CURLPIPE_NOTHING), as Chromium's pool.
- HTTP/2: one multiplexed connection per origin (CURLPIPE_MULTIPLEX, CURLOPT_PIPEWAIT: a request
  waits for the connection being set up instead of opening another); over plain http it is h2c
  with prior knowledge, as no browser does (browsers speak HTTP/2 only over TLS).
- HTTP/3: QUIC only (CURL_HTTP_VERSION_3ONLY), multiplexed as HTTP/2; no Alt-Svc discovery (a
  browser's first visit would start over TCP), no fallback.
- Names resolve through a static map (CURLOPT_RESOLVE, origin host -> server address): no DNS
  lookups on the emulated path.
- TLS session resumption only with `resumption` (a CURLSH share holding the load's TLS sessions,
  CURL_LOCK_DATA_SSL_SESSION, so a ticket one connection got is offered by the next connection to
  that origin; libcurl takes a TLS 1.3 ticket out of the cache when it offers it, as browsers do:
  tickets are single-use, RFC 8446 C.4). Connections opened at once, before any ticket arrived or
  while the one ticket is in use, pay full handshakes - a browser's too. Without it, each handle's
  session cache is off: every connection a full handshake. No 0-RTT; no HTTP cache; no connection
  coalescing across origins (libcurl never coalesces).

Protocol: one JSON object per line on stdin (`load`'s keywords), one per line on stdout (its
result). Times are seconds from the first request's start on this process's monotonic clock.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pycurl

from wearlab.measure.agent_loop import serve

HTTP_VERSIONS = {
    ("1.1", "http"): pycurl.CURL_HTTP_VERSION_1_1,
    ("1.1", "https"): pycurl.CURL_HTTP_VERSION_1_1,
    ("2", "http"): pycurl.CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE,
    ("2", "https"): pycurl.CURL_HTTP_VERSION_2TLS,
    ("3", "https"): pycurl.CURL_HTTP_VERSION_3ONLY,
}
# CURLINFO_HTTP_VERSION's answers
_SEEN_VERSION = {pycurl.CURL_HTTP_VERSION_1_0: "1.0", pycurl.CURL_HTTP_VERSION_1_1: "1.1",
                 pycurl.CURL_HTTP_VERSION_2_0: "2", pycurl.CURL_HTTP_VERSION_3: "3"}


def load(objects: list[dict[str, Any]], *, http_version: str, protocol: str, connections_per_origin: int = 6,
         resolve: list[str] = (), cacert: str | None = None, groups: str | None = None,
         compute_factor: float = 1.0, resumption: bool = False, timeout_s: float = 60.0) -> dict[str, Any]:
    """Load one page. `objects`: in page order, each {url, origin, parent (index or None),
    compute_s}; the first is the root. `groups`: the TLS key-share groups offered;
    `compute_factor`: the device's slowness on compute; `resumption`: keep TLS sessions across
    the load's connections. Returns {objects: [...], error} with, per object, its start, first
    byte and end (s from the root's start), body bytes, status, HTTP version, connection
    (libcurl's id, local address and port, its connect and TLS-done times) and the connections
    its transfer opened."""
    share = None
    if resumption and protocol == "https":
        share = pycurl.CurlShare()
        share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX if http_version in ("2", "3") else pycurl.PIPE_NOTHING)
    per_origin = 1 if http_version in ("2", "3") else connections_per_origin
    multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, per_origin)
    # The connection cache keeps every connection the page opens (libcurl's default: 4 x handles).
    origins = {o["origin"] for o in objects}
    multi.setopt(pycurl.M_MAXCONNECTS, per_origin * len(origins) + 1)
    version = HTTP_VERSIONS[(http_version, protocol)]
    results: list[dict[str, Any]] = [{} for _ in objects]
    children: dict[int | None, list[int]] = {}
    for i, o in enumerate(objects):
        children.setdefault(o.get("parent"), []).append(i)
    ready: list[tuple[float, int]] = [(0.0, 0)]     # (when it may be requested, object index)
    handles: dict[Any, int] = {}
    error = ""
    t0 = time.monotonic()
    deadline = t0 + timeout_s

    def now() -> float:
        return time.monotonic() - t0

    def start(i: int) -> None:
        o = objects[i]
        c = pycurl.Curl()
        received = [0]

        def sink(chunk: bytes, received=received) -> None:
            received[0] += len(chunk)

        c.setopt(pycurl.URL, o["url"])
        c.setopt(pycurl.WRITEFUNCTION, sink)
        c.setopt(pycurl.HTTP_VERSION, version)
        c.setopt(pycurl.NOSIGNAL, 1)
        c.setopt(pycurl.TIMEOUT_MS, max(1, int((deadline - time.monotonic()) * 1000)))
        if http_version in ("2", "3"):
            c.setopt(pycurl.PIPEWAIT, 1)
        if resolve:
            c.setopt(pycurl.RESOLVE, list(resolve))
        if protocol == "https":
            if share is not None:
                c.setopt(pycurl.SHARE, share)
            else:
                c.setopt(pycurl.SSL_SESSIONID_CACHE, 0)   # no resumption: every connection a full handshake
            c.setopt(pycurl.SSLVERSION, pycurl.SSLVERSION_TLSv1_3 | pycurl.SSLVERSION_MAX_TLSv1_3)
            if groups:
                c.setopt(pycurl.SSL_EC_CURVES, groups)
            if cacert:
                c.setopt(pycurl.CAINFO, cacert)
                c.setopt(pycurl.CAPATH, "")
        c.received = received  # type: ignore[attr-defined]
        results[i] = {"start_s": now()}
        handles[c] = i
        multi.add_handle(c)

    def finish(c, errno: int, errmsg: str) -> None:
        nonlocal error
        i = handles.pop(c)
        r = results[i]
        end = now()
        r.update(end_s=end, ttfb_s=r["start_s"] + c.getinfo(pycurl.STARTTRANSFER_TIME),
                 curl_total_s=c.getinfo(pycurl.TOTAL_TIME),
                 bytes=c.received[0], http_code=c.getinfo(pycurl.RESPONSE_CODE),  # type: ignore[attr-defined]
                 http_version=_SEEN_VERSION.get(c.getinfo(pycurl.INFO_HTTP_VERSION), "?"),
                 conn_id=c.getinfo(pycurl.CONN_ID), local_ip=c.getinfo(pycurl.LOCAL_IP),
                 local_port=c.getinfo(pycurl.LOCAL_PORT), num_connects=c.getinfo(pycurl.NUM_CONNECTS),
                 connect_s=c.getinfo(pycurl.CONNECT_TIME), appconnect_s=c.getinfo(pycurl.APPCONNECT_TIME),
                 pretransfer_s=c.getinfo(pycurl.PRETRANSFER_TIME),
                 errno=errno, errormsg=errmsg)
        multi.remove_handle(c)
        c.close()
        if errno or r["http_code"] != 200:
            error = error or f"{objects[i]['url']}: " + (errmsg or f"HTTP status {r['http_code']}")
            return
        for k in children.get(i, []):
            ready.append((end + float(objects[i].get("compute_s") or 0.0) * compute_factor, k))

    while (ready or handles) and not error:
        t = now()
        for due, i in sorted(ready):
            if due <= t:
                ready.remove((due, i))
                start(i)
        while True:
            ret, _ = multi.perform()
            if ret != pycurl.E_CALL_MULTI_PERFORM:
                break
        while True:
            _, ok, failed = multi.info_read()
            for c in ok:
                finish(c, 0, "")
            for c, errno, errmsg in failed:
                finish(c, errno, errmsg)
            if not ok and not failed:
                break
        if time.monotonic() > deadline:
            error = error or f"the page did not load in {timeout_s:.0f} s"
            break
        if not handles and not ready:
            break
        wait = min([due - now() for due, _ in ready] + [1.0])
        if handles:
            # libcurl's own timeout first: data it already holds (TLS records, HTTP/2 frames, QUIC
            # packets) makes no socket readable, and its timers (QUIC's ACKs, retransmissions) run.
            curl_wait = multi.timeout()
            if curl_wait >= 0:
                wait = min(wait, curl_wait / 1000)
            if wait > 0:
                multi.select(min(wait, 1.0))
        elif wait > 0:
            time.sleep(wait)   # only compute time remains: the browser is busy, the network idle
    for c in list(handles):
        multi.remove_handle(c)
        c.close()
    multi.close()
    if share is not None:
        share.close()
    return {"objects": results, "error": error}


def main() -> int:
    return serve(load, lambda reason: {"objects": [], "error": reason})


if __name__ == "__main__":
    sys.exit(main())
