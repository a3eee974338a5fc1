"""Repeat views (issue 23: "what a watch does when it opens an app the second time"), on the host:
the HTTP cache's semantics worked out by hand (RFC 9111: fresh -> no request, stale with an ETag
-> a conditional request answered 304, no-store -> fetched again), an object's `cache:` as data
(page files, HAR import), the plan-time refusal of a repeat view that cannot exist, and the page
agent against Caddy on loopback: a repeat view requests what the cache policy leaves, every
connection resumes, and HTTP/3 sends its first requests as 0-RTT - TLS over TCP cannot here
(Caddy 2.6's Go crypto/tls has no 0-RTT: its tickets forbid early data). ~5 s."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, need_tool, wearlab
from test_page_load_host import TOPOLOGY, errors, experiment, free_port

from wearlab.measure.http_cache import FETCH, FRESH, REVALIDATE, HttpCache, freshness_s
from wearlab.model.har import har_page_document
from wearlab.model.page import cache_control, load_page_file


# -- the cache's rules, by hand ---------------------------------------------------------------

def test_fresh_stale_and_no_store_decide_which_requests_a_repeat_view_makes():
    """Stored at t=0 from a first view's responses; needed again at t=5 s (a repeat view):
    - max-age=3600: 5 s old < 3600 s -> fresh: no request;
    - max-age=1: 5 s old > 1 s, has an ETag -> stale: a conditional request (If-None-Match);
    - no-cache: stored, stale at once (lifetime 0) -> conditional request;
    - no-store: never stored -> fetched again (an unconditional request);
    - max-age=1 without an ETag: stale, nothing to validate with -> fetched again;
    - a 404 is not stored either (only 200s are, here)."""
    cache = HttpCache()
    responses = {"/a": (200, "max-age=3600", '"a"'), "/b": (200, "max-age=1", '"b"'),
                 "/c": (200, "no-cache", '"c"'), "/d": (200, "no-store", '"d"'),
                 "/e": (200, "max-age=1", None), "/f": (404, "max-age=3600", '"f"')}
    for url, (status, cc, tag) in responses.items():
        headers = {"cache-control": cc} | ({"etag": tag} if tag else {})
        cache.store(url, status, headers, 1000, now=0.0)
    got = {url: cache.lookup(url, now=5.0)[0] for url in responses}
    assert got == {"/a": FRESH, "/b": REVALIDATE, "/c": REVALIDATE, "/d": FETCH, "/e": FETCH, "/f": FETCH}
    # just inside and just past a max-age: age < lifetime is fresh (RFC 9111 4.2)
    assert cache.lookup("/a", now=3599.9)[0] == FRESH and cache.lookup("/a", now=3600.0)[0] == REVALIDATE
    # a 304 freshens the stored entry (4.3.4): max-age=1 again from t=5, the body kept
    cache.store("/b", 304, {"cache-control": "max-age=1", "etag": '"b"'}, 0, now=5.0)
    action, entry = cache.lookup("/b", now=5.5)
    assert action == FRESH and entry.size == 1000
    # a 200 with no-store drops what was stored
    cache.store("/a", 200, {"cache-control": "no-store"}, 1000, now=6.0)
    assert cache.lookup("/a", now=6.0)[0] == FETCH


@pytest.mark.parametrize("header,lifetime", [
    ("max-age=60", 60.0), ("public, max-age=60", 60.0), ("no-cache", 0.0), ("no-store", None),
    ("no-store, max-age=60", None), ("", 0.0), (None, 0.0), ("max-age=soon", 0.0), ("Max-Age=5", 5.0)])
def test_a_responses_freshness_lifetime(header, lifetime):
    assert freshness_s(header) == lifetime


# -- cache: as data ---------------------------------------------------------------------------

def test_a_page_says_each_objects_cache_with_defaults_from_page_and_file(tmp_path):
    """The object's own, else its page's, else the file's, else no-store (what the servers sent
    before caching existed)."""
    (tmp_path / "p.yaml").write_text(
        "origins: [www]\ncache: 1h\npages:\n"
        "  a: {cache: no-cache, objects: [{path: /, size: 1KB}, {path: /x.js, size: 1KB, cache: 7d}]}\n"
        "  b: {objects: [{path: /, size: 1KB}, {path: /y.css, size: 1KB, cache: no-store}]}\n")
    f = load_page_file(tmp_path / "p.yaml")
    assert [o.cache for o in f.pages["a"].objects] == ["no-cache", "max-age=604800"]
    assert [o.cache for o in f.pages["b"].objects] == ["max-age=3600", "no-store"]
    (tmp_path / "q.yaml").write_text("origins: [www]\nobjects: [{path: /, size: 1KB}]\n")
    assert load_page_file(tmp_path / "q.yaml").page.root.cache == "no-store"
    assert [cache_control(v) for v in ("30s", 90, "max-age=5", "0s")] == ["max-age=30", "max-age=90", "max-age=5",
                                                                          "max-age=0"]


def test_har_import_reads_each_objects_cache_from_its_recorded_headers():
    def entry(path, headers):
        return {"startedDateTime": "2026-11-26T10:00:00.000Z", "time": 10,
                "request": {"method": "GET", "url": f"https://www.example.com{path}"},
                "response": {"status": 200, "bodySize": 1000, "content": {"size": 1000, "mimeType": "text/html"},
                             "headers": [{"name": k, "value": v} for k, v in headers.items()]}}
    har = {"log": {"entries": [entry("/", {"Cache-Control": "private, no-cache"}),
                               entry("/a.js", {"cache-control": "public, max-age=31536000, immutable"}),
                               entry("/b.js", {"Cache-Control": "no-store, max-age=60"}),
                               entry("/c.png", {"ETag": '"x"'}),
                               entry("/d.png", {})]}}
    objects = har_page_document(har, name="h").document["objects"]
    assert [o.get("cache") for o in objects] == ["no-cache", "365d", None, "no-cache", None]


def test_a_bad_cache_exits_2_at_its_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("origins: [www]\nobjects:\n  - {path: /, size: 1KB}\n"
                                       "  - {path: /a.js, size: 2KB, cache: forever}\n")
    exp = experiment(tmp_path, "{kind: page-load, client: watch, page: bad.yaml}")
    got = errors(wearlab("validate", str(exp)))
    assert any(e.startswith(f"error: {tmp_path / 'bad.yaml'}:4: objects[1].cache: ") and "max-age" in e
               for e in got), got


def test_a_repeat_view_of_a_per_page_session_is_refused_when_planned(tmp_path):
    """A per-page session is a fresh client per page (seed 002's curl): it keeps nothing, so it
    has no repeat view - exit 2 at the matrix value that asks for one."""
    (tmp_path / "s.yaml").write_text("origins: [www]\npages:\n  a: {objects: [{path: /a, size: 1KB}]}\n"
                                     "  b: {objects: [{path: /b, size: 1KB}]}\nsession: {pages: [a, b], pool: per-page}\n")
    exp = experiment(tmp_path, "{kind: page-load, client: watch, page: s.yaml}", "matrix:\n  view: [first, repeat]\n")
    line = exp.read_text().splitlines().index("  view: [first, repeat]") + 1
    got = errors(wearlab("validate", str(exp)))
    assert any(e.startswith(f"error: {exp}:{line}: matrix.view[1]: ") and "per-page" in e for e in got), got


def test_view_and_early_data_plan_as_cells(tmp_path):
    """early_data means something only with https and resumption on: elsewhere its cells collapse."""
    (tmp_path / "p.yaml").write_text("origins: [www]\nobjects: [{path: /, size: 1KB}]\n")
    exp = experiment(tmp_path, "{kind: page-load, client: watch, page: p.yaml}",
                     "matrix:\n  view: [first, repeat]\n  resumption: [off, on]\n  early_data: [off, on]\n")
    res = wearlab("plan", str(exp), "--json")
    assert res.returncode == 0, res.stderr
    cells = [(c["values"]["view"], c["values"]["resumption"], c["values"]["early_data"])
             for c in json.loads(res.stdout)["cells"]]
    assert cells == [("first", "off", ""), ("first", "on", "off"), ("first", "on", "on"),
                     ("repeat", "off", ""), ("repeat", "on", "off"), ("repeat", "on", "on")]


# -- the agent against Caddy on loopback ------------------------------------------------------

# A 2-origin page, one object per caching rule (www serves /, /app.css, /news.json; cdn /app.js,
# /logo.png), each its own size so each has its own ETag.
# (host, path, size, type, server time, cache control)
CACHED = (("www.test", "/", 10_000, "text/html", 0.0, "no-cache"),
          ("www.test", "/app.css", 11_000, "text/css", 0.0, "max-age=3600"),
          ("cdn.test", "/app.js", 12_000, "text/javascript", 0.0, "max-age=3600"),
          ("www.test", "/news.json", 13_000, "application/json", 0.0, "no-store"),
          ("cdn.test", "/logo.png", 14_000, "image/png", 0.0, "max-age=0"))
# The repeat view's requests, by hand: / no-cache -> 304; /app.css and /app.js fresh (3600 s) ->
# none; /news.json no-store -> 200 with its body; /logo.png max-age 0 -> stale -> 304.
REPEAT_SOURCES = ["revalidated", "cache", "cache", "network", "revalidated"]


@pytest.fixture(scope="module")
def cached_caddy(tmp_path_factory):
    from wearlab.model.needs import PageContent
    from wearlab.nodes.caddy import caddy_config, caddy_env
    from wearlab.nodes.certs import make_pki

    need_tool("caddy")
    d = tmp_path_factory.mktemp("caddy-cache")
    ca, certs = make_pki(d / "pki", "www.test", kinds=("ecdsa-p256",), also_names=("cdn.test",), ocsp=False)
    https = free_port()
    (d / "caddy.json").write_text(json.dumps(caddy_config(
        d, [PageContent("srv", CACHED)], certs["ecdsa-p256"].cert, certs["ecdsa-p256"].key,
        http_listen=[f"127.0.0.1:{free_port()}"], https_listen=f"127.0.0.1:{https}", seed=1)))
    log = (d / "caddy.out").open("w")
    caddy = subprocess.Popen(["caddy", "run", "--config", str(d / "caddy.json")], env=caddy_env(d),
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", https), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and caddy.poll() is None, (d / "caddy.out").read_text()
                time.sleep(0.05)
        yield https, ca
    finally:
        caddy.terminate()
        caddy.wait(timeout=10)
        log.close()


def two_views(https: int, ca, version: str, **kw) -> tuple[list[dict], list[dict]]:
    objects = [{"url": f"https://{h}:{https}{p}", "origin": h.split(".")[0], "parent": None if i == 0 else 0,
                "compute_s": 0.0} for i, (h, p, *_) in enumerate(CACHED)]
    base = {"objects": objects, "http_version": version, "protocol": "https", "cacert": str(ca), "timeout_s": 20,
            "resolve": [f"www.test:{https}:127.0.0.1", f"cdn.test:{https}:127.0.0.1"], "groups": "X25519", **kw}
    out = subprocess.run([sys.executable, "-m", "wearlab.measure.page_agent"], capture_output=True, text=True,
                         input=json.dumps(base | {"keep_state": True}) + "\n" + json.dumps(base | {"reuse_state": True})
                         + "\n", timeout=60, cwd=ROOT)
    first, repeat = (json.loads(line) for line in out.stdout.splitlines()[1:3])
    assert first["error"] == repeat["error"] == "", (first["error"], repeat["error"], out.stderr[-2000:])
    return first["objects"], repeat["objects"]


@pytest.mark.parametrize("version", ["1.1", "2", "3"])
def test_a_repeat_view_makes_only_the_requests_the_cache_policy_leaves_and_resumes(cached_caddy, version):
    """First view: every object fetched (200), 2 connections (HTTP/1.1: up to 3), the first to each
    origin a full handshake. Repeat view: REPEAT_SOURCES (3 requests of 5: two 304s with no body,
    one 200), every object's bytes delivered, and each connection it opens resumes (no
    Certificate: libcurl says UNDEF); the fresh objects use no connection, so cdn's one request
    (/logo.png) and www's two open at most 1 + 2."""
    https, ca = cached_caddy
    first, repeat = two_views(https, ca, version, resumption=True, early_data=True)
    assert [o["source"] for o in first] == ["network"] * 5 and {o["http_code"] for o in first} == {200}
    assert [o["bytes"] for o in first] == [o[2] for o in CACHED] == [o["received"] for o in first]
    assert [o["source"] for o in repeat] == REPEAT_SOURCES
    assert [o["bytes"] for o in repeat] == [o[2] for o in CACHED]                  # the page is whole
    assert [o["received"] for o in repeat] == [0, 0, 0, 13_000, 0]                # only no-store's body came
    assert [o["http_code"] for o in repeat if o["source"] != "cache"] == [304, 200, 304]
    # the first view's first connection to each origin is a full handshake (HTTP/1.1's second
    # connection to www may resume with the root connection's ticket: resumption within a load)
    assert first[0]["tls_resumed"] is False and first[2]["tls_resumed"] is False
    if version != "1.1":
        assert all(o["tls_resumed"] is False for o in first if o["num_connects"])
    opened = [o for o in repeat if o["num_connects"]]
    assert 2 <= len(opened) <= 3 and all(o["tls_resumed"] is True for o in opened), opened
    if version == "3":
        # quic-go accepts 0-RTT: each connection's first request went early (a GET's headers,
        # QPACK-encoded: tens to a few hundred bytes), none rejected
        assert all(20 <= o["earlydata_sent"] <= 600 for o in opened), opened
    else:
        # Go's crypto/tls issues tickets without early_data: libcurl never sends any over TCP
        assert all(o["earlydata_sent"] == 0 for o in repeat), repeat


def test_without_resumption_a_repeat_view_keeps_its_cache_but_pays_full_handshakes(cached_caddy):
    https, ca = cached_caddy
    _, repeat = two_views(https, ca, "2", resumption=False)
    assert [o["source"] for o in repeat] == REPEAT_SOURCES
    assert all(o["tls_resumed"] is None and o["earlydata_sent"] == 0 for o in repeat)


# -- 0-RTT in the capture ---------------------------------------------------------------------

def long_packet(kind: int, body: int, token: bytes | None = None) -> bytes:
    """A QUIC v1 long header packet (RFC 9000 17.2): type `kind`, 8-byte connection IDs, a 2-byte
    Length varint, `body` bytes of packet number and payload."""
    head = bytes([0xC0 | kind << 4 | 0x03]) + (1).to_bytes(4, "big") + b"\x08" + b"d" * 8 + b"\x08" + b"s" * 8
    if kind == 0:
        head += bytes([len(token or b"")]) + (token or b"")
    return head + (0x4000 | body).to_bytes(2, "big") + b"\x00" * body


def test_the_capture_counts_0rtt_packets_alone_or_coalesced_after_an_initial():
    from test_page_load_host import udp_frame
    from wearlab.measure.tcp import DLT_EN10MB, QUIC_0RTT, QUIC_HANDSHAKE, QUIC_INITIAL, quic_long_types, udp_payload

    coalesced = long_packet(0, 500, token=b"t" * 5) + long_packet(1, 300)
    assert quic_long_types(udp_payload(udp_frame(coalesced), DLT_EN10MB)) == [QUIC_INITIAL, QUIC_0RTT]
    assert quic_long_types(long_packet(1, 900)) == [QUIC_0RTT]
    assert quic_long_types(long_packet(0, 100) + long_packet(2, 100) + b"\x40short") == [QUIC_INITIAL, QUIC_HANDSHAKE]
    # cut by the snaplen inside the Initial: the 0-RTT packet after it is not seen (hence the
    # whole datagrams a repeat view over HTTP/3 captures)
    assert quic_long_types(coalesced[:300]) == [QUIC_INITIAL]


def test_a_shared_sessions_later_page_and_its_repeat_view_use_the_cache(cached_caddy):
    """A session of two pages on a shared pool, page 2 naming /app.css again: in the first view
    page 2 takes it from the cache (fresh for 1 h); in the repeat view page 1's / is revalidated
    (304) and /app.css is fresh in both pages, page 2's /news.json (no-store) fetched again."""
    https, ca = cached_caddy

    def obj(path: str, parent: int | None) -> dict:
        return {"url": f"https://www.test:{https}{path}", "origin": "www", "parent": parent, "compute_s": 0.0}

    req = {"pages": [[obj("/", None), obj("/app.css", 0)], [obj("/news.json", None), obj("/app.css", 0)]],
           "pool": "shared", "http_version": "2", "protocol": "https", "cacert": str(ca), "timeout_s": 20,
           "resolve": [f"www.test:{https}:127.0.0.1"], "resumption": True}
    out = subprocess.run([sys.executable, "-m", "wearlab.measure.page_agent"], capture_output=True, text=True,
                         input=json.dumps(req | {"keep_state": True}) + "\n" + json.dumps(req | {"reuse_state": True})
                         + "\n", timeout=60, cwd=ROOT)
    first, repeat = (json.loads(line) for line in out.stdout.splitlines()[1:3])
    assert first["error"] == repeat["error"] == "", out.stderr[-2000:]
    assert [o["source"] for o in first["objects"]] == ["network", "network", "network", "cache"]
    assert [o["source"] for o in repeat["objects"]] == ["revalidated", "cache", "network", "cache"]
