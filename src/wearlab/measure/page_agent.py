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
  session cache is off: every connection a full handshake. No connection coalescing across
  origins (libcurl never coalesces).
- An HTTP cache (measure.http_cache, RFC 9111 as a browser applies it): an object stored fresh
  is used without a request, a stale one with an ETag is revalidated (If-None-Match; a 304 brings
  no body), anything else fetched. Within one page it never hits (a page names each URL once);
  it matters for a session's later pages and for a repeat view.
- A repeat view (WebPageTest's): a request with `keep_state` loads the page (a first view, which
  the workload does not time) and keeps what a browser keeps when its app is closed and opened
  again - its TLS sessions (the share, with `resumption`) and its HTTP cache - but not its
  connections (the multi handle is closed: every connection torn down); the next request, with
  `reuse_state`, loads with them. With `early_data` (CURLSSLOPT_EARLYDATA) a resumed connection
  sends its first request as TLS 1.3 early data / QUIC 0-RTT where the ticket allows it;
  CURLINFO_EARLYDATA_SENT_T says how many bytes went early (negative: the server rejected them).
  Whether a connection resumed is libcurl's own word (its verbose text, only with a share): its
  handshake received no Certificate (over QUIC, whose messages it does not trace: the peer's
  certificate type is UNDEF).
- TLS 1.2 (`tls_version`): libcurl on its own never offers a TLS 1.2 session ticket (it sets
  SSL_OP_NO_TICKET: its ClientHello has no SessionTicket extension) and resumes TLS 1.2 by
  session ID only, which Caddy's Go TLS never issues (its ServerHello's session_id is empty):
  against Caddy every such connection is a full handshake. With `tls12_tickets` (the workload asks
  for it with resumption on) the agent, started with wearlab's ticket hook preloaded
  (measure.tls_tickets), lets libcurl offer tickets for that load, as a browser's TLS 1.2 does: a
  connection opened after an origin's first full handshake resumes its session in the abbreviated
  handshake (RFC 5246 7.3), and a 1.2 session may be resumed by several connections (connections
  opened at once, before any handshake to the origin ended, still pay full ones).

Protocol: one JSON object per line on stdin (`load`'s keywords), one per line on stdout (its
result). Times are seconds from the first request's start on this process's monotonic clock.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pycurl

from wearlab.measure.agent_loop import serve
from wearlab.measure.fetch_agent import SSL_VERSIONS
from wearlab.measure import tls_tickets
from wearlab.measure.http_cache import FRESH, REVALIDATE, HttpCache

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


class ClientState:
    """What a browser keeps when its app is closed and opened again: its TLS sessions (with
    resumption, a CURLSH share of them, CURL_LOCK_DATA_SSL_SESSION) and its HTTP cache."""

    def __init__(self, *, tls_sessions: bool):
        self.share = None
        if tls_sessions:
            self.share = pycurl.CurlShare()
            self.share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
        self.cache = HttpCache()

    def close(self) -> None:
        if self.share is not None:
            self.share.close()
            self.share = None


# The client state a `keep_state` request left for the next request (a repeat view).
_kept: ClientState | None = None


class Pool:
    """A browser's connections: a libcurl multi handle (its connection cache: connections persist
    from one transfer, and one page, to the next), over a ClientState (TLS sessions, HTTP cache)."""

    def __init__(self, *, http_version: str, connections_per_origin: int, origins: int, state: ClientState):
        self.state = state
        self.share = state.share
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_PIPELINING,
                          pycurl.PIPE_MULTIPLEX if http_version in ("2", "3") else pycurl.PIPE_NOTHING)
        per_origin = 1 if http_version in ("2", "3") else connections_per_origin
        self.multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, per_origin)
        # The connection cache keeps every connection opened (libcurl's default: 4 x handles).
        self.multi.setopt(pycurl.M_MAXCONNECTS, per_origin * origins + 1)

    def close(self) -> None:
        self.multi.close()   # closes every connection it holds (a new app launch has none)


def handle_request(*, keep_state: bool = False, reuse_state: bool = False, **req: Any) -> dict[str, Any]:
    """One request: a page (`objects`) or a session of pages (`pages`). `keep_state`: keep the
    client's TLS sessions and HTTP cache afterwards (its connections closed) for the next request;
    `reuse_state`: load with what the previous request kept (a repeat view)."""
    global _kept
    if _kept is not None and not reuse_state:
        _kept.close()   # a first view whose repeat view never came (its run failed between them)
    state, _kept = (_kept if reuse_state else None), None
    if reuse_state and state is None:
        raise RuntimeError("a repeat view needs its first view's client state, and there is none")
    if state is None:
        state = ClientState(tls_sessions=bool(req.get("resumption")) and req.get("protocol") == "https")
    out: dict[str, Any] = {}
    try:
        out = session(state=state, **req) if "pages" in req else load(state=state, **req)
    finally:
        if keep_state and not out.get("error") and out:
            _kept = state
        else:
            state.close()
    return out


def session(pages: list[list[dict[str, Any]]], *, pool: str = "shared", think_s: float = 0.0,
            timeout_s: float = 60.0, state: ClientState | None = None, **kw: Any) -> dict[str, Any]:
    """Load pages one after another, each once the one before has ended and `think_s` passed: on
    one Pool (`shared`: connections and TLS sessions kept from page to page, as a browser) or a
    fresh one per page (`per-page`: as a fresh client process per page). Returns {objects: every
    page's, in order, each with its `page` index; pages: [{start_s, end_s}], error}, times in s
    from the first page's start."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    origins = len({o["origin"] for objs in pages for o in objs})
    tls_sessions = bool(kw.get("resumption")) and kw["protocol"] == "https"
    state = state or ClientState(tls_sessions=tls_sessions)
    shared = Pool(origins=origins, state=state, http_version=kw["http_version"],
                  connections_per_origin=kw.get("connections_per_origin", 6)) if pool == "shared" else None
    out: dict[str, Any] = {"objects": [], "pages": [], "error": ""}
    try:
        for n, objects in enumerate(pages):
            if n and think_s:
                time.sleep(think_s)
            start = time.monotonic() - t0
            # per-page: a fresh client per page (its own TLS sessions and cache, as seed 002's curl)
            fresh = None if shared is not None else ClientState(tls_sessions=tls_sessions)
            try:
                got = load(objects, pool=shared, state=fresh, t0=t0,
                           timeout_s=max(0.001, deadline - time.monotonic()), **kw)
            finally:
                if fresh is not None:
                    fresh.close()
            out["objects"] += [{**o, "page": n} for o in got["objects"]]
            if "tls12_tickets" in got:
                out["tls12_tickets"] = out.get("tls12_tickets", 0) + got["tls12_tickets"]
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
         resolve: list[str] = (), cacert: str | None = None, groups: str | None = None, tls_version: str = "1.3",
         compute_factor: float = 1.0, resumption: bool = False, early_data: bool = False, tls12_tickets: bool = False,
         timeout_s: float = 60.0, pool: Pool | None = None, state: ClientState | None = None,
         t0: float | None = None) -> dict[str, Any]:
    """Load one page. `objects`: in page order, each {url, origin, parent (index or None),
    compute_s}; the first is the root. `groups`: the TLS key-share groups offered; `tls_version`:
    the one TLS version offered (1.2 or 1.3; HTTP/3 is QUIC, always 1.3);
    `compute_factor`: the device's slowness on compute; `resumption`: keep TLS sessions across
    the load's connections; `early_data`: send a resumed connection's first request early
    (TLS 1.3 early data, QUIC 0-RTT) where the ticket allows; `tls12_tickets`: offer TLS 1.2
    session tickets (the ticket hook, which must be preloaded), answered with `tls12_tickets`,
    how many TLS contexts the hook let offer one; `pool`: a session's connections
    (default: the page's own, closed after it) and `state` its TLS sessions and HTTP cache
    (default: the pool's, else fresh); `t0`: the clock's zero (default: now). Returns {objects: [...],
    error} with, per object, its start, first byte and end (s from t0), body bytes, status, HTTP
    version, connection (libcurl's id, local address and port, its connect and TLS-done times)
    and the connections its transfer opened."""
    # Every load sets the hook (on only where asked), so no load inherits another's ClientHello.
    tickets_from = tls_tickets.switch(tls12_tickets)
    own = pool is None
    own_state = own and state is None
    if own:
        state = state or ClientState(tls_sessions=resumption and protocol == "https")
        pool = Pool(http_version=http_version, connections_per_origin=connections_per_origin,
                    origins=len({o["origin"] for o in objects}), state=state)
    multi, share, cache = pool.multi, pool.share, pool.state.cache
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
        action, entry = cache.lookup(o["url"], time.monotonic())
        if action == FRESH:
            # from the cache, no request: the object is there at once (its compute still follows)
            t = now()
            results[i] = {"start_s": t, "ttfb_s": t, "end_s": t, "curl_total_s": 0.0, "bytes": entry.size,
                          "received": 0, "http_code": 200, "source": "cache", "http_version": None, "conn_id": -1,
                          "local_ip": "", "local_port": 0, "num_connects": 0, "connect_s": 0.0, "appconnect_s": 0.0,
                          "pretransfer_s": 0.0, "earlydata_sent": 0, "tls_resumed": None, "tls_said": None,
                          "errno": 0, "errormsg": ""}
            for k in children.get(i, []):
                ready.append((t + float(o.get("compute_s") or 0.0) * compute_factor, k))
            return
        c = pycurl.Curl()
        received = [0]
        headers: dict[str, str] = {}
        tls: dict[str, Any] = {}

        def sink(chunk: bytes, received=received) -> None:
            received[0] += len(chunk)

        def header(line: bytes, headers=headers) -> None:
            text = line.decode("latin-1").strip()
            if text.startswith("HTTP/"):
                headers.clear()   # a new response (after a 1xx)
            name, colon, value = text.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()

        def said(kind: int, text: bytes, tls=tls) -> None:
            # libcurl's words on its TLS handshake (CURLINFO_TEXT): over TCP each handshake message
            # as it comes ("TLSv1.2 (IN), TLS handshake, Certificate (11):"), then "SSL connection
            # using TLSv1.3 / cipher / group / the peer certificate's key type". A resumed handshake
            # (TLS 1.3's with a ticket; TLS 1.2's abbreviated one, RFC 5246 7.3) receives no
            # Certificate. QUIC's messages are not traced: there the key type says it, UNDEF when
            # no Certificate came (no sign over TCP: a resumed 1.2 session keeps the peer's
            # certificate and names its key).
            if kind != 0:
                return
            if b"(IN), TLS handshake, " in text:
                tls["traced"] = True
                tls["certificate"] = tls.get("certificate") or b"Certificate (11)" in text
            elif text.startswith(b"SSL connection using"):
                tls["resumed"] = (not tls.get("certificate")) if tls.get("traced") else text.rstrip().endswith(b"UNDEF")
                tls["said"] = text.decode("latin-1").removeprefix("SSL connection using").strip()

        c.setopt(pycurl.URL, o["url"])
        c.setopt(pycurl.WRITEFUNCTION, sink)
        c.setopt(pycurl.HEADERFUNCTION, header)
        if action == REVALIDATE:
            c.setopt(pycurl.HTTPHEADER, [f"If-None-Match: {entry.etag}"])
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
                c.setopt(pycurl.VERBOSE, 1)
                c.setopt(pycurl.DEBUGFUNCTION, said)
                if early_data:
                    c.setopt(pycurl.SSL_OPTIONS, pycurl.SSLOPT_EARLYDATA)
            else:
                c.setopt(pycurl.SSL_SESSIONID_CACHE, 0)   # no resumption: every connection a full handshake
            lowest, highest = SSL_VERSIONS[tls_version]
            c.setopt(pycurl.SSLVERSION, lowest | highest)
            if groups:
                c.setopt(pycurl.SSL_EC_CURVES, groups)
            if cacert:
                c.setopt(pycurl.CAINFO, cacert)
                c.setopt(pycurl.CAPATH, "")
        c.received, c.headers, c.tls, c.entry = received, headers, tls, entry  # type: ignore[attr-defined]
        results[i] = {"start_s": now(), "source": "revalidated" if action == REVALIDATE else "network"}
        handles[c] = i
        multi.add_handle(c)

    def finish(c, errno: int, errmsg: str) -> None:
        nonlocal error
        i = handles.pop(c)
        r = results[i]
        end = now()
        r.update(end_s=end, ttfb_s=r["start_s"] + c.getinfo(pycurl.STARTTRANSFER_TIME),
                 curl_total_s=c.getinfo(pycurl.TOTAL_TIME),
                 received=c.received[0], http_code=c.getinfo(pycurl.RESPONSE_CODE),  # type: ignore[attr-defined]
                 http_version=_SEEN_VERSION.get(c.getinfo(pycurl.INFO_HTTP_VERSION), "?"),
                 conn_id=c.getinfo(pycurl.CONN_ID), local_ip=c.getinfo(pycurl.LOCAL_IP),
                 local_port=c.getinfo(pycurl.LOCAL_PORT), num_connects=c.getinfo(pycurl.NUM_CONNECTS),
                 connect_s=c.getinfo(pycurl.CONNECT_TIME), appconnect_s=c.getinfo(pycurl.APPCONNECT_TIME),
                 pretransfer_s=c.getinfo(pycurl.PRETRANSFER_TIME),
                 earlydata_sent=c.getinfo(pycurl.EARLYDATA_SENT_T), tls_resumed=c.tls.get("resumed"),
                 tls_said=c.tls.get("said"),
                 errno=errno, errormsg=errmsg)
        revalidated = r["source"] == "revalidated" and r["http_code"] == 304
        if r["source"] == "revalidated" and r["http_code"] == 200:
            r["source"] = "network"   # the validator no longer matched: a full response
        r["bytes"] = c.entry.size if revalidated else r["received"]  # type: ignore[attr-defined]
        if not errno:
            cache.store(objects[i]["url"], r["http_code"], c.headers, r["received"], time.monotonic())  # type: ignore[attr-defined]
        multi.remove_handle(c)
        c.close()
        if errno or not (r["http_code"] == 200 or revalidated):
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
        if own_state:
            state.close()
    tickets = tls_tickets.switch(False) - tickets_from
    return {"objects": results, "error": error, **({"tls12_tickets": tickets} if tls12_tickets else {})}


def main() -> int:
    return serve(handle_request, lambda reason: {"objects": [], "error": reason})


if __name__ == "__main__":
    sys.exit(main())
