"""The `caddy` kind: Caddy (Debian's 2.6) serving a page's objects - generated bodies of each
object's size at its path, per origin host, from memory - over HTTP/1.1 and h2c on port 80 and
over HTTP/1.1, HTTP/2 and HTTP/3 (QUIC, UDP) with TLS on port 443: 1.3, or 1.2 and 1.3, or 1.2
(over TCP; QUIC is always 1.3), from the lowest to the highest version the experiment's cells pin
(its PageContent needs say which) - one server for the whole experiment, each cell's client
pinning its own. The same plain server
listens on 8080 too, the port the node's tcpcryptd intercepts when a workload asks for tcpcrypt
(nodes/tcpcrypt.py; as nginx: Caddy itself is unchanged, the daemon encrypts beside it).

Why Caddy: it is the one server Debian ships that speaks all three HTTP versions (bookworm's
nginx 1.22 has no HTTP/3), so a page's HTTP/1.1, /2 and /3 cells are compared on one server
program, one configuration and one TLS library (Go's crypto/tls; quic-go for QUIC), and the
differences between cells are the protocols', not the servers'.

Kept off the Internet and out of the host: automatic HTTPS off (no ACME, no redirects, no
certificate management); the certificates given explicitly (one chain per node, made fresh per
experiment by nodes.certs, its names the hosts of the origins the node serves), without an OCSP
responder URL, since Caddy 2.6 staples OCSP for every certificate it loads and would try to reach
the responder (so its chain is ~45 bytes per certificate shorter than nginx's); no pki app, so
Caddy's local CA is never made and has no trust to install (what `skip_install_trust` guards);
the admin endpoint disabled and the configuration not persisted; storage, logs, HOME and the XDG
directories in the node's work directory. Caddy 2 has no telemetry. It listens in its node's
namespace only.

An object with a server time (the origin's time before its first byte) is proxied first to an
application stand-in on the node's loopback (nodes.origin_app, which says why), started only when
some object has one; then the same static response.

Caching as the page says: each response carries the Cache-Control of its object's `cache:`
(model.page: no-store by default, as before caching existed; no-cache; max-age=N), and an object
that may be stored carries an ETag (its body's seed and size: the same body, the same tag), and a
request with that tag in If-None-Match is answered 304 Not Modified without the body (RFC 9110
13.1.2, 15.4.5: the 304 repeats ETag and Cache-Control) - a route matching the header ahead of
the object's own, as Caddy's file server would do from a file's modification time (these bodies
are in memory). No Last-Modified (no file, no time worth replaying). No compression. Session
tickets are on - TLS 1.3's (Go's crypto/tls sends one NewSessionTicket with its first flight
when it asks for no client certificate) and TLS 1.2's (RFC 5077: one in each full handshake) -,
so a client that keeps its sessions can resume; libcurl without a session cache (http-get,
page-load with resumption off) never offers one. TLS 1.2 with Caddy's default suites: ECDHE
only, signed with the node's certificate (ECDHE-RSA or ECDHE-ECDSA, AES-GCM or ChaCha20).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from wearlab.model import params as P
from wearlab.model import ports
from wearlab.model.needs import PageContent, Service
from wearlab.model.params import Param, ParamSet
from wearlab.model.roles import Role
from wearlab.model.tls import TLS_VERSIONS as ALL_TLS_VERSIONS
from wearlab.nodes.certs import make_pki
from wearlab.nodes.node_kind import NodeKind
from wearlab.nodes.origin_app import SERVER_TIME_HEADER
from wearlab.nodes.software import KindError, wait_listening
from wearlab.plan.seeds import file_seed

HTTP_PORT = ports.HTTP
TCPCRYPT_PORT = ports.HTTP_TCPCRYPT   # plain HTTP again, behind the node's tcpcryptd
HTTPS_PORT = ports.HTTPS["rsa2048"]
APP_PORT = ports.ORIGIN_APP   # the application stand-in for objects with a server time (loopback)
# The chains it may send (nodes.certs.CERT_CHAINS): a leaf and one intermediate, as most deployed
# servers. An RSA-2048 chain (~2.6 KB) brings QUIC's first server flight close to its
# anti-amplification limit (3 x the client's 1200-byte Initial, RFC 9000 8.1); ECDSA's (~1.4 KB)
# stays far below it.
CHAINS = ("rsa2048", "ecdsa-p256")
# The TLS versions Caddy 2.6 serves (its protocol_min/protocol_max take tls1.2 and tls1.3 only).
TLS_VERSIONS = tuple(v for v in ALL_TLS_VERSIONS if v in ("1.2", "1.3"))


# Bodies are text of 64 symbols, seeded: nothing on the path compresses (no `encode` handler, TLS
# 1.3 has no compression), so they cost the wire what random bytes would.
_SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def body(seed: int, size: int) -> str:
    """An object's body: `size` bytes fixed by the experiment's seed and the size alone
    (plan.seeds.file_seed), as nginx's files."""
    return "".join(random.Random(file_seed(seed, size)).choices(_SYMBOLS, k=size))


def etag(seed: int, size: int) -> str:
    """An object's entity tag: its body is fixed by the seed and its size alone (body())."""
    return f'"{size:x}-{file_seed(seed, size):x}"'


def caddy_config(d: Path, content: list[PageContent], cert: Path, key: Path, *, http_listen: list[str],
                 https_listen: str, seed: int, app: str = f"127.0.0.1:{APP_PORT}",
                 tls_versions: tuple[str, ...] = ("1.3",)) -> dict[str, Any]:
    """Caddy's JSON configuration: one route per (host, path) answering its body from memory
    (`static_response`, with its Content-Length): no file system calls on a response's path. An
    object with a server time goes first to the origin's application (nodes.origin_app, at `app`),
    which answers once that time has passed, and then to the same `static_response`; an object
    without one never leaves the static route. An object that may be stored gets an ETag, and a
    route before its own that answers a request carrying that tag in If-None-Match with 304 and no
    body at once, not after the server time (ASSUMPTION: an origin that tags its responses checks the
    tag before it renders). TLS: the lowest to the highest of `tls_versions`; TLS 1.2 with Caddy's
    default suites (ECDHE only, signed with the node's certificate) and session tickets."""
    routes = []
    for host, path, size, ctype, server_s, cache in _objects(content):
        bare, _, query = path.partition("?")
        match: dict[str, Any] = {"host": [host], "path": [bare]}
        if query:
            match["query"] = {k: v for k, v in parse_qs(query, keep_blank_values=True).items()}
        headers = {"Content-Type": [ctype], "Cache-Control": [cache], "Content-Length": [str(size)]}
        if cache != "no-store":
            tag = etag(seed, size)
            headers["ETag"] = [tag]
            routes.append({"match": [match | {"header": {"If-None-Match": [tag]}}], "terminal": True, "handle": [
                {"handler": "static_response", "status_code": 304,
                 "headers": {"ETag": [tag], "Cache-Control": [cache]}}]})
        respond = {"handler": "static_response", "status_code": 200, "body": body(seed, size), "headers": headers}
        routes.append({"match": [match], "terminal": True,
                       "handle": [_after_server_time(respond, server_s, app) if server_s > 0 else respond]})
    return {
        "admin": {"disabled": True, "config": {"persist": False}},
        "storage": {"module": "file_system", "root": str(d / "data")},
        "logging": {"logs": {"default": {"level": "WARN", "writer": {"output": "file", "filename": str(d / "caddy.log")}}}},
        "apps": {
            "http": {"servers": {
                "plain": {"listen": http_listen, "protocols": ["h1", "h2c"], "routes": routes,
                          "automatic_https": {"disable": True}},
                "tls": {"listen": [https_listen], "protocols": ["h1", "h2", "h3"], "routes": routes,
                        "automatic_https": {"disable": True},
                        "tls_connection_policies": [{"protocol_min": f"tls{min(tls_versions)}",
                                                     "protocol_max": f"tls{max(tls_versions)}",
                                                     "certificate_selection": {"any_tag": ["wearlab"]}}]},
            }},
            "tls": {"certificates": {"load_files": [{"certificate": str(cert), "key": str(key), "tags": ["wearlab"]}]},
                    # Tickets on, as a real site's server: a client that keeps sessions (page-load's
                    # `resumption: on`) resumes with them; one that does not pays a full handshake.
                    "session_tickets": {"disabled": False}},
        },
    }


def _objects(content: list[PageContent]) -> list[tuple[str, str, int, str, float, str]]:
    return sorted({o for n in content for o in n.served})


def _after_server_time(respond: dict[str, Any], server_s: float, app: str) -> dict[str, Any]:
    """`respond` once the application has taken `server_s`: Caddy proxies the request to it (the
    wait in a header), and on its 204 serves `respond` (handle_response: the upstream's answer is
    dropped, its headers not copied); any other answer, or none, reaches the client as an error."""
    return {"handler": "reverse_proxy", "upstreams": [{"dial": app}],
            "headers": {"request": {"set": {SERVER_TIME_HEADER: [f"{server_s:.6f}"]}}},
            "handle_response": [{"match": {"status_code": [204]}, "routes": [{"handle": [respond]}]}]}


def caddy_env(d: Path) -> dict[str, str]:
    """Caddy's home, config and data directories: the node's work directory, never the user's."""
    return {"HOME": str(d), "XDG_CONFIG_HOME": str(d / "config"), "XDG_DATA_HOME": str(d / "data"),
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


class Caddy(NodeKind):
    name = "caddy"
    doc = ("Caddy: a page's objects over HTTP/1.1 and h2c (80) and HTTP/1.1, /2, /3 with TLS 1.3 or 1.2 (443, "
           "QUIC on UDP 443), a certificate per node for the origins it serves; Cache-Control and ETag as the "
           "page says, 304 to a matching If-None-Match")
    roles = frozenset({Role.SERVER})
    SERVICES = (Service("http", HTTP_PORT), Service("http", TCPCRYPT_PORT, (("transport", "tcpcrypt"),)),
                Service("https", HTTPS_PORT))
    ACCEPTS = (PageContent,)
    options = ParamSet((
        Param("cert", P.choice("cert", CHAINS), "rsa2048",
              "the certificate chain it sends: rsa2048 or ecdsa-p256 (leaf + one intermediate)"),
    ))

    @classmethod
    def ports(cls, settings, needs) -> dict[int, str]:
        app = any(isinstance(n, PageContent) and n.server_time for n in needs)
        return {HTTP_PORT: "caddy http (h1, h2c)", TCPCRYPT_PORT: "caddy http behind tcpcryptd (h1, h2c)",
                HTTPS_PORT: "caddy https (h1, h2; h3 on UDP)"} | (
                    {APP_PORT: "the application stand-in: objects' server time (loopback)"} if app else {})

    def start(self) -> None:
        d = self.workdir
        content = [n for n in self.needs if isinstance(n, PageContent)]
        # Objects with a server time: the application stand-in first, so that it accepts before
        # Caddy can proxy a request to it (nodes.origin_app says why this and not another way).
        self.app = None
        if any(n.server_time for n in content):
            self.app_log = (d / "origin-app.out").open("w")
            self.app = self.net.popen(self.node, [sys.executable, "-m", "wearlab.nodes.origin_app",
                                                  "--listen", f"127.0.0.1:{APP_PORT}"],
                                      stdin=subprocess.DEVNULL, stdout=self.app_log, stderr=subprocess.STDOUT)
        hosts = tuple(dict.fromkeys(h for n in content for h in n.hosts)) or (self.node,)
        chain = self.settings["cert"]
        self.ca, certs = make_pki(d / "pki", hosts[0], kinds=(chain,), also_names=hosts[1:], ocsp=False)
        conf = d / "caddy.json"
        conf.write_text(json.dumps(caddy_config(d, content, certs[chain].cert, certs[chain].key,
                                                http_listen=[f":{HTTP_PORT}", f":{TCPCRYPT_PORT}"], https_listen=f":{HTTPS_PORT}",
                                                seed=self.seed,
                                                tls_versions=tuple(sorted({v for n in content for v in n.tls_versions}))
                                                or ("1.3",))))
        self.log = (d / "caddy.out").open("w")
        self.proc = self.net.popen(self.node, ["caddy", "run", "--config", str(conf)], env=caddy_env(d),
                                   stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def ready(self, timeout: float = 15.0) -> None:
        if self.app is not None:
            try:
                wait_listening(self.net, self.node, {APP_PORT}, "caddy's application stand-in (server_time)", timeout,
                               proc=self.app)
            except KindError as e:
                self.app_log.flush()
                raise KindError(f"{e}: {(self.workdir / 'origin-app.out').read_text(errors='replace')[-600:]}") from None
        try:
            wait_listening(self.net, self.node, {HTTP_PORT, TCPCRYPT_PORT, HTTPS_PORT}, "caddy", timeout, proc=self.proc)
        except KindError as e:
            raise KindError(f"{e}: {self._said()}") from None
        # QUIC's UDP socket opens with the TLS server's listener; wait for it too.
        deadline = time.monotonic() + timeout
        while not self._udp_listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise KindError(f"caddy on {self.node} does not listen on UDP {HTTPS_PORT} (HTTP/3): {self._said()}")
            time.sleep(0.05)

    def _said(self) -> str:
        """The end of what Caddy wrote (its output, then its log), for an error message."""
        self.log.flush()
        text = "".join(f.read_text(errors="replace") for f in (self.workdir / "caddy.out", self.workdir / "caddy.log")
                       if f.is_file())
        return text.strip()[-600:] or "it wrote nothing"

    def _udp_listening(self) -> bool:
        out = self.net.run(self.node, ["ss", "-Hlun"]).stdout
        return any(l.split()[3].endswith(f":{HTTPS_PORT}") for l in out.splitlines() if l.strip())

    def stop(self) -> None:
        # Caddy first (SIGTERM: it shuts down gracefully), then the application behind it.
        for proc in (getattr(self, "proc", None), getattr(self, "app", None)):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for log in (getattr(self, "log", None), getattr(self, "app_log", None)):
            if log is not None:
                log.close()

    def version(self) -> str:
        return self.net.run(self.node, ["caddy", "version"]).stdout.strip()
