"""A repeat view of a 2-origin page over TLS 1.3 (issue 23: "what a watch does when it opens an app
the second time"), in the UML guest on its virtual clock (as test_page_load_clock: every network
delay exact, CPU free): every connection resumes (no Certificate: libcurl says so, and over TCP the
capture's ServerHello carries pre_shared_key), only the requests the cache policy leaves are made,
HTTP/3 sends them as 0-RTT, and the load takes the round trips physics says - fewer than the first
view's. Boots its own guest (host step): ~15 s."""

from __future__ import annotations

import csv
import json
import os
import subprocess

from conftest import ROOT, WEARLAB
from test_page_load import RATE, RTT, TOPOLOGY, critical_path_s
from test_page_load_clock import VIRTUAL_CLOCK

# test_page_load's CHAIN (www / -> cdn /app.js -> www /data.json -> cdn /img.jpg, each depending on
# the one before), one object per caching rule.
CACHED_CHAIN = """name: chain-cached
origins: [www, cdn]
objects:
  - {path: /, size: 8KB, cache: no-cache}
  - {path: /app.js, origin: cdn, size: 8KB, depends_on: /, cache: 1h}
  - {path: /data.json, size: 4KB, depends_on: /app.js, cache: no-store}
  - {path: /img.jpg, origin: cdn, size: 8KB, depends_on: /data.json, cache: 0s}
"""


def wire_s(body: int) -> float:
    """A response's serialisation at the link's rate (critical_path_s's: headers and framing
    <= 400 B, 66 B per 1448 B segment)."""
    return (body + 400 + 66 * -(-(body + 400) // 1448)) * 8 / RATE


def repeat_view_s(http_version: str) -> float:
    """The repeat view's critical path, by hand. The cache leaves: / (no-cache: a conditional
    request, 304, no body), /app.js none (fresh for 1 h: the chain goes on at once), /data.json
    (no-store: 200, 4 KB), /img.jpg (max-age 0: 304). Connections were closed between the views,
    so www and cdn each need a new one:
    - HTTP/2 over TLS 1.3, resumed: TCP's round trip, then the resumed handshake's (a PSK still
      takes a round trip: Go's server sends no early_data in its tickets, so no 0-RTT over TCP),
      then the request's: 3 per new connection; /data.json on www's: 1. 7 round trips.
    - HTTP/3 with 0-RTT: the request leaves with the client's Initial, the response comes with the
      server's first flight (a resumed flight has no Certificate, far below the anti-amplification
      limit): 1 round trip per new connection, 1 for /data.json. 3 round trips.
    Transfers: two 304s (headers only) and 4 KB."""
    per_new = {"2": 3, "3": 1}[http_version]
    return (2 * per_new + 1) * RTT + 2 * wire_s(0) + wire_s(4000)


def test_a_repeat_view_resumes_every_connection_and_makes_only_the_requests_the_cache_leaves(tmp_path):
    (tmp_path / "chain.yaml").write_text(CACHED_CHAIN)
    exp = tmp_path / "views.yaml"
    exp.write_text(f"""
name: chain-views
topology: {TOPOLOGY}
repetitions: 2
seed: 3
workload: {{kind: page-load, client: watch, protocol: https, page: chain.yaml, view: repeat, resumption: on}}
matrix:
  http_version: [2, 3]
""")
    out = tmp_path / "results"
    res = subprocess.run([*WEARLAB, "run", str(exp), "--runtime", "uml", "--out", str(out)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, env={**os.environ, "WEARLAB_UML_ARGS": VIRTUAL_CLOCK})
    assert res.returncode == 0, res.stdout + res.stderr
    latest = out / "chain-views" / "latest"
    meta = json.dumps(json.loads((latest / "metadata.json").read_text()))
    assert VIRTUAL_CLOCK in meta and "Go 1.19's crypto/tls) has no TLS 1.3 0-RTT" in meta
    with (latest / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for r in rows:
        version = r["http_version"]
        assert r["view"] == "repeat"
        # the requests the cache policy leaves: 3 of 4 objects, two of them answered 304
        assert (int(r["requests"]), int(r["cache_hits"]), int(r["not_modified"])) == (3, 1, 2), r
        assert int(r["body_bytes"]) == 4000, r                      # only /data.json's body came again
        # a new connection per origin, each resumed: libcurl's word ...
        assert int(r["connections_opened"]) == int(r["resumed_handshakes"]) == 2, r
        assert int(r["full_handshakes"]) == 0, r
        if version == "2":
            # ... and the capture's: each ServerHello accepts the PSK
            assert (int(r["tls_resumed_handshakes"]), int(r["tls_full_handshakes"])) == (2, 0), r
            assert int(r["early_data_connections"]) == 0, r         # Go's TLS: no 0-RTT over TCP
        else:
            assert int(r["quic_connections"]) == 2 and int(r["early_data_connections"]) == 2, r
            assert int(r["early_data_rejected"]) == 0 and int(r["quic_0rtt_packets"]) >= 2, r
        t, physics = float(r["page_load_s"]), repeat_view_s(version)
        assert physics - 0.001 <= t <= physics + max(0.005, 0.05 * physics), (version, r["run"], t, physics)
        # fewer round trips than the first view, whose own physics bounds the untimed first load
        first = float(r["first_view_s"])
        fewest, most = critical_path_s(version, "https"), critical_path_s(version, "https", window_wait=True)
        assert fewest - 0.001 <= first <= most + max(0.005, 0.05 * most), (version, r["run"], first, fewest)
        assert t + RTT <= first, (version, t, first)
