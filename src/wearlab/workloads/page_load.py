"""The `page-load` workload (issue 23): the client loads a page - its objects from several origins,
each object requested once the object it depends on has arrived and that object's compute time
has passed - over HTTP/1.1, HTTP/2 or HTTP/3, as a browser would (wearlab.measure.page_agent:
libcurl's multi interface, the browser's rules and where it departs from them).

Origins and server nodes: each origin of a page is served by a server node of the topology; by
default the node named as the origin (a page with origins `www` and `cdn` runs on a topology with
server nodes `www` and `cdn`), or as the workload's `servers:` maps them (`{www: server1}`; several
origins may share a node, each still with its own host name). The mapping is Mahimahi's
ReplayShell's (one server per recorded origin); the user's topology says where each server sits,
so each origin's path and delay are the topology's. The servers' kind must serve pages (`caddy`).

Names resolve through a static map, origin host -> its server's address (libcurl's
CURLOPT_RESOLVE): no DNS lookups on the emulated path; metadata says so.

Per run: the page load time (the root's request to the last object's end), the root's time to
first byte, connections opened (libcurl's count, and TCP SYNs and QUIC Initials in the client's
capture), the load's bytes on the wire (every packet of its connections, teardown included) and
its TLS handshakes, full or resumed (the ServerHello's pre_shared_key, in clear), and a series row
per object (start, first byte, end, connection, origin, bytes).

The client's device (`device:` of the client node): the agent runs with the devicecpu library
(nodes.devicecpu), so libcurl's TLS and QUIC cryptography (OpenSSL, inside pycurl's wheel) takes the
device's time and each client handshake its platform cost (full or resumed); each object's compute
time is the page's (the calibration machine's) x the device's general CPU factor; energy_j is the
device's energy model over the load's overlapping connection set-ups, handshakes and transfers.

`tls_version` (https): 1.3 (the default) or 1.2, pinned by the client (min = max); the servers, one
per node for the whole experiment, accept from the lowest to the highest version the cells pin.
TLS 1.2 is ECDHE signed with the server's certificate. HTTP/3 is QUIC, always 1.3: tls_version
1.2 with http_version 3 is refused at plan time.

`resumption: on` (https): the load's connections share their TLS sessions (the page agent says how
and why the first connections to an origin still pay full handshakes). TLS 1.2: libcurl on its own
offers no TLS 1.2 session ticket (SSL_OP_NO_TICKET) and Caddy's Go TLS issues no session IDs, so it
would never resume; the agent is started with wearlab's ticket hook (measure.tls_tickets) and
offers tickets as a browser's TLS 1.2 does, so a connection opened after an origin's first full
handshake resumes in the abbreviated handshake (no key exchange, no certificate); metadata's
`tls12_tickets` says so. `device_kx_s` (https, a client with a device): the device's time in the
load's public-key operations - key pairs, agreements, signature and certificate-chain
verifications - which a TLS 1.3 resumption still partly computes (its (EC)DHE) and a TLS 1.2
abbreviated handshake does not at all.

`protocol: tcpcrypt` (HTTP/1.1 and HTTP/2; HTTP/3 is QUIC, not TCP, and refused at plan time):
plain HTTP to port 8080, encrypted by tcpcryptd at the client and at each origin's server
(nodes.tcpcrypt). Each load is a first view: the client's daemon is restarted before it, its
session cache empty, with `resumption` as the cell says (RFC 8548 3.5: a later connection to the
same server host resumes the next unused session secret of an earlier one's chain, no key exchange;
connections opened at once each propose their own, ss[1], ss[2], ..., which the server's daemon
accepts 8 ahead: MANY's www pool pays 1/6 of its key-exchange time). Results from
the daemons' close records (connections, encrypted end to end, fresh or resumed, the device's
key-exchange time `device_kx_s`) and the capture (Init1 opens a fresh key exchange's stream).
Through the phone (`path: phone`) what the phone does with the tcpcrypt port decides (metadata
`tcpcrypt.paths`, from the hop's kind: NodeKindDecl.splits): a relay that splits it (`intercept:`
with 8080) answers the client's SYN without TCP-ENO, so every connection falls back to plain TCP
(tcpcrypt_encrypted 0, the reason in series tcpcrypt); with the client node's `tcpcrypt: require`
(as http-get's cells spell it) its daemon resets them before relaying a byte and the run fails,
its error naming the daemon's reason and the splitting hop - at run time, as http-get's, so a
matrix over paths keeps its other cells; a phone that routes the port carries tcpcrypt end to end.

`view: repeat` (WebPageTest's repeat view): the same client loads the page once untimed and again,
measured, its connections closed in between (an app launched a second time) but its HTTP cache kept
and, with `resumption: on`, its TLS sessions and tcpcryptd's cached secrets; `early_data` (on by
default where it applies) lets a resumed connection send its first request as TLS 1.3 early data
or QUIC 0-RTT - which only HTTP/3 gets here (Caddy's Go TLS has no 0-RTT; EARLY_DATA_FACTS). Each
object's cacheability is the page's (`cache:`), served by Caddy as Cache-Control and ETag, and
applied by the agent's HTTP cache (measure.http_cache).

Not yet (issue 23): TLS 1.3 resumption for connections opened at once (one ticket each, offered
once; tcpcrypt's reaches 1/6 of the key-exchange time for a 6-connection HTTP/1.1 origin opened at
once), and TLS 1.3's 2/6 at all: a TLS 1.3 resumption still computes the key exchange (psk_dhe_ke,
the only mode of Go's server and of browsers). TLS 1.2's abbreviated handshake reaches it.

An object's `server_time` (the origin's time before its first byte: an application rendering it)
is the server's: its Caddy proxies the request to an application stand-in on the server's
loopback that answers after that time (nodes.origin_app says why), then serves the body as any
other object; objects without one take Caddy's static route alone. Metadata says so.

Over the chunked multipath transport (the client a wearable with `multipath:` or an interface
policy by `chunked`): the plan's servers (`servers()`: every origin's node) each run a server agent,
the client's TCP to each is REDIRECTed to its watch agent and rides to the agent on its own origin's
node (nodes.multipath_endpoints); the load's flows are read off the client's loopback, where its
connections end (ClientCapture.flows' `redirected_to`: the replies name each origin's server), and
its energy is each radio's for the time its path carried (RunEnergy.over_transport) - TRANSPORT_FACTS.
HTTP/3 (UDP) and tcpcrypt cells are refused there at plan time (nodes.wearable).

A page file with a `session:` is loaded whole per run: its pages one after another on one
connection pool and TLS session cache (`pool: shared`) or a fresh one per page (`per-page`), with
`think` between them; page_load_s is then the sum of its pages' load times and series `pages`
has each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from wearlab.errors import InputError, Problem
from wearlab.measure import tls_tickets
from wearlab.measure.agents import PageAgent
from wearlab.measure.curl import CLASSIC_GROUPS
from wearlab.model.choices import PowerState
from wearlab.model import params as P
from wearlab.model import ports
from wearlab.model.columns import Metric, Ratio, Series
from wearlab.model.declarations import PlanView, WorkloadFields
from wearlab.model.needs import Need, PageContent, Tcpcrypt
from wearlab.model.page import HTTP1_CONNECTIONS_PER_ORIGIN, Page, load_page_file
from wearlab.model.params import Param, ParamSet
from wearlab.model.tls import tls_version
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted
from wearlab.nodes.caddy import TLS_VERSIONS as SERVED_TLS_VERSIONS
from wearlab.nodes.devicecpu import RESUMED_PLATFORM, DeviceProcess, RunCounters, key_exchange_s, node_cpu
from wearlab.nodes.multipath_endpoints import APP_REDIRECT
from wearlab.nodes.tcpcrypt import RunAccount, encrypted, fallback_reason
from wearlab.workloads.paths import PATH, check_paths_to
from wearlab.workloads.run_energy import ENERGY_SERIES, RunEnergy, energy_metrics
from wearlab.workloads.workload import Outcome, Workload

# The shipped pages: `page: exp3-bing` names experiments/pages/exp3-bing.yaml.
PAGES_DIR = Path(__file__).resolve().parents[3] / "experiments" / "pages"
HTTP_VERSIONS = ("1.1", "2", "3")
# The server kind's ports (nodes/caddy.py): tcpcrypt's is plain HTTP on the port the server's
# tcpcryptd intercepts, so plain cells on 80 stay untouched.
PORTS = {"http": ports.HTTP, "https": ports.HTTPS["rsa2048"], "tcpcrypt": ports.HTTP_TCPCRYPT}
PROTOCOLS = tuple(PORTS)


def _http_version(value: Any) -> str:
    # YAML reads 1.1 as a float and 2 as an int; both mean the obvious version.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = "1.1" if value == 1.1 else str(int(value)) if float(value).is_integer() else str(value)
    elif isinstance(value, str):
        text = value.strip().lower().removeprefix("http/").removeprefix("h")
        text = {"2.0": "2", "3.0": "3", "1": "1.1"}.get(text, text)
    else:
        text = repr(value)
    if text in HTTP_VERSIONS:
        return text
    raise ValueError(f"http_version {value!r} is not one of: {', '.join(HTTP_VERSIONS)}")


def _connections(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 64:
        return value
    raise ValueError(f"connections_per_origin {value!r} must be a whole number from 1 to 64 (browsers: 6)")


def _on_off(name: str):
    def normalize(value: Any) -> str:
        # YAML 1.1 reads on/off (and yes/no) as booleans.
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str) and value.strip().lower() in ("on", "off"):
            return value.strip().lower()
        raise ValueError(f"{name} {value!r} must be on or off")
    return normalize


VIEWS = ("first", "repeat")


def _page(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"page must name a page file (a name under experiments/pages/, e.g. exp3-bing, or a path "
                     f"relative to the experiment), got {value!r}")


def page_file_path(value: str, experiment_file: str | None) -> Path:
    """Where `page:` points: a bare name is a shipped page, anything else a path relative to the
    experiment's file."""
    if "/" not in value and not value.endswith((".yaml", ".yml")):
        return PAGES_DIR / f"{value}.yaml"
    p = Path(value)
    if not p.is_absolute() and experiment_file:
        p = Path(experiment_file).resolve().parent / p
    return p.resolve()


def load_page(path: str) -> Page:
    """The first page a cell loads (its file's first page, or its session's)."""
    return load_page_file(path).sequence()[0]


class Visit(NamedTuple):
    """What a cell loads: the pages in order (one, or a session's), and the session's pool and
    think time."""

    pages: tuple[Page, ...]
    pool: str = "shared"
    think_s: float = 0.0

    @property
    def is_session(self) -> bool:
        return len(self.pages) > 1


def load_visit(path: str) -> Visit:
    f = load_page_file(path)
    if f.session is None:
        return Visit((f.sequence()[0],))
    return Visit(tuple(f.sequence()), f.session.pool, f.session.think_s)


def origin_host(page: Page, origin: str) -> str:
    o = next(o for o in page.origins if o.name == origin)
    return o.host or o.name


class PageLoadFields(WorkloadFields):
    client: str
    # origin -> server node; an origin not listed is served by the node of its own name
    servers: dict[str, str] = {}


def server_of(fields: PageLoadFields, origin: str) -> str:
    return fields.servers.get(origin, origin)


class PageLoad(Workload):
    name = "page-load"
    client_pays_per_byte = True
    rides_transport = True
    doc = "a page's objects from several origins, as a browser loads them, over HTTP/1.1, HTTP/2 or HTTP/3"
    Fields = PageLoadFields
    params = ParamSet((
        Param("page", _page, None, "the page: a file under experiments/pages/ by name (exp3-bing) or a path "
              "relative to the experiment", required=True, shown=lambda v: Path(str(v)).stem),
        Param("http_version", _http_version, "2", "1.1 (at most connections_per_origin connections per origin), "
              "2 (one multiplexed TCP connection per origin) or 3 (one QUIC connection per origin; https only)"),
        Param("connections_per_origin", _connections, HTTP1_CONNECTIONS_PER_ORIGIN,
              "HTTP/1.1's pool: at most this many persistent connections per origin (Chromium: 6)",
              applies=lambda c: c.get("http_version") == "1.1", applies_doc="http_version is 1.1"),
        Param("protocol", P.choice("protocol", PROTOCOLS, lower=True), "https",
              "http, https (TLS 1.3, a certificate per server node naming its origins' hosts) or tcpcrypt (plain "
              "HTTP/1.1 or h2c, encrypted by wearlab's tcpcryptd at the client and each server: RFC 8547/8548; "
              "not HTTP/3, which is not TCP)"),
        Param("tls_version", tls_version(SERVED_TLS_VERSIONS), "1.3",
              "the TLS version the client pins (min = max): 1.3, or 1.2 (ECDHE with the server's certificate; its "
              "resumption is RFC 5077's abbreviated handshake, no key exchange and no certificate); HTTP/3 is QUIC, "
              "always 1.3", applies=lambda c: c.get("protocol") == "https", applies_doc="protocol is https"),
        Param("resumption", _on_off("resumption"), "off", "on: the client keeps its sessions - the load's later "
              "connections to an origin resume the session of an earlier one, and a repeat view's those of its first "
              "view (TLS: session tickets, single-use; tcpcrypt: RFC 8548 3.5's next session secret, per server "
              "host); off: every connection a full handshake / fresh key exchange, in either view",
              applies=lambda c: c.get("protocol") in ("https", "tcpcrypt"), applies_doc="protocol is https or tcpcrypt"),
        Param("view", P.choice("view", VIEWS, lower=True), "first",
              "first: the client's first visit (an empty HTTP cache, no sessions); repeat: the same client loads "
              "the page again after an untimed first load, its connections closed in between (an app opened a "
              "second time), keeping its HTTP cache and, with resumption on, its TLS sessions / tcpcrypt secrets; "
              "only the second load is measured"),
        Param("early_data", _on_off("early_data"), "on", "on: a resumed TLS 1.3 connection sends its first "
              "request as early data (QUIC: 0-RTT) where the server's ticket allows it (CURLSSLOPT_EARLYDATA), as "
              "browsers do for QUIC; off: never",
              applies=lambda c: c.get("protocol") == "https" and c.get("resumption") == "on",
              applies_doc="protocol is https and resumption is on"),
        PATH,
    ))
    metrics = (
        Metric("page_load_s", "s", label="page load", summarised=True,
               doc="the root's request -> the last object's last byte (the client's clock); a session: the sum "
                   "of its pages' (series pages has each)"),
        Metric("pages", "count", better="none", doc="pages loaded (a session's; 1 for a page)"),
        Metric("first_page_s", "s", better="lower",
               doc="a session's first page's load time (its entry page: seed 002's /login); a page: page_load_s"),
        Metric("session_s", "s", better="lower",
               doc="the first page's request -> the last page's last byte (think times included; a page: "
                   "page_load_s)"),
        Metric("root_ttfb_s", "s", label="root TTFB", summarised=True,
               doc="the root's request -> its first response byte (libcurl's starttransfer)"),
        Metric("objects", "count", better="none", doc="objects loaded"),
        Metric("body_bytes", "B", better="none", doc="response body bytes received (the page's bytes when complete)"),
        Metric("connections_opened", "count", label="connections", summarised=True,
               doc="connections the page's transfers opened (libcurl's CURLINFO_NUM_CONNECTS, summed)"),
        Metric("connections_max_per_origin", "count",
               doc="the most connections one origin had (distinct libcurl connection ids)"),
        Metric("tcp_syns", "count", better="none",
               doc="TCP connections the client opened during the load (SYNs in its capture); 0 for HTTP/3"),
        Metric("quic_connections", "count", better="none",
               doc="QUIC connections the client opened during the load (client ports sending a QUIC Initial to "
                   "UDP 443, in its capture); 0 for HTTP/1.1 and HTTP/2"),
        Metric("wire_bytes", "B", label="wire bytes", summarised=True,
               doc="IP bytes both ways of every connection the load opened (headers, handshakes, data, teardown; "
                   "the client's capture)"),
        Metric("wire_bytes_up", "B", better="none", doc="wire_bytes client -> servers"),
        Metric("wire_bytes_down", "B", better="none", doc="wire_bytes servers -> client"),
        Metric("tls_full_handshakes", "count", better="lower",
               doc="TLS-over-TCP connections with a full handshake (capture: TLS 1.3, a ServerHello without "
                   "pre_shared_key; 1.2, a ServerHello not echoing the client's session ID, or followed by the "
                   "server's Certificate)"),
        Metric("tls_resumed_handshakes", "count", better="none",
               doc="TLS-over-TCP connections that resumed (capture: TLS 1.3, the ServerHello accepts a pre-shared "
                   "key, RFC 8446 4.2.11; 1.2, it echoes the client's session ID, RFC 5246 7.4.1.3 / RFC 5077 3.4, "
                   "or ChangeCipherSpec follows it with no Certificate, RFC 5077 3.1). QUIC's ServerHello is inside "
                   "protected Initial packets: see device_resumed_handshakes"),
        Metric("device_cpu_handshake_s", "s", label="device hs CPU", summarised=True,
               doc="the client's device: its CPU time inside the load's TLS/QUIC handshakes (primitives and the "
                   "platform's cost per handshake), summed over connections (devicecpu)"),
        Metric("device_cpu_other_s", "s", doc="the client's device: its crypto CPU time outside handshakes"),
        Metric("device_full_handshakes", "count", better="none",
               doc="client handshakes the device charged as full (libcurl's OpenSSL, TCP and QUIC alike)"),
        Metric("device_resumed_handshakes", "count", better="none",
               doc="client handshakes the device charged as resumed (OpenSSL's SSL_session_reused)"),
        Metric("tcpcrypt_connections", "count", better="none",
               doc="tcpcrypt cells: the load's connections as the client's tcpcryptd closed them (its records)"),
        Metric("tcpcrypt_encrypted", "count", better="none",
               doc="tcpcrypt cells: connections that ran tcpcrypt, closed cleanly and whose session ID the server's "
                   "daemon reports too (RFC 8548 3.4); the rest fell back to plain TCP or were reset (series tcpcrypt)"),
        Metric("tcpcrypt_fresh_key_exchanges", "count", better="lower",
               doc="tcpcrypt cells: connections whose session began with a fresh key exchange (the client daemon's "
                   "records)"),
        Metric("tcpcrypt_resumed", "count", better="none",
               doc="tcpcrypt cells: connections that resumed a cached session secret, no key exchange (RFC 8548 3.5; "
                   "the client daemon's records)"),
        Metric("tcpcrypt_init1_connections", "count", better="lower",
               doc="tcpcrypt cells: connections whose client stream starts with Init1 (RFC 8548 4.1), a fresh key "
                   "exchange, in the client's capture; a resumed session sends none"),
        Metric("tcpcrypt_cpu_s", "s", label="tcpcrypt CPU",
               doc="tcpcrypt cells: CPU time of the client's and the servers' tcpcryptd during the load (10 ms ticks "
                   "in the UML guest)"),
        Metric("device_kx_s", "s", label="device kx", summarised=True,
               doc="a client with a device: the device's time for the load's key exchanges. tcpcrypt cells: in the "
                   "client's tcpcryptd (the ephemeral key pair, the agreement and the key schedule of each fresh "
                   "session, from its device profile; a resumed session computes none), summed over connections. "
                   "https: the agent's public-key operations in its handshakes - key pairs, agreements, signatures "
                   "and certificate-chain verifications (devicecpu's counters; a TLS 1.3 resumption still computes "
                   "its (EC)DHE, a TLS 1.2 abbreviated handshake nothing); the platform's cost per handshake is not "
                   "in it (device_cpu_handshake_s has both)"),
        Metric("requests", "count", better="lower",
               doc="requests the load sent (answered 200 or 304); a repeat view sends none for an object its "
                   "cache holds fresh"),
        Metric("cache_hits", "count", better="none",
               doc="objects taken from the client's HTTP cache without a request (fresh: max-age not yet passed)"),
        Metric("not_modified", "count", better="none",
               doc="conditional requests (If-None-Match: a stale object's ETag) answered 304 Not Modified, no body"),
        Metric("resumed_handshakes", "count", better="none",
               doc="https with resumption on: connections whose TLS handshake (TCP or QUIC) carried no "
                   "Certificate, in libcurl's own words (its trace of the handshake's messages; QUIC's, untraced: the "
                   "peer certificate's type UNDEF); 0 with resumption off"),
        Metric("full_handshakes", "count", better="lower",
               doc="https: connections opened with a full TLS handshake (libcurl's count: opened minus resumed)"),
        Metric("early_data_connections", "count", better="none",
               doc="https with early data on: connections whose first request went as TLS 1.3 early data / QUIC "
                   "0-RTT and was accepted (CURLINFO_EARLYDATA_SENT_T > 0)"),
        Metric("early_data_rejected", "count", better="lower",
               doc="connections whose early data the server rejected (CURLINFO_EARLYDATA_SENT_T < 0; sent again "
                   "after the handshake)"),
        Metric("quic_0rtt_packets", "count", better="none",
               doc="HTTP/3: the client's QUIC 0-RTT packets (long header type 1, RFC 9000 17.2.3), alone or "
                   "coalesced, in its capture"),
        Metric("first_view_s", "s", better="none",
               doc="view repeat: the untimed first view's page load time (the client's clock), for comparison"),
        *energy_metrics(handshake=True),
    )
    series = (Series("objects", ("session_page", "index", "origin", "path", "size", "parent", "start_s", "ttfb_s", "end_s", "bytes",
                                 "conn_id", "local_port", "http_version", "new_connection", "source", "received",
                                 "tls_resumed", "early_data_bytes"),
                     doc="each object of each load: when it was requested, its first byte and end (s from the root's "
                         "request), its connection (libcurl's id, the client's port) and whether it opened it; where "
                         "it came from (network: a 200; revalidated: a 304; cache: no request), its body bytes "
                         "received, and for a connection it opened whether libcurl says it resumed and the bytes it "
                         "sent as early data (negative: rejected)"),
              Series("pages", ("session_page", "name", "start_s", "load_s", "ttfb_s", "objects", "bytes",
                               "connections_opened"),
                     doc="each page of each load (a session's pages in order): its start (s from the session's), its "
                         "load time (its root's request -> its last byte), its root's TTFB, objects, body bytes and "
                         "the connections it opened (0 where a shared pool had them already)"),
              Series("connections", ("origin", "server", "opened", "distinct", "tcp_syns", "quic_initials"),
                     doc="per origin: connections opened (libcurl), distinct connections used, TCP SYNs and QUIC "
                         "connections (Initials from distinct client ports) to its server in the client's capture "
                         "(per server node, so origins sharing a node share the count)"),
              Series("flows", ("proto", "server", "client_port", "opened_s", "bytes_up", "bytes_down", "packets",
                               "resumed", "tcpcrypt_init1", "zero_rtt_packets"),
                     doc="each connection the load opened, on the wire: its IP bytes each way and, for TLS over "
                         "TCP, whether its ServerHello accepted a pre-shared key (resumed); whether its client "
                         "stream opens with tcpcrypt's Init1 (a fresh key exchange, RFC 8548 4.1); QUIC: the "
                         "client's 0-RTT packets"),
              Series("devicecpu", ("node", "op", "calls", "bytes", "host_s", "device_s"),
                     doc="the client's device: what its agent computed in the load, per operation"),
              Series("tcpcrypt", ("server", "mode", "state", "reason", "resumed", "encrypted", "session_id",
                                  "handshake_ms", "device_ms", "kx_device_ms"),
                     doc="tcpcrypt cells: each of the load's connections as the client's tcpcryptd recorded it, in the "
                         "order they opened: mode tcpcrypt, plain (ENO fell back; reason says why) or none (reset); "
                         "resumed (RFC 8548 3.5); encrypted (the server's daemon has the same session ID); the "
                         "device's time for its cryptography (device_ms) and for its key exchange alone "
                         "(kx_device_ms)"),
              ENERGY_SERIES)
    headline = ("page_load_s",)
    # wire_bytes: seed 000 Exp3's HTTPS/HTTP byte ratio (Fig. 8). `resumption` applies to https only.
    ratios = (Ratio("protocol", "https", "http", ("page_load_s", "wire_bytes", "energy_j"),
                    ignoring=("resumption", "early_data"), title="HTTPS / HTTP (ratio of medians)"),
              Ratio("protocol", "tcpcrypt", "http", ("page_load_s", "wire_bytes", "energy_j"),
                    ignoring=("resumption", "early_data"), title="tcpcrypt / HTTP (ratio of medians)"),
              Ratio("view", "repeat", "first", ("page_load_s", "requests", "wire_bytes", "energy_j"),
                    title="repeat view / first view (ratio of medians)"))

    # -- model time --------------------------------------------------------------------------
    @classmethod
    def endpoints(cls, fields: PageLoadFields) -> dict[str, str]:
        return {"client": fields.client}

    @classmethod
    def servers(cls, fields: PageLoadFields, cells: list[Mapping[str, Any]]) -> tuple[str, ...]:
        """Every origin's server node over the cells' pages (where the chunked transport's server
        agents run: the app's connection to each origin ends at that origin's own node)."""
        return tuple(sorted({server_of(fields, o) for path in {c["page"] for c in cells}
                             for page in load_visit(path).pages for o in page.origins_used()}))

    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems: list[Problem] = []

        def problem(path: YamlPath, message: str) -> None:
            problems.append(Problem(src.file, src.line(path), dotted(path), message))

        if fields.client not in topo.nodes:
            problem(("workload", "client"), f"unknown node '{fields.client}'{did_you_mean(fields.client, topo.nodes)} "
                                            f"(nodes: {', '.join(topo.nodes)})")
        for origin, node in fields.servers.items():
            if node not in topo.nodes:
                problem(("workload", "servers", origin), f"unknown node '{node}'{did_you_mean(node, topo.nodes)} "
                                                         f"(nodes: {', '.join(topo.nodes)})")
        versions = matrix.get("http_version", [fixed.get("http_version")])
        protocols = matrix.get("protocol", [fixed.get("protocol")])
        if "3" in versions and "http" in protocols:
            at = where.get(("http_version", "3"), ("workload", "http_version"))
            problem(at, "HTTP/3 runs over QUIC, which is always encrypted: cells with protocol http and http_version 3 "
                        "cannot exist; vary protocol in another experiment, or leave 3 out")
        if "3" in versions and "tcpcrypt" in protocols:
            at = (where.get(("http_version", "3")) if "http_version" in matrix
                  else where.get(("protocol", "tcpcrypt"), ("workload", "protocol")))
            problem(at, "HTTP/3 runs over QUIC (UDP), but tcpcrypt encrypts TCP connections (RFC 8548): cells with "
                        "protocol tcpcrypt and http_version 3 cannot exist; use http_version 1.1 or 2 with tcpcrypt, "
                        "or vary protocol in another experiment")
        tls_versions = matrix.get("tls_version", [fixed.get("tls_version")])
        if "3" in versions and "1.2" in tls_versions and "https" in protocols:
            at = (where.get(("http_version", "3")) if "http_version" in matrix
                  else where.get(("tls_version", "1.2"), ("workload", "tls_version")))
            problem(at, "HTTP/3 runs over QUIC, which carries TLS 1.3 only (RFC 9001 4.2): cells with tls_version 1.2 "
                        "and http_version 3 cannot exist; use http_version 1.1 or 2 with TLS 1.2, or vary tls_version "
                        "in another experiment")
        # Resolve each page to its file (the cell carries the absolute path) and check it.
        served: dict[tuple[str, str, str], tuple[int, str, str, str]] = {}
        values = matrix["page"] if "page" in matrix else ([fixed["page"]] if "page" in fixed else [])
        if not values:
            problem(("workload",), "no page: give page: (a file under experiments/pages/ by name, or a path)")
        resolved, server_nodes = [], set()
        for value in values:
            at = where.get(("page", value), ("workload", "page"))
            path = page_file_path(value, src.file)
            if not path.is_file():
                shipped = sorted(p.stem for p in PAGES_DIR.glob("*.yaml"))
                problem(at, f"no page file {path}" + (did_you_mean(value, shipped) if "/" not in value else "")
                            + (f" (shipped pages: {', '.join(shipped)})" if "/" not in value else ""))
                resolved.append(value)
                continue
            try:
                visit = load_visit(str(path))
            except InputError as e:
                problems += e.problems
                resolved.append(value)
                continue
            views = matrix.get("view", [fixed.get("view")])
            if "repeat" in views and visit.is_session and visit.pool == "per-page":
                problem(where.get(("view", "repeat"), ("workload", "view")),
                        f"page file {path.name} is a session with pool: per-page (a fresh client per page, as seed "
                        "002's curl): a fresh client keeps nothing from one visit to the next, so it has no repeat "
                        "view; use pool: shared, or view: first")
            for page, origin in ((p, o) for p in {q.name: q for q in visit.pages}.values() for o in p.origins_used()):
                node = server_of(fields, origin)
                server_nodes.add(node)
                if node not in topo.nodes:
                    problem(at, f"page {page.name}'s origin '{origin}' needs a server node: the topology has no node "
                                f"'{node}'{did_you_mean(node, topo.nodes)}; name one '{origin}' or map it under "
                                f"workload.servers (e.g. servers: {{{origin}: server}})")
                    continue
                if node == fields.client:
                    problem(at, f"page {page.name}'s origin '{origin}' maps to the client '{node}' itself")
                    continue
                host = origin_host(page, origin)
                for o in page.objects:
                    if o.origin != origin:
                        continue
                    key = (node, host, o.path)
                    mine = (o.size, o.type, o.server_s, o.cache, page.name)
                    if key in served and served[key][:4] != mine[:4]:
                        problem(at, f"page {page.name} has {host}{o.path} on node {node} as {o.size} B {o.type} "
                                    f"(server_time {o.server_s:g} s, {o.cache}), but page {served[key][4]} has it as "
                                    f"{served[key][0]} B {served[key][1]} (server_time {served[key][2]:g} s, "
                                    f"{served[key][3]}): one server cannot serve both; give the pages' origins "
                                    "different host: names")
                    served.setdefault(key, mine)
            where[("page", str(path))] = at
            resolved.append(str(path))
        if fields.client in topo.nodes:
            problems += check_paths_to(fields.client, sorted(server_nodes), topo, fixed, matrix, where, src)
        if "page" in matrix:
            matrix["page"] = resolved
        elif "page" in fixed:
            fixed["page"] = resolved[0]
        return problems

    @classmethod
    def captured(cls, plan) -> set[str]:
        return {plan.fields.client}   # its connections, TLS handshakes and bytes: the client's capture

    @classmethod
    def needs(cls, fields: PageLoadFields, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        per_node: dict[str, set[tuple[str, str, int, str, float, str]]] = {}
        for path in sorted({c["page"] for c in cells}):
            for page in load_visit(path).pages:
                for o in page.objects:
                    per_node.setdefault(server_of(fields, o.origin), set()).add(
                        (origin_host(page, o.origin), o.path, o.size, o.type, o.server_s, o.cache))
        for node in per_node:
            for c in cells:
                _service(plan.kind_of(node, c), c["protocol"])   # ServiceMissing: the plan says which
        # One server per node for the whole experiment: it accepts every TLS version a cell pins
        # (from the lowest to the highest), and each cell's client pins its own.
        tls_versions = tuple(sorted({c["tls_version"] for c in cells if c["protocol"] == "https"})) or ("1.3",)
        out: list[Need] = [PageContent(node, tuple(sorted(objs)), tls_versions)
                           for node, objs in sorted(per_node.items())]
        crypt = [c for c in cells if c["protocol"] == "tcpcrypt"]
        if crypt:
            # tcpcryptd at the client (its connections to the port; restarted per load with the
            # cell's resumption) and at every origin's server, resuming when any cell asks for it
            # (a server resumes only what a client offers)
            resume = any(c.get("resumption") == "on" for c in crypt)
            out.append(Tcpcrypt(fields.client, PORTS["tcpcrypt"], "outbound"))
            out += [Tcpcrypt(node, PORTS["tcpcrypt"], "inbound", resume=resume) for node in sorted(per_node)]
        return out

    @classmethod
    def describe_cell(cls, cell: Mapping[str, Any]) -> str:
        parts = [Path(str(cell["page"])).stem, f"HTTP/{cell['http_version']}", cell["protocol"]]
        if cell.get("tls_version") not in (None, "", "1.3"):
            parts.append(f"TLS {cell['tls_version']}")
        if cell.get("http_version") == "1.1" and cell.get("connections_per_origin") not in (None, ""):
            parts.append(f"{cell['connections_per_origin']}/origin")
        if cell.get("resumption") == "on":
            parts.append("resumption" + (", no early data" if cell.get("early_data") == "off" else ""))
        if cell.get("view") == "repeat":
            parts.append("repeat view")
        if cell.get("path"):
            parts.append(f"via {cell['path']}")
        return " ".join(parts)

    # -- run time ----------------------------------------------------------------------------
    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        client = self.fields.client
        servers = sorted({n.node for n in self.ctx.plan.needs if isinstance(n, PageContent)})
        # The client trusts every server node's root (each node makes its own PKI).
        bundle = self.ctx.workdir("page-load") / "roots.pem"
        bundle.write_bytes(b"".join(Path(self.ctx.nodes[s].ca).read_bytes() for s in servers
                                    if getattr(self.ctx.nodes[s], "ca", None)))
        self.cacert = str(bundle)
        device = self.ctx.plan.device_of(client)
        # On a node with a device the agent computes in the device's time (nodes.devicecpu).
        self.device = DeviceProcess(device, self.ctx.workdir("devicecpu"), f"{client}-page-agent",
                                    node=node_cpu(self.ctx.net.workdir, client, device), per_byte=self.client_pays_per_byte,
                                    node_name=client) if device else None
        self.compute_factor = device.cpu_factor.value if device else 1.0
        env = self.device.env() if self.device else None
        # TLS 1.2 with resumption on: libcurl offers tickets only through wearlab's hook
        # (measure.tls_tickets), preloaded into the agent and switched on for those loads alone.
        self.tls12_tickets = any(tls12_tickets(c) for c in cells)
        if self.tls12_tickets:
            env = tls_tickets.preload(env if env is not None else dict(os.environ))
        self.agent = PageAgent(self.ctx.net, client, env=env)
        # 300 bytes a packet: a TLS 1.3 ServerHello (its extensions say whether it resumed) fits.
        # A repeat view over HTTP/3: whole datagrams, so a 0-RTT packet coalesced after the
        # client's Initial (which a ClientHello with a ticket fills past 300 bytes) is seen.
        zero_rtt = any(c.get("view") == "repeat" and c["http_version"] == "3" for c in cells)
        self.capture = self.ctx.capture(client, snaplen=1500 if zero_rtt else 300)
        self.pages: dict[str, Visit] = {}
        # The client's first hop (the energy model's medium; a relaying phone's energy).
        self.hop = next((e.peer for e in self.ctx.plan.link_ends(client)), client)
        self.energy = RunEnergy(self.ctx.plan, client, "")
        carried = self.ctx.carried_in_any_cell(client)   # the multipath transport's cells
        energy = {**self.energy.experiment_facts([self.hop], over_transport=carried), "phases": ENERGY_PHASES}
        if carried:
            energy["over_transport"]["phases"] = TRANSPORT_ENERGY
        self.crypt_servers = servers
        facts: dict[str, Any] = {}
        served = next((n.tls_versions for n in self.ctx.plan.needs if isinstance(n, PageContent)), ("1.3",))
        tls_served = sorted({min(served), max(served)})
        if any(c["protocol"] == "tcpcrypt" for c in cells):
            facts["tcpcrypt"] = TCPCRYPT_FACTS | {"servers_resume": {s: self.ctx.nodes[s].tcpcrypt.resumption
                                                                      for s in servers if self.ctx.nodes[s].tcpcrypt},
                                                  "paths": self._tcpcrypt_paths()}
        return facts | {"client": {"kind": "page agent (pycurl multi interface, persistent process, a fresh multi handle "
                                   "and connection pool per load)", "libcurl": self.agent.libcurl},
                "resolver": "static: each origin's host name -> its server node's address (CURLOPT_RESOLVE); "
                            "no DNS lookups on the emulated path",
                "servers": {s: self.ctx.address(s) for s in servers},
                "compute": "each object's compute time is waited on the client's clock: the page's time (the "
                           "calibration machine's, as the device's cpu_factor is) x "
                           + (f"{self.compute_factor:g} (device {device.name}'s cpu_factor: "
                              f"{device.cpu_factor.basis}, {device.cpu_factor.source})" if device else "1 (no device)"),
                "device": ({**self.device.facts(), "reach": DEVICE_REACH} if self.device else None),
                "energy": energy,
                "transport": TRANSPORT_FACTS if carried else None,
                "tls": f"the cell's tls_version pinned by the client (QUIC: always 1.3), the servers accepting "
                       f"{' to '.join(tls_served)}; key-share groups {CLASSIC_GROUPS} (as http-get: no "
                       "post-quantum hybrid); "
                       "resumption off: every connection a full handshake; on: TLS 1.3 session "
                       "tickets (Caddy sends one per handshake with its first flight) kept in a CURLSH share "
                       "(CURL_LOCK_DATA_SSL_SESSION) for the load and, in a repeat view, from its first view, each "
                       "offered once (psk_dhe_ke: a resumption still computes the (EC)DHE key exchange, RFC 8446 "
                       "4.2.9); TLS 1.2: ECDHE with the server's certificate; with resumption on, session tickets "
                       "offered through wearlab's ticket hook (tls12_tickets) and resumed in the abbreviated "
                       "handshake (RFC 5246 7.3: no key exchange, no certificate), a session by any number of "
                       "later connections",
                "tls12_tickets": tls_tickets.FACTS if self.tls12_tickets else None,
                "server_time": SERVER_TIME_FACTS if any(n.server_time for n in self.ctx.plan.needs
                                                        if isinstance(n, PageContent)) else "none: every object 0",
                "views": VIEW_FACTS,
                "early_data": EARLY_DATA_FACTS if any(c.get("early_data") == "on" for c in cells) else None,
                "http_cache": CACHE_FACTS,
                "not_yet": ["tcpcrypt: pipelined resumption (connections opened at once resume one ticket at "
                            "most per server host)",
                            "a repeat view some time after the first (it follows at once: max-ages of seconds "
                            "or more are all still fresh)"]}

    def visit(self, path: str) -> Visit:
        if path not in self.pages:
            self.pages[path] = load_visit(path)
        return self.pages[path]

    def request(self, cell: dict[str, Any]) -> dict[str, Any]:
        visit = self.visit(cell["page"])
        # The cell's first hop to every origin's server (a warm-up's too: the route it measures).
        for node in sorted({server_of(self.fields, o.origin) for page in visit.pages for o in page.objects}):
            self.ctx.select_route(self.fields.client, node, cell["path"])
        # tcpcrypt: plain HTTP to the port the daemons intercept (the application is unchanged)
        scheme, port = ("http" if cell["protocol"] == "tcpcrypt" else cell["protocol"]), PORTS[cell["protocol"]]
        pages, resolve = [], set()
        for page in visit.pages:
            objects = []
            for o in page.objects:
                host = origin_host(page, o.origin)
                node = server_of(self.fields, o.origin)
                objects.append({"url": f"{scheme}://{host}:{port}{o.path}", "origin": o.origin, "parent": o.parent,
                                "compute_s": o.compute_s})
                resolve.add(f"{host}:{port}:{self.ctx.address(node)}")
            pages.append(objects)
        what = ({"pages": pages, "pool": visit.pool, "think_s": visit.think_s} if visit.is_session
                else {"objects": pages[0]})
        return {**what, "http_version": cell["http_version"], "protocol": scheme,
                "connections_per_origin": cell.get("connections_per_origin") or HTTP1_CONNECTIONS_PER_ORIGIN,
                "resolve": sorted(resolve), "cacert": self.cacert if scheme == "https" else None,
                "groups": CLASSIC_GROUPS, "tls_version": cell.get("tls_version") or "1.3",
                "compute_factor": self.compute_factor,
                "resumption": scheme == "https" and cell.get("resumption") == "on",
                "tls12_tickets": tls12_tickets(cell),
                "early_data": scheme == "https" and cell.get("resumption") == "on" and cell.get("early_data") == "on"}

    def warm_up(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        """One unrecorded load per (protocol, HTTP version, TLS version): the first use of a code
        path (library initialisation, QUIC's and TLS's first handshakes in a process) is not the
        link's cost."""
        seen, failures = set(), []
        for c in cells:
            key = (c["page"], c["protocol"], c["http_version"], c.get("tls_version") or "")
            if key in seen:
                continue
            seen.add(key)
            out = self.agent.load(self.ctx.timeout_s, **self.request(c))
            if out.get("error"):
                failures.append(f"{dict(zip(('page', 'protocol', 'http_version', 'tls_version'), key))}: {out['error']}")
        return {"loads": len(seen), "recorded": False, "failures": failures}

    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        visit = self.visit(cell["page"])
        crypt = self._daemons() if cell["protocol"] == "tcpcrypt" else {}
        if crypt:
            # A first visit: the client's daemon fresh, its session cache empty, resuming only
            # when the cell says so (RFC 8548 3.5 lets an application choose both). A repeat
            # view keeps it running between its two loads: its cache is what carries over.
            crypt[self.fields.client].restart(cell.get("resumption") == "on")
        repeat = cell.get("view") == "repeat"
        first_view_s = None
        if repeat:
            first_view_s = self._first_view(cell, crypt)
        account = RunAccount(crypt) if crypt else None
        device = RunCounters(self.device) if self.device else None
        since = self.capture.now()
        transport = self.ctx.transport(self.fields.client)
        load_ns = time.time_ns()
        out = self.agent.load(self.ctx.timeout_s, **self.request(cell), reuse_state=repeat)
        if tls12_tickets(cell) and not out.get("error") and not out.get("tls12_tickets"):
            raise RuntimeError("TLS 1.2 tickets were asked for, and the agent's ticket hook let no TLS context offer "
                               "one (libcurl no longer calls SSL_CTX_set_options?)")
        if out.get("error"):
            if account:
                said = sorted({f"{r.get('mode') or 'none'}: {fallback_reason(r)}"
                               for r in account.records(lambda _: False, timeout=0.5).get(self.fields.client, [])
                               if not (r.get("mode") == "tcpcrypt" and r.get("state") == "closed")})
                if said:
                    hop = self.ctx.nodes[cell["path"]]
                    split = (f"; {cell['path']} ({hop.name}) splits TCP port {PORTS['tcpcrypt']}: TCP-ENO ends at its "
                             "proxy" if type(hop).splits(hop.settings, PORTS["tcpcrypt"]) else "")
                    raise RuntimeError(f"{out['error']} (the client's tcpcryptd: {'; '.join(said)}{split})")
            raise RuntimeError(out["error"])
        got = out["objects"]
        mine = [(n, page, o) for n, page in enumerate(visit.pages) for o in page.objects]
        for (_, _, o), r in zip(mine, got, strict=True):
            if r.get("bytes") != o.size:
                raise RuntimeError(f"{o.ref}: received {r.get('bytes')} bytes, the page says {o.size}")
        rows = [{"session_page": n, "index": o.index, "origin": o.origin, "path": o.path, "size": o.size,
                 "parent": o.parent, "start_s": round(r["start_s"], 6), "ttfb_s": round(r["ttfb_s"], 6),
                 "end_s": round(r["end_s"], 6), "bytes": r["received"], "conn_id": r["conn_id"],
                 "local_port": r["local_port"], "http_version": r["http_version"], "new_connection": r["num_connects"],
                 "source": r["source"], "received": r["received"], "tls_resumed": r.get("tls_resumed"),
                 "early_data_bytes": r.get("earlydata_sent", 0) if r["num_connects"] else 0}
                for (n, _, o), r in zip(mine, got, strict=True)]
        page_rows = []
        for n, page in enumerate(visit.pages):
            its = [r for r in rows if r["session_page"] == n]
            page_rows.append({"session_page": n, "name": page.name, "start_s": its[0]["start_s"],
                              "load_s": round(max(r["end_s"] for r in its) - its[0]["start_s"], 6),
                              "ttfb_s": round(its[0]["ttfb_s"] - its[0]["start_s"], 6), "objects": len(its),
                              "bytes": sum(r["bytes"] for r in its),
                              "connections_opened": sum(r["new_connection"] for r in its)})
        opened: dict[str, int] = {}
        distinct: dict[str, set] = {}
        for r in rows:
            opened[r["origin"]] = opened.get(r["origin"], 0) + r["new_connection"]
            if r["source"] != "cache":   # a cache hit used no connection
                distinct.setdefault(r["origin"], set()).add(r["conn_id"])
        if any(r["http_version"] != cell["http_version"] for r in rows if r["source"] != "cache"):
            seen = sorted({r["http_version"] for r in rows if r["source"] != "cache"})
            raise RuntimeError(f"asked for HTTP/{cell['http_version']}, the responses came over HTTP/{', '.join(seen)}")
        row = {"page_load_s": sum(p["load_s"] for p in page_rows), "pages": len(page_rows),
               "first_page_s": page_rows[0]["load_s"],
               "session_s": max(r["end_s"] for r in rows) - rows[0]["start_s"],
               "root_ttfb_s": rows[0]["ttfb_s"] - rows[0]["start_s"], "objects": len(rows),
               "body_bytes": sum(r["received"] for r in rows), "connections_opened": sum(opened.values()),
               "connections_max_per_origin": max((len(v) for v in distinct.values()), default=0),
               "requests": sum(1 for r in rows if r["source"] != "cache"),
               "cache_hits": sum(1 for r in rows if r["source"] == "cache"),
               "not_modified": sum(1 for r in rows if r["source"] == "revalidated")}
        if cell["protocol"] == "https":
            resumed = sum(1 for r in rows if r["new_connection"] and r["tls_resumed"] is True)
            row.update(resumed_handshakes=resumed, full_handshakes=row["connections_opened"] - resumed)
            if cell.get("resumption") == "on":
                row.update(early_data_connections=sum(1 for r in rows if r["early_data_bytes"] > 0),
                           early_data_rejected=sum(1 for r in rows if r["early_data_bytes"] < 0))
        if first_view_s is not None:
            row["first_view_s"] = first_view_s
        until = self.capture.now()
        loaded_ns = time.time_ns()
        series: dict[str, list[dict[str, Any]]] = {"objects": rows, "pages": page_rows}
        if device:
            counts = device.delta()
            row.update(device.metrics(),
                       device_full_handshakes=counts["platform:handshake"].calls if "platform:handshake" in counts else 0,
                       device_resumed_handshakes=sum(counts[k].calls for k in RESUMED_PLATFORM if k in counts))
            if cell["protocol"] == "https":
                row["device_kx_s"] = round(key_exchange_s(counts), 6)
            series["devicecpu"] = device.rows()
        addresses = {self.ctx.address(server_of(self.fields, o)): server_of(self.fields, o) for o in opened}
        https = cell["protocol"] == "https"
        encrypted_load = https
        if account:
            crow, series["tcpcrypt"] = self._tcpcrypt(account, row["connections_opened"], addresses)
            row.update(crow)
            encrypted_load = crow["tcpcrypt_encrypted"] == crow["tcpcrypt_connections"] > 0
        spans = load_spans(got, https, cell["http_version"] == "3", encrypted=encrypted_load)
        # Over the multipath transport each radio's energy is what its path carried (the chunks'
        # flights, read now: the next run adds its own); a device that pays per byte received
        # stays in its data state until the agent has read the last byte, the load's end.
        carried = (self.energy.over_transport(self.ctx.nodes[self.fields.client], load_ns, encrypted=encrypted_load,
                                              end_ns=loaded_ns,
                                              read_ns=loaded_ns if self.device and self.device.per_byte else None)
                   if transport is not None else None)

        def finish() -> Outcome:
            # Over the transport the app's connections end at the watch agent, on the loopback.
            flows = self.capture.flows(since, until, set(addresses),
                                       redirected_to=APP_REDIRECT if transport is not None else None)
            seen: dict[tuple[str, str], int] = {}
            for f in flows:
                key = (f["proto"], addresses.get(f["server"], f["server"]))
                seen[key] = seen.get(key, 0) + 1
            conns = [{"origin": o, "server": server_of(self.fields, o), "opened": n, "distinct": len(distinct.get(o, ())),
                      "tcp_syns": seen.get(("tcp", server_of(self.fields, o)), 0),
                      "quic_initials": seen.get(("quic", server_of(self.fields, o)), 0)}
                     for o, n in sorted(opened.items())]
            tls = [f["resumed"] for f in flows if f["proto"] == "tcp"] if https else []
            values = {"tcp_syns": sum(n for (p, _), n in seen.items() if p == "tcp"),
                      "quic_connections": sum(n for (p, _), n in seen.items() if p == "quic"),
                      "wire_bytes_up": sum(f["bytes_up"] for f in flows),
                      "wire_bytes_down": sum(f["bytes_down"] for f in flows)}
            values["wire_bytes"] = values["wire_bytes_up"] + values["wire_bytes_down"]
            if account:
                # RFC 8548 4.1: a fresh key exchange starts the client's stream with Init1; a
                # resumed session (3.5) and a fallback send none.
                values["tcpcrypt_init1_connections"] = sum(1 for f in flows if f.get("tcpcrypt_init1"))
            if https and cell["http_version"] != "3":
                values.update(tls_full_handshakes=sum(1 for r in tls if r is False),
                              tls_resumed_handshakes=sum(1 for r in tls if r is True))
            if https and cell["http_version"] == "3":
                values["quic_0rtt_packets"] = sum(f["zero_rtt_packets"] for f in flows if f["proto"] == "quic")
            erow, erows = carried or self.energy.spans(self.hop, spans, row["session_s"], encrypted=encrypted_load)
            values.update(erow)
            out_series = {"connections": conns,
                          "flows": [{k: f[k] for k in ("proto", "server", "client_port", "bytes_up", "bytes_down",
                                                       "packets", "resumed", "tcpcrypt_init1", "zero_rtt_packets")}
                                    | {"opened_s": round(f["opened_s"] - since, 6)}
                                    for f in flows]}
            if erows:
                out_series["energy"] = erows
            return Outcome(row=values, series=out_series)

        return Outcome(row=row, series=series, finish=finish)

    def _first_view(self, cell: dict[str, Any], crypt: dict[str, Any]) -> float:
        """A repeat view's first view: the page loaded by the same client, untimed, the agent
        keeping the client's HTTP cache and TLS sessions (its connections closed; tcpcrypt: the
        client's daemon keeps its cached secrets). Returns its load time. tcpcrypt: waits for the
        daemons' close records of its connections, so the repeat view's account holds its own."""
        first_account = RunAccount(crypt) if crypt else None
        out = self.agent.load(self.ctx.timeout_s, **self.request(cell), keep_state=True)
        if out.get("error"):
            raise RuntimeError(f"the first view (untimed, before the repeat view): {out['error']}")
        got = out["objects"]
        if first_account:
            n = sum(o.get("num_connects") or 0 for o in got)
            client = self.fields.client
            first_account.records(lambda rec: len(rec[client]) >= n
                                  and sum(len(v) for k, v in rec.items() if k != client) >= n)
        return round(max(o["end_s"] for o in got) - got[0]["start_s"], 6)

    def _tcpcrypt_paths(self) -> dict[str, str]:
        """Metadata: what each tcpcrypt cell's first hop (its kind, as the cell has it) does with
        the tcpcrypt port - whether tcpcrypt can run end to end on that path at all."""
        out = {}
        for c in self.ctx.plan.cells:
            if c.values.get("protocol") == "tcpcrypt":
                hop = c.values["path"]
                setting = c.nodes[hop]
                out[f"{hop} ({setting.kind.name})"] = TCPCRYPT_PATH_FACTS[
                    "splits" if setting.kind.splits(setting.options, PORTS["tcpcrypt"]) else "routes"]
        return out

    def _daemons(self) -> dict[str, Any]:
        nodes = (self.fields.client, *self.crypt_servers)
        missing = [n for n in nodes if self.ctx.nodes[n].tcpcrypt is None]
        if missing:
            raise RuntimeError(f"no tcpcryptd on {', '.join(missing)}")
        return {n: self.ctx.nodes[n].tcpcrypt for n in nodes}

    def _tcpcrypt(self, account: RunAccount, connections: int,
                  addresses: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The daemons' close records of the load's connections (one per connection at each end,
        written as the load's pool closes them): how many ran tcpcrypt end to end, fresh or resumed,
        and what their key exchanges cost the client's device."""
        client = self.fields.client
        got = account.records(lambda out: len(out[client]) >= connections
                              and sum(len(v) for n, v in out.items() if n != client) >= connections)
        if len(got[client]) != connections:
            raise RuntimeError(f"the client's tcpcryptd recorded {len(got[client])} of the load's {connections} "
                               "connections: the others went around it")
        by_sid = {r.get("session_id"): r for n, rs in got.items() if n != client for r in rs if r.get("session_id")}
        mine = sorted(got[client], key=lambda r: r.get("started_unix") or 0)
        rows = []
        for r in mine:
            ip = str(r.get("remote", "")).rpartition(":")[0]
            rows.append({"server": addresses.get(ip, ip), "mode": r.get("mode") or "none", "state": r.get("state"),
                         "reason": fallback_reason(r), "resumed": r.get("resumed"),
                         "encrypted": encrypted(r, by_sid.get(r.get("session_id"))),
                         "session_id": r.get("session_id"), "handshake_ms": r.get("handshake_ms"),
                         "device_ms": r.get("device_ms"), "kx_device_ms": r.get("kx_device_ms")})
        tc = [r for r in rows if r["mode"] == "tcpcrypt"]
        values = {"tcpcrypt_connections": len(rows), "tcpcrypt_encrypted": sum(1 for r in rows if r["encrypted"]),
                  "tcpcrypt_fresh_key_exchanges": sum(1 for r in tc if not r["resumed"]),
                  "tcpcrypt_resumed": sum(1 for r in tc if r["resumed"]),
                  "tcpcrypt_cpu_s": account.cpu_s()}
        if self.device:
            values["device_kx_s"] = round(sum(r["kx_device_ms"] or 0.0 for r in rows) / 1000, 6)
        return values, rows

    def stop(self) -> None:
        if getattr(self, "agent", None) is not None:
            self.agent.stop()


def tls12_tickets(cell: Mapping[str, Any]) -> bool:
    """Whether the cell's client offers TLS 1.2 session tickets (the ticket hook): TLS 1.2 over TCP
    with resumption on, as a browser's 1.2 would."""
    return (cell.get("protocol") == "https" and cell.get("tls_version") == "1.2" and cell.get("resumption") == "on"
            and cell.get("http_version") != "3")


def _service(server_kind, protocol: str):
    """The server kind's service for a cell's protocol (tcpcrypt: its plain HTTP behind tcpcryptd)."""
    if protocol == "tcpcrypt":
        return server_kind.service("http", transport="tcpcrypt")
    return server_kind.service(protocol)


SERVER_TIME_FACTS = {
    "how": "an object with server_time > 0: the server's Caddy proxies its request (reverse_proxy, HTTP/1.1, "
           "keep-alive) to an application stand-in on the server node's loopback (wearlab.nodes.origin_app: "
           "asyncio, the wait on a timer, no CPU while waiting, concurrent requests waiting side by side), which "
           "answers 204 after the object's server_time; Caddy then serves the object's body with the same "
           "static_response as an object without one (handle_response), so the wire bytes are the same, only later",
    "applies_to": "HTTP/1.1, HTTP/2 and HTTP/3, plain, TLS and tcpcrypt (port 8080): one route table for all",
    "without": "objects with server_time 0 are answered by Caddy's static_response alone (no proxy hop)",
    "clock": "the server node's monotonic clock, from Caddy's proxied request to the stand-in's answer; the "
             "request's way from the client to Caddy and the proxy hop (loopback) add to it",
}
TCPCRYPT_FACTS = {
    "how": "plain HTTP/1.1 or h2c to port 8080, which tcpcryptd (tcpcrypt/, RFC 8547 TCP-ENO + RFC 8548) intercepts "
           "at the client and at each origin's server; libcurl and Caddy are unchanged",
    "first_view": "before each load the client's tcpcryptd is restarted, its session cache empty, with resumption "
                  "as the cell says (tcpcryptd --no-resume when off): each load's first connection to a server host "
                  "pays a fresh key exchange; the servers' daemons resume when any cell does (they resume only what "
                  "a client offers)",
    "resumption": "RFC 8548 3.5 as tcpcryptd does it: one cached session secret per server host (not per origin: "
                  "origins on one server node share it), single-use, its successor cached once the connection that "
                  "used it has received an authenticated frame; connections opened at once (HTTP/1.1's pool) find "
                  "at most one, so one of them resumes and the others pay fresh key exchanges",
    "device": "the client's tcpcryptd pads its cryptography to the device's profile (--device-profile); its "
              "close records give each connection's device time and the key exchange's part (kx_device_ms)",
}
TCPCRYPT_PATH_FACTS = {
    "splits": f"splits TCP port {PORTS['tcpcrypt']} (a phone proxy's intercept:): the client's TCP connection ends at "
              "the proxy, which answers its SYN without TCP-ENO, so the client's tcpcryptd falls back to plain TCP "
              "(RFC 8547 4.6; series tcpcrypt: mode plain, reason eno-bpf: SynAckWithoutEno) and the proxy's own "
              "connection to the server is plain too: tcpcrypt_encrypted 0. With the client node's tcpcrypt: "
              "require its daemon resets each connection instead, before relaying a byte: the load fails, "
              "nothing of it in clear",
    "routes": f"routes TCP port {PORTS['tcpcrypt']}: the client's TCP connection reaches the server whole, so "
              "TCP-ENO and tcpcrypt run end to end (the same session ID at both daemons)",
}
VIEW_FACTS = {
    "first": "the client's first visit: an empty HTTP cache, no TLS sessions, no tcpcrypt secrets",
    "repeat": "as WebPageTest's repeat view: the same client (the page agent) loads the page once untimed, then "
              "again, measured; between the two its connections are closed (its libcurl multi handle: an app "
              "launched a second time has none) while what a browser keeps stays - its HTTP cache and, with "
              "resumption on, its TLS session tickets (the CURLSH share) and tcpcrypt's cached session secret (the "
              "client's tcpcryptd is kept running between the two loads). Only the second load's packets, device "
              "time and tcpcrypt records are counted",
}
EARLY_DATA_FACTS = {
    "how": "CURLSSLOPT_EARLYDATA on every handle with a session share: a resumed connection whose ticket allows "
           "early data sends its first request before the handshake completes; CURLINFO_EARLYDATA_SENT_T per "
           "connection (metrics early_data_connections, early_data_rejected), QUIC 0-RTT packets in the capture",
    "tls_over_tcp": "not possible with these servers: Caddy 2.6 (Go 1.19's crypto/tls) has no TLS 1.3 0-RTT - its "
                    "tickets carry no early_data extension, so libcurl (OpenSSL 3) never sends early data over "
                    "TCP (EARLYDATA_SENT_T 0); HTTP/1.1 and HTTP/2 resume in 1 round trip, not 0",
    "quic": "works: Caddy 2.6's HTTP/3 listener (quic-go, an early listener) issues tickets allowing early data "
            "and accepts 0-RTT; libcurl 8.23 over ngtcp2 1.25 sends the first request in 0-RTT packets",
    "tcpcrypt": "none: RFC 8548 has no early data (a resumed session skips the key exchange, its data still "
                "follows the TCP handshake)",
}
CACHE_FACTS = ("the page agent's HTTP cache (measure.http_cache, RFC 9111 as a browser applies it) fed by the "
               "servers' real responses: Cache-Control as each object's cache: says (default no-store), an ETag for "
               "what may be stored; fresh -> no request, stale with an ETag -> If-None-Match answered 304, "
               "no-store -> fetched again; no heuristic freshness")
DEVICE_REACH = {
    "tls": "libcurl's TLS (OpenSSL 3, bundled in pycurl's wheel) is interposed by the devicecpu library: key "
           "exchange, signatures, the chain's verification, record ciphers, and the client's platform cost per "
           "handshake (full or resumed) before its second flight; received plaintext pays data:encrypted per byte",
    "quic": "ngtcp2's OpenSSL crypto is interposed too: the handshake's primitives and the platform cost per "
            "handshake (charged when the handshake completes: ngtcp2 writes no second flight through a BIO), "
            "packet protection (AES-GCM, in the profile's table); header protection (AES-128-ECB) is not in the "
            "profiles and is charged as the time here x the device's cpu_factor (counter ~cipher:aes-128-ecb)",
    "beyond_reach": ["HTTP/3's received bytes pay no per-byte platform cost: libcurl reads QUIC datagrams with "
                     "recvmmsg, which the library does not interpose (and which of the seeds' rates, plain or "
                     "encrypted, a QUIC stack would pay, no seed says) - HTTP/3 on a device with per_byte costs is "
                     "favoured by that much",
                     "HTTP/2 and HTTP/3 framing, HPACK and QPACK, QUIC's loss recovery and libcurl's own work "
                     "compute at this machine's speed"],
    "counters": "series devicecpu lists every operation charged",
}
ENERGY_PHASES = ("per connection from libcurl's times on the agent's clock: TCP set-up (start -> connect) in "
                 "connect, the TLS handshake (connect -> appconnect; QUIC: start -> appconnect) in handshake, the "
                 "request to the response's end (pretransfer -> end) in data; overlapping connections: the most "
                 "demanding state any is in (model.span_phases), then the tail")
# A client whose TCP rides the chunked multipath transport (`multipath:`, or an interface policy by
# `chunked`, on its wearable node): docs/interface-selection.md.
TRANSPORT_ENERGY = ("over the multipath transport: each radio in its data state for the time its path carried "
                    "(the union of the load's chunk flights, both agents' records, from the load's start to its "
                    "end), a tail after each busy stretch; no handshake part (the radios carry chunks, not the "
                    "app's handshakes: energy_handshake_j stays empty)")
TRANSPORT_FACTS = {
    "how": "the client's TCP to every origin's server is REDIRECTed on the client to the watch agent; each "
           "connection rides both paths' own connections to the server agent on its own origin's node, which "
           "connects to the origin (nodes.multipath_endpoints)",
    "flows": "the load's connections are the app's, on the client's loopback where they end at the agent (the "
             "client's packets addressed to the agent, the replies from the origin's server, NAT undone): "
             "wire_bytes, tcp_syns and the TLS resumptions are theirs; what crossed each radio - chunks, framing, "
             "both paths - is series multipath",
    "not_carried": "HTTP/3 (QUIC over UDP: the REDIRECT takes TCP) and tcpcrypt (TCP-ENO would end at the watch's "
                   "agent): the plan refuses those cells",
}


def load_spans(objects: list[dict[str, Any]], https: bool, quic: bool,
               encrypted: bool | None = None) -> list[tuple[PowerState, float, float]]:
    """What the client's device does during a load, per object (libcurl's times from its start):
    the set-up and handshake of a connection it opened, then its request and response.
    `encrypted` (default: https): the transfers are encrypted (tcpcrypt's are, below libcurl,
    whose connect is then to the local tcpcryptd: the key exchange falls in the data span)."""
    data = PowerState.DATA_ENCRYPTED if (https if encrypted is None else encrypted) else PowerState.DATA
    spans = []
    for o in objects:
        if o.get("source") == "cache":
            continue   # no request: the radio does nothing for it
        t = o["start_s"]
        if o["num_connects"]:
            if quic:
                spans.append((PowerState.HANDSHAKE, t, t + o["appconnect_s"]))
            else:
                spans.append((PowerState.CONNECT, t, t + o["connect_s"]))
                if https:
                    spans.append((PowerState.HANDSHAKE, t + o["connect_s"], t + o["appconnect_s"]))
        spans.append((data, t + o.get("pretransfer_s", 0.0), o["end_s"]))
    return spans
