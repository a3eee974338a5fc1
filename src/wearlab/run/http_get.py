"""The http-get workload: one GET of one generated file from the client to the server,
directly (routed through the chosen first hop) or relayed by the phone's TCP proxy.

Each run is one fresh libcurl handle and one TCP connection, as in seed 000's Exp1, so every
HTTPS run pays a full TLS handshake with certificate validation.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from wearlab.measure.curl import CURL_TIMES, curl_argv
from wearlab.model.topology import Role
from wearlab.nodes.phone import relay_port
from wearlab.nodes.server import HTTP_PORT, HTTPS_PORTS, content_path


@dataclass(frozen=True)
class Target:
    """Where the client's TCP connection goes for one run."""

    url: str
    resolve: str            # curl --resolve: the server's name to its address
    connect_to: str | None  # curl --connect-to: set when the phone relays
    via: str                # first-hop node
    relayed: bool


def target_for(net, workload, params: dict[str, Any]) -> Target:
    server, client = workload.server, workload.client
    port = HTTP_PORT if params["protocol"] == "http" else HTTPS_PORTS[params["cert"]]
    url = f"{params['protocol']}://{server}:{port}{content_path(params['size'])}"
    server_ip = net.addresses.address_of(server)
    via = params["path"]
    relayed = net.topo.nodes[via].role == Role.PHONE
    connect_to = None
    if relayed:
        phone_ip = net.addresses.interface_to(via, client).ip
        connect_to = f"{server}:{port}:{phone_ip}:{relay_port(port)}"
    return Target(url, f"{server}:{port}:{server_ip}", connect_to, via, relayed)


class FetchAgent:
    """wearlab.measure.fetch_agent running in the client's namespace."""

    def __init__(self, net, client: str, timeout: float = 30):
        self.net, self.client = net, client
        self.route_via: str | None = None
        self.proc = net.popen(client, [sys.executable, "-m", "wearlab.measure.fetch_agent"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, bufsize=1)
        hello = self._read(timeout)
        if not hello.get("ready"):
            raise RuntimeError(f"fetch agent on {client} did not start: {hello}")
        self.libcurl = hello.get("libcurl")

    def _read(self, timeout: float) -> dict[str, Any]:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else ""
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else "no answer"
            raise RuntimeError(f"fetch agent on {self.client}: {err.strip()[-300:]}")
        return json.loads(line)

    def get(self, timeout_s: float, **req) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({**req, "timeout_s": timeout_s}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout_s + 10)

    def select_route(self, server: str, via: str) -> None:
        """Send the client's packets for the server through `via` (only when it changes)."""
        if self.route_via == via:
            return
        server_ip = self.net.addresses.address_of(server)
        hop = self.net.addresses.interface_to(self.client, via)
        self.net.sh(self.client, f"ip route replace {server_ip}/32 via {hop.peer_ip} dev {hop.name}")
        self.route_via = via

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _cipher(params: dict[str, Any]) -> str | None:
    c = params.get("cipher") or ""
    return None if params["protocol"] != "https" or c in ("", "default") else c


def equivalent_curl(net, workload, params: dict[str, Any], *, cacert: str, timeout_s: float) -> list[str]:
    """The curl command line that makes the same request as the fetch agent (to redo one run by
    hand in the client's namespace)."""
    t = target_for(net, workload, params)
    https = params["protocol"] == "https"
    return curl_argv(t.url, resolve=t.resolve, connect_to=t.connect_to,
                     tls_version=params["tls_version"] if https else None, cipher=_cipher(params),
                     cacert=cacert if https else None, timeout_s=timeout_s)


def fetch(net, agent: FetchAgent, workload, params: dict[str, Any], *, cacert: str,
          timeout_s: float) -> dict[str, Any]:
    """Run one GET; return its metrics (raises RuntimeError with curl's own words on failure)."""
    t = target_for(net, workload, params)
    if not t.relayed:
        agent.select_route(workload.server, t.via)
    https = params["protocol"] == "https"
    m = agent.get(timeout_s, url=t.url, resolve=t.resolve, connect_to=t.connect_to,
                  tls_version=params["tls_version"] if https else None, cipher=_cipher(params),
                  cacert=cacert if https else None)
    if m.get("exitcode") != 0 or m.get("http_code") != 200:
        msg = m.get("errormsg") or f"HTTP status {m.get('http_code')}"
        raise RuntimeError(f"curl error {m.get('exitcode')}: {msg}")
    if m.get("size_download") != params["size"]:
        raise RuntimeError(f"downloaded {m.get('size_download')} bytes, expected {params['size']}")
    out = {k: m[k] for k in CURL_TIMES}
    out["tls_handshake_s"] = (m["time_appconnect"] - m["time_connect"]) if https else 0.0
    out.update(http_code=m["http_code"], size_download=m["size_download"],
               speed_download_bps=round(m["speed_download"] * 8),
               local_ip=m["local_ip"], local_port=m["local_port"],
               remote_ip=m["remote_ip"], remote_port=m["remote_port"])
    return out
