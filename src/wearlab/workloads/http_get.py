"""The `http-get` workload: one GET of one generated file from the client to the server, through
the chosen first hop (a phone proxies it if its kind intercepts; an AP routes it).

Each run is one fresh libcurl handle and one TCP connection, as in seed 000's Exp1, so every
HTTPS run pays a full TLS handshake with certificate validation. Phase boundaries are read from
the client's capture (`wire_*`: the network's timing) and from libcurl's own clock (`time_*`:
the app's view, which adds the client's CPU time); bytes per phase from the capture.

A wearable whose TCP rides the multipath transport (`multipath:`, or an `interface_policy:` by
`chunked`) fetches through it: its connection ends at the transport's agent on the watch, so the
capture that times it is the watch's loopback - `wire_*` and `bytes_*` are the app's connection
as the agent carried it, end to end; what crossed each radio (chunks, framing, both paths) is
series multipath. Its energy is each radio's, for the time its path carried (run_energy:
RunEnergy.over_transport), without a handshake part (energy_handshake_j empty); a device that
pays per byte received stays in its data state until its app has read the last byte, as on the
direct route (energy_model.until_read).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from wearlab.errors import Problem
from wearlab.measure.agents import FetchAgent
from wearlab.measure.capture import LOOPBACK
from wearlab.measure.curl import CURL_TIMES, curl_argv, tls_options
from wearlab.measure.phases import PHASES
from wearlab.measure.tls_records import TCPCRYPT
from wearlab.nodes.multipath_endpoints import APP_REDIRECT
from wearlab.model import params as P
from wearlab.model.columns import Metric, Ratio, Series
from wearlab.model.declarations import PlanView, WorkloadFields
from wearlab.model.needs import Files, Need, Relay, Tcpcrypt
from wearlab.model.params import Param, ParamSet
from wearlab.model.tls import TLS13_SUITES, tls_version
from wearlab.model.quantities import format_size
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted
from wearlab.nodes.certs import CERT_KINDS, leaf_key
from wearlab.nodes.devicecpu import DeviceProcess, RunCounters, node_cpu
from wearlab.nodes.nginx import content_path
from wearlab.nodes.tcpcrypt import RunAccount, encrypted, fallback_reason
from wearlab.workloads.workload import Outcome, Workload
from wearlab.workloads.run_energy import ENERGY_SERIES, RunEnergy, energy_metrics
from wearlab.workloads.paths import PATH, check_nodes


_tls_version = tls_version()


def _cipher(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"cipher must be an OpenSSL cipher name or 'default', got {value!r}")
    value = value.strip()
    if value.upper().startswith("TLS_") and value not in TLS13_SUITES:
        raise ValueError(f"unknown TLS 1.3 suite '{value}'{did_you_mean(value, TLS13_SUITES)} "
                         f"(suites: {', '.join(TLS13_SUITES)})")
    if not all(c.isalnum() or c in "_-:+!@=." for c in value):
        raise ValueError(f"'{value}' does not look like an OpenSSL cipher name (e.g. ECDHE-RSA-AES128-SHA)")
    return value


def _https(cell: dict[str, Any]) -> bool:
    return cell.get("protocol") == "https"


class HttpGetFields(WorkloadFields):
    client: str
    server: str


class HttpGet(Workload):
    name = "http-get"
    client_pays_per_byte = True
    rides_transport = True
    doc = "one GET of a generated file per run, timed by phase (TCP, TLS, transfer, close)"
    Fields = HttpGetFields
    params = ParamSet((
        Param("protocol", P.choice("protocol", ("http", "https", "tcpcrypt"), lower=True), "https",
              "http, https, or tcpcrypt (HTTP over wearlab's tcpcryptd on client and server)"),
        Param("size", P.size, 100_000, "file size (KB = 1000 bytes)", to_doc=format_size,
              shown=lambda v: format_size(int(v))),
        PATH,
        Param("tls_version", _tls_version, "1.3", "TLS version pinned (1.0-1.3)", applies=_https,
              applies_doc="protocol is https"),
        Param("cipher", _cipher, "default", "an OpenSSL cipher, a TLS 1.3 suite, or default", applies=_https,
              applies_doc="protocol is https"),
        Param("cert", P.choice("cert", tuple(CERT_KINDS)), "rsa2048",
              "the chain the server sends: key types leaf to root (nodes/certs.py; rsa2048 = leaf + intermediate)",
              applies=_https, applies_doc="protocol is https"),
    ))
    metrics = (
        Metric("wire_connect_s", "s", label="connect", summarised=True,
               doc="SYN departure -> SYN-ACK arrival at the client (capture)"),
        Metric("wire_tls_handshake_s", "s", label="TLS hs", summarised=True,
               doc="TCP connected -> request sent (capture); 0 for plain HTTP"),
        Metric("wire_pretransfer_s", "s", label="request", doc="SYN departure -> request departure"),
        Metric("wire_starttransfer_s", "s", label="first byte", doc="SYN departure -> first response byte"),
        Metric("wire_total_s", "s", label="total", summarised=True, doc="SYN departure -> last response byte"),
        *(Metric(t, "s", doc="libcurl's own clock (includes the client's CPU time)") for t in CURL_TIMES),
        Metric("tls_handshake_s", "s", doc="libcurl: appconnect - connect"),
        Metric("http_code", "count", better="none", doc="the response's HTTP status (200 when the fetch worked)"),
        Metric("size_download", "B", better="none", doc="body bytes libcurl received (the file's size when complete)"),
        Metric("speed_download_bps", "bit/s", better="higher", doc="libcurl: body bytes / total time, in bit/s"),
        Metric("data_rate_bps", "bit/s", label="data rate", better="higher",
               doc="the data phase's rate as seed 000 gives it: its frame bytes down (bytes_down_data) x 8 over the "
                   "time from the request leaving (capture) to the application's last read (libcurl's time_total, "
                   "placed on the capture's clock by the connect both saw)"),
        *(Metric(f"bytes_{d}_{p}", "B", doc=f"frame bytes {d} in the {p} phase") for p in PHASES for d in ("up", "down")),
        Metric("bytes_up_total", "B", label="bytes up", summarised=True,
               doc="frame bytes client -> server over the whole connection (capture)"),
        Metric("bytes_down_total", "B", label="bytes down", summarised=True,
               doc="frame bytes server -> client over the whole connection (capture)"),
        Metric("bytes_total", "B", label="bytes", doc="bytes_up_total + bytes_down_total"),
        Metric("packets_up_total", "packets", doc="frames client -> server over the whole connection (capture)"),
        Metric("packets_down_total", "packets", doc="frames server -> client over the whole connection (capture)"),
        Metric("local_port", "count", better="none", doc="the client's TCP source port (finds the run in the capture)"),
        Metric("tcpcrypt_encrypted", "count", better="none",
               doc="tcpcrypt cells: 1 when the connection ran tcpcrypt, closed cleanly and both daemons report the "
                   "same session ID (RFC 8548 3.4); 0 otherwise - a fallback to plain TCP, a reset (series "
                   "tcpcrypt: state and reason)"),
        Metric("tcpcrypt_handshake_s", "s", doc="tcpcrypt cells: the client daemon's connect -> keys ready"),
        Metric("tcpcrypt_cpu_s", "s", label="tcpcrypt CPU", summarised=True,
               doc="tcpcrypt cells: CPU time of the client's and the server's tcpcryptd during the run "
                   "(the kernel's accounting: 10 ms ticks in the UML guest, whose HZ is 100)"),
        Metric("device_cpu_handshake_s", "s", label="device CPU hs",
               doc="a client with a device: the device's time for the client's computation inside the TLS "
                   "handshake (its primitives and the platform's handshake cost, as the devicecpu library padded them)"),
        Metric("device_cpu_other_s", "s", label="device CPU other",
               doc="a client with a device: the device's time for the client's cryptography outside the "
                   "handshake (records' ciphers and MACs)"),
        Metric("device_hs_overflow", "count",
               doc="a client with a device: TLS handshakes the devicecpu library had no room to track (more "
                   "than 1024 at once in a process), charged the platform's cost when they completed instead "
                   "of before the client's second flight; 0 normally"),
        *energy_metrics(handshake=True),
    )
    series = (ENERGY_SERIES, Series("tcpcrypt", ("node", "mode", "state", "reason", "tep", "aead", "session_id",
                                  "resumed", "handshake_ms", "plaintext_sent",
                                  "ciphertext_sent", "handshake_bytes_sent", "frames_sent", "eno_syn", "eno_synack",
                                  "device_ms"),
                     doc="tcpcrypt cells: each daemon's record of the run's connection: mode tcpcrypt, plain (ENO fell "
                         "back; reason says why) or none (reset before any byte: its ENO record missing, or "
                         "encryption required); state closed or aborted; the session ID both ends must share; "
                         "resumed: the session resumed a ticket (RFC 8548 3.5; a node's tcpcrypt_resumption) "
                         "(device_ms: on a node with a device, the device's time for the connection's cryptography)"),)
    series += (Series("devicecpu", ("node", "op", "calls", "bytes", "host_s", "device_s"),
                      doc="a client with a device: what the devicecpu library charged in the run, per operation "
                          "(calls, bytes, time here, time on the device; platform:* the platform's costs, "
                          "phase:* the totals inside and outside the handshake)"),)
    headline = ("wire_total_s",)
    ratios = (Ratio("protocol", "https", "http", ("wire_total_s", "bytes_total", "energy_j"),
                    ignoring=("tls_version", "cipher", "cert"), title="HTTPS / HTTP (ratio of medians)"),
              Ratio("protocol", "tcpcrypt", "http", ("wire_total_s", "bytes_total", "energy_j"),
                    ignoring=("tls_version", "cipher", "cert"), title="tcpcrypt / HTTP (ratio of medians)"))

    # -- model time --------------------------------------------------------------------------
    @classmethod
    def endpoints(cls, fields: HttpGetFields) -> dict[str, str]:
        return {"client": fields.client, "server": fields.server}

    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems = check_nodes(fields, topo, fixed, matrix, where, src)
        return problems + _check_tls(fixed, matrix, where, src)

    # -- run time ----------------------------------------------------------------------------
    def target(self, cell: dict[str, Any]) -> tuple[str, str, int]:
        """(url, curl --resolve entry, port) of a cell's request."""
        f = self.fields
        service = _service(self.ctx.nodes[f.server], cell)
        scheme = "https" if cell["protocol"] == "https" else "http"
        url = f"{scheme}://{f.server}:{service.port}{content_path(cell['size'])}"
        return url, f"{f.server}:{service.port}:{self.ctx.address(f.server)}", service.port

    @classmethod
    def captured(cls, plan) -> set[str]:
        return {plan.fields.client}   # its fetches are timed and counted on the client's interfaces

    @classmethod
    def needs(cls, fields: HttpGetFields, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        f = fields
        out: list[Need] = [Files(f.server, tuple(sorted({c["size"] for c in cells})))]
        for hop in sorted({c["path"] for c in cells}):
            for c in cells:
                need = Relay(hop, f.server, plan.address_of(f.server), _service(plan.kind_of(f.server, c), c).port)
                if c["path"] == hop and need not in out:
                    out.append(need)
        crypt = {_service(plan.kind_of(f.server, c), c).port for c in cells if c["protocol"] == "tcpcrypt"}
        for port in sorted(crypt):
            out += [Tcpcrypt(f.client, port, "outbound"), Tcpcrypt(f.server, port, "inbound")]
        return out

    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        client = self.fields.client
        device = self.ctx.plan.device_of(client)
        # On a node with a device the agent computes in the device's time (nodes.devicecpu).
        self.device = DeviceProcess(device, self.ctx.workdir("devicecpu"), f"{client}-fetch-agent",
                                    node=node_cpu(self.ctx.net.workdir, client, device), per_byte=self.client_pays_per_byte,
                                    node_name=client) if device else None
        self.agent = FetchAgent(self.ctx.net, client, env=self.device.env() if self.device else None)
        self.capture = self.ctx.capture(client)
        self.energy = RunEnergy(self.ctx.plan, client, self.fields.server)
        return {"client": {"kind": "fetch agent (pycurl, persistent process, fresh handle per run)",
                           "libcurl": self.agent.libcurl,
                           "tls_groups": tls_options(None, None, None).groups,
                           "device": self.device.facts() if self.device else None},
                "energy": self.energy.experiment_facts(sorted({c["path"] for c in cells}),
                                                       over_transport=self.ctx.carried_in_any_cell(client)),
                "equivalent_curl": self.equivalent_curl(cells)}

    def warm_up(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        """One unrecorded fetch of the smallest size per (protocol, path, TLS settings): the first
        use of a code path (library initialisation, page faults, a route) is not the link's cost."""
        smallest = min(c["size"] for c in cells)
        seen, failures = set(), []
        for c in cells:
            key = tuple((k, v) for k, v in c.items() if k != "size")
            if key in seen:
                continue
            seen.add(key)
            try:
                self._fetch({**c, "size": smallest})
            except Exception as e:  # noqa: BLE001 - the measured run will record the failure
                failures.append(f"{dict(key)}: {e}")
        return {"fetches": len(seen), "size": smallest, "recorded": False, "failures": failures}

    def equivalent_curl(self, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The curl command line per cell that makes the same request (same TLS options, key-share
        groups included), to redo one run by hand in the client's namespace after the route."""
        out = []
        for c in cells:
            url, resolve, _ = self.target(c)
            https = c["protocol"] == "https"
            via = self.ctx.net.addresses.interface_to(self.fields.client, c["path"])
            out.append({"cell": c, "client": self.fields.client,
                        "route": f"ip route replace {self.ctx.address(self.fields.server)}/32 via {via.peer_ip}",
                        "argv": curl_argv(url, resolve=resolve, tls_version=c["tls_version"] if https else None,
                                          cipher=_cipher_or_none(c), cacert=str(self._cacert()) if https else None,
                                          timeout_s=self.ctx.timeout_s)})
        return out

    def _cacert(self):
        return self.ctx.nodes[self.fields.server].ca

    def _fetch(self, cell: dict[str, Any]) -> dict[str, Any]:
        """One GET; its metrics (RuntimeError with curl's own words on failure)."""
        self.ctx.select_route(self.fields.client, self.fields.server, cell["path"])
        url, resolve, _ = self.target(cell)
        https = cell["protocol"] == "https"
        tls = tls_options(cell["tls_version"], _cipher_or_none(cell), str(self._cacert())) if https else None
        m = self.agent.get(self.ctx.timeout_s, url=url, resolve=resolve, tls=tls.as_dict() if tls else None)
        if m.get("exitcode") != 0 or m.get("http_code") != 200:
            msg = m.get("errormsg") or f"HTTP status {m.get('http_code')}"
            raise RuntimeError(f"curl error {m.get('exitcode')}: {msg}")
        if m.get("size_download") != cell["size"]:
            raise RuntimeError(f"downloaded {m.get('size_download')} bytes, expected {cell['size']}")
        return m

    def _daemons(self) -> dict[str, Any]:
        return {n: self.ctx.nodes[n].tcpcrypt for n in (self.fields.client, self.fields.server)
                if self.ctx.nodes[n].tcpcrypt is not None}

    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        crypt = self._daemons() if cell["protocol"] == "tcpcrypt" else {}
        account = RunAccount(crypt) if crypt else None
        device = RunCounters(self.device) if self.device else None
        t0 = self.ctx.run_start_ns or time.time_ns()
        m = self._fetch(cell)
        fetched_ns = time.time_ns()
        transport = self.ctx.transport(self.fields.client)
        https = cell["protocol"] == "https"
        series: dict[str, list[dict[str, Any]]] = {}
        extra: dict[str, Any] = {}
        if account:
            records = _close_records(account, self.fields.client, m["local_port"])
            extra["tcpcrypt_cpu_s"] = account.cpu_s()
            mine = records.get(self.fields.client, {})
            extra["tcpcrypt_encrypted"] = int(encrypted(mine, records.get(self.fields.server)))
            if mine.get("handshake_ms") is not None:
                extra["tcpcrypt_handshake_s"] = mine["handshake_ms"] / 1000
            series["tcpcrypt"] = [_series_row(n, r) for n, r in records.items()]
        # Over the multipath transport each radio's energy is what its path carried: the chunks'
        # flights to the fetch's end (read before the next run adds its own); a device that pays
        # per byte received stays in its data state until its app has read the last byte - when
        # the fetch agent answers, within the agent's few ms of reply.
        per_byte = bool(self.device and self.device.per_byte)
        carried = (self.energy.over_transport(self.ctx.nodes[self.fields.client], t0,
                                              encrypted=https or bool(extra.get("tcpcrypt_encrypted")),
                                              end_ns=fetched_ns, read_ns=fetched_ns if per_byte else None)
                   if transport is not None else None)
        row = {k: m[k] for k in CURL_TIMES}
        row["tls_handshake_s"] = (m["time_appconnect"] - m["time_connect"]) if https else None  # no TLS, no phase
        row.update(http_code=m["http_code"], size_download=m["size_download"],
                   speed_download_bps=round(m["speed_download"] * 8), local_port=m["local_port"])
        row.update(extra)
        if device:
            row.update(device.metrics(), device_hs_overflow=device.overflow())
            series["devicecpu"] = device.rows()
        # The app's connection: on the interface its address is on, or - its TCP redirected into the
        # multipath transport's agent on the node - on the loopback (the paths' own bytes are in
        # series multipath).
        intf = (LOOPBACK if transport is not None else
                next(i.name for i in self.ctx.net.addresses.interfaces[self.fields.client] if i.ip == m["local_ip"]))
        client = (m["local_ip"], m["local_port"])
        if crypt:
            # On the wire the connection is the client daemon's own (curl's ends at the daemon).
            ip, _, port = str(records.get(self.fields.client, {}).get("local", "")).rpartition(":")
            if not port.isdigit():
                raise RuntimeError(f"tcpcryptd on {self.fields.client} has no record of the connection")
            client = (ip, int(port))
        self.wire_client = client  # the connection's client end on the wire (the characterizer's flows)
        tls_version = cell["tls_version"] if https else (TCPCRYPT if crypt else None)

        def finish() -> dict[str, Any]:
            # The connection's teardown is on the wire by the time the next run is done.
            pb = self.capture.connection_bytes(intf, client, tls_version,
                                               redirected_to=APP_REDIRECT if transport is not None else None)
            if pb is None:
                raise RuntimeError("the connection is missing from the packet capture")
            values = pb.as_row()
            if values["bytes_down_total"] < cell["size"]:
                # Fewer bytes than the file itself: the capture dropped packets. Never report that.
                raise RuntimeError(f"the capture holds {values['bytes_down_total']} bytes of a {cell['size']}-byte "
                                   "response: it dropped packets")
            values["bytes_total"] = values["bytes_up_total"] + values["bytes_down_total"]
            # The application's last read on the capture's clock: libcurl's connect is the SYN-ACK's
            # arrival (wire_connect_s) - or, through tcpcryptd, the local connect, when the daemon's
            # SYN leaves. A device that pays per byte received reads the last receive buffer's worth
            # after the wire delivered it: its data state lasts to then.
            app_done = None
            if values.get("wire_connect_s") is not None:
                app_done = (0.0 if crypt else values["wire_connect_s"]) + m["time_total"] - m["time_connect"]
                if values.get("wire_pretransfer_s") is not None and app_done > values["wire_pretransfer_s"]:
                    values["data_rate_bps"] = round(values["bytes_down_data"] * 8 / (app_done - values["wire_pretransfer_s"]))
            if carried is not None:
                values.update(carried[0])
                return Outcome(row=values, series={"energy": carried[1]} if carried[1] else {})
            erow, erows = self.energy.transaction(cell["path"], {**values, "app_done_s": app_done if per_byte else None},
                                                  encrypted=https or bool(extra.get("tcpcrypt_encrypted")))
            values.update(erow)
            return Outcome(row=values, series={"energy": erows} if erows else {})

        return Outcome(row=row, series=series, finish=finish)

    def stop(self) -> None:
        if getattr(self, "agent", None) is not None:
            self.agent.stop()


def _service(server_kind, cell: dict[str, Any]):
    if cell["protocol"] == "https":
        return server_kind.service("https", cert=cell["cert"])
    if cell["protocol"] == "tcpcrypt":
        return server_kind.service("http", transport="tcpcrypt")
    return server_kind.service("http")


def _close_records(account: RunAccount, client: str, app_port: int) -> dict[str, dict]:
    """Each daemon's close record of this run's connection. The client's daemon knows curl's port
    (its `app` end); the server's record is `_their_record`'s."""
    def found(out: dict[str, list[dict]]) -> dict[str, dict]:
        mine = next((r for r in out.get(client, []) if str(r.get("app", "")).endswith(f":{app_port}")), None)
        if mine is None:
            return {}
        theirs = {n: r for n, rs in out.items() if n != client if (r := _their_record(mine, rs)) is not None}
        return {client: mine, **theirs}

    return found(account.records(lambda out: len(found(out)) == len(out)))


def _their_record(mine: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The server daemon's record of the connection the client's record `mine` describes: the one
    with its session ID (the same keys: RFC 8548 3.4); when it has none (plain, a fallback, a
    reset) the first that started after it - a splitting proxy's own connection to the server
    starts once the client's has reached it. A connection that started before (an earlier
    fetch's, a warm-up's through the proxy, closing late) is never taken for it."""
    sid = mine.get("session_id")
    if sid:
        same = [r for r in records if r.get("session_id") == sid]
        if same:
            return same[0]
    start = mine.get("started_unix")
    later = [r for r in records if start is not None and (r.get("started_unix") or 0) >= start]
    return min(later, key=lambda r: r["started_unix"]) if later else None


def _series_row(node: str, r: dict[str, Any]) -> dict[str, Any]:
    c = r.get("counters", {})
    eno = r.get("eno") or {}
    return {"node": node, "mode": r.get("mode"), "state": r.get("state"), "reason": fallback_reason(r),
            "tep": r.get("tep"), "aead": r.get("cipher"),
            "session_id": r.get("session_id"), "resumed": r.get("resumed"), "handshake_ms": r.get("handshake_ms"),
            "plaintext_sent": c.get("plaintext_sent"), "ciphertext_sent": c.get("ciphertext_sent"),
            "handshake_bytes_sent": c.get("handshake_bytes_sent"), "frames_sent": c.get("frames_sent"),
            "eno_syn": eno.get("syn") if isinstance(eno, dict) else None,
            "eno_synack": eno.get("synack") if isinstance(eno, dict) else None,
            "device_ms": r.get("device_ms")}


def _cipher_or_none(cell: dict[str, Any]) -> str | None:
    c = cell.get("cipher") or ""
    return None if cell["protocol"] != "https" or c in ("", "default") else c


# ---------------------------------------------------------------------------------------------
# Load-time checks


def _check_tls(fixed: dict[str, Any], matrix: dict[str, list[Any]],
               where: dict[tuple[str, Any], YamlPath], src: YamlSource) -> list[Problem]:
    """Cipher/version and cipher/certificate pairs that could never complete a handshake. The
    matrix is a full cross product, so one bad pair spoils every cell that contains it."""
    choices = {k: matrix.get(k, [fixed.get(k)]) for k in ("protocol", "tls_version", "cipher", "cert")}
    if "https" not in choices["protocol"]:
        return []
    problems: list[Problem] = []

    def problem(cipher: str, message: str) -> None:
        path = where.get(("cipher", cipher), ("workload", "cipher"))
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    for cipher in choices["cipher"]:
        if cipher in (None, "default"):
            continue
        for version in choices["tls_version"]:
            if cipher in TLS13_SUITES and version != "1.3":
                problem(cipher, f"{cipher} is a TLS 1.3 suite, so cells with tls_version {version} "
                                "cannot complete a handshake")
            elif cipher not in TLS13_SUITES and version == "1.3":
                problem(cipher, f"{cipher} is a TLS 1.2-and-older cipher, so cells with tls_version 1.3 "
                                f"cannot use it; with TLS 1.3 use a suite ({', '.join(TLS13_SUITES[:3])}) "
                                "or 'default'")
        # Certificate type only constrains pre-1.3 cipher names, and only single names (a cipher
        # list like "HIGH:!aNULL" can match either kind).
        if cipher in TLS13_SUITES or not all(c.isalnum() or c in "-_" for c in cipher):
            continue
        for cert in choices["cert"]:
            if cert not in CERT_KINDS:
                continue
            if leaf_key(cert) == "ecdsa-p256" and "ECDSA" not in cipher.upper():
                problem(cipher, f"{cipher} authenticates with RSA, so cells with cert {cert} cannot "
                                "complete a handshake; use an ECDHE-ECDSA-... cipher or cert rsa2048")
            elif leaf_key(cert) == "rsa2048" and "ECDSA" in cipher.upper():
                problem(cipher, f"{cipher} needs an ECDSA certificate, so cells with cert {cert} cannot "
                                "complete a handshake; use cert ecdsa-p256")
    return problems
