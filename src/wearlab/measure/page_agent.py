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
- A session (`pages`): the pages one after another on one connection pool and TLS session
  cache (a browser's, `shared`), or on a fresh one per page (`per-page`).
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


class Pool:
    """A browser's connections and TLS sessions: a libcurl multi handle (its connection cache:
    connections persist from one transfer, and one page, to the next) and, with resumption, a
    CURLSH share of TLS sessions (CURL_LOCK_DATA_SSL_SESSION)."""

    def __init__(self, *, http_version: str, protocol: str, connections_per_origin: int, origins: int,
                 resumption: bool):
        self.share = None
        if resumption and protocol == "https":
            self.share = pycurl.CurlShare()
            self.share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_PIPELINING,
                          pycurl.PIPE_MULTIPLEX if http_version in ("2", "3") else pycurl.PIPE_NOTHING)
        per_origin = 1 if http_version in ("2", "3") else connections_per_origin
        self.multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, per_origin)
        # The connection cache keeps every connection opened (libcurl's default: 4 x handles).
        self.multi.setopt(pycurl.M_MAXCONNECTS, per_origin * origins + 1)

    def close(self) -> None:
        self.multi.close()
        if self.share is not None:
            self.share.close()


def handle_request(**req: Any) -> dict[str, Any]:
    """One request: a page (`objects`) or a session of pages (`pages`)."""
    return session(**req) if "pages" in req else load(**req)


def session(pages: list[list[dict[str, Any]]], *, pool: str = "shared", think_s: float = 0.0,
            timeout_s: float = 60.0, **kw: Any) -> dict[str, Any]:
    """Load pages one after another, each once the one before has ended and `think_s` passed: on
    one Pool (`shared`: connections and TLS sessions kept from page to page, as a browser) or a
    fresh one per page (`per-page`: as a fresh client process per page). Returns {objects: every
    page's, in order, each with its `page` index; pages: [{start_s, end_s}], error}, times in s
    from the first page's start."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    origins = len({o["origin"] for objs in pages for o in objs})
    shared = Pool(origins=origins, resumption=kw.get("resumption", False), http_version=kw["http_version"],
                  protocol=kw["protocol"], connections_per_origin=kw.get("connections_per_origin", 6)) \
        if pool == "shared" else None
    out: dict[str, Any] = {"objects": [], "pages": [], "error": ""}
    try:
        for n, objects in enumerate(pages):
            if n and think_s:
                time.sleep(think_s)
            start = time.monotonic() - t0
            got = load(objects, pool=shared, t0=t0, timeout_s=max(0.001, deadline - time.monotonic()), **kw)
            out["objects"] += [{**o, "page": n} for o in got["objects"]]
            ends = [o["end_s"] for o in got["objects"] if "end_s" in o]
            out["pages"].append({"start_s": start, "end_s": max(ends) if ends else None})
            if got["error"]:
                out["error"] = f"page {n + 1} of {len(pages)}: {got['error']}"
                break
    finally:
        if shared is not None:
            shared.close()
    return out


def load(objects: list[dict[str, Any]], *, http_version: str, protocol: str, connections_per_origin: int = 6,
         resolve: list[str] = (), cacert: str | None = None, groups: str | None = None,
         compute_factor: float = 1.0, resumption: bool = False, timeout_s: float = 60.0,
         pool: Pool | None = None, t0: float | None = None) -> dict[str, Any]:
    """Load one page. `objects`: in page order, each {url, origin, parent (index or None),
    compute_s}; the first is the root. `groups`: the TLS key-share groups offered;
    `compute_factor`: the device's slowness on compute; `resumption`: keep TLS sessions across
    the load's connections; `pool`: a session's connections and TLS sessions (default: the
    page's own, closed after it); `t0`: the clock's zero (default: now). Returns {objects: [...],
    error} with, per object, its start, first byte and end (s from t0), body bytes, status, HTTP
    version, connection (libcurl's id, local address and port, its connect and TLS-done times)
    and the connections its transfer opened."""
    own = pool is None
    if own:
        pool = Pool(http_version=http_version, protocol=protocol, connections_per_origin=connections_per_origin,
                    origins=len({o["origin"] for o in objects}), resumption=resumption)
    multi, share = pool.multi, pool.share
    version = HTTP_VERSIONS[(http_version, protocol)]
    results: list[dict[str, Any]] = [{} for _ in objects]
    children: dict[int | None, list[int]] = {}
    for i, o in enumerate(objects):
        children.setdefault(o.get("parent"), []).append(i)
    handles: dict[Any, int] = {}
    error = ""
    if t0 is None:
        t0 = time.monotonic()
    ready: list[tuple[float, int]] = [(time.monotonic() - t0, 0)]   # (when it may be requested, object index)
    deadline = time.monotonic() + timeout_s

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
    if own:
        pool.close()
    return {"objects": results, "error": error}


def main() -> int:
    return serve(handle_request, lambda reason: {"objects": [], "error": reason})


if __name__ == "__main__":
    sys.exit(main())
