"""Phone-proxy kinds: the phone splits every watch connection in two (Wear OS's CPROXY mode,
seed 003 section 4): TCP over BT from the watch, its own TCP to the server over WiFi.

How a watch app reaches the proxy - the same for every kind: **transparently**. The app
connects to the server's address as it would without a phone; the watch routes through the
phone, and the phone's netfilter REDIRECTs each (server address, port) the workload uses to a
local port where the proxy listens and forwards to that one upstream. So apps need no proxy
settings (as on Wear OS), a proxy only needs "listen here, forward there" (the `command` kind's
two placeholders), and a handover that moves the watch off the phone needs no app change.

Kinds:
- `relay`: wearlab's own relay (wearlab.nodes.relay): socket and application buffers, its own
  read/write timestamps when the workload reads them (the streams' d3 of the delay decomposition),
  the bytes it holds (the interface selector's backlog), optional virtual-queue mitigation.
- `haproxy`: HAProxy in TCP mode from a generated configuration.
- `command`: any program, started once per upstream with `{listen}` and `{upstream}` replaced
  (`host:port` each); ready when its port accepts.
All three share the phone's TCP buffer settings (`rmem_max`, `wmem_max`: net.ipv4.tcp_rmem and
tcp_wmem of the phone's namespace, the knob of the paper's Table 4), and what the phone does with
the watch's UDP (`udp`), which no TCP-splitting proxy can carry - QUIC (HTTP/3) above all:
`forward` (routed as is, the watch's address kept: the default, and what a transit node here
always did), `nat` (forwarded with the phone's own address, as Android's tethering does:
MASQUERADE of forwarded UDP), `drop` (the phone carries only what its proxy splits).

`relay` also takes `intercept:`, TCP ports it splits whatever the server (one transparent
listener per port, the upstream the connection's original destination, SO_ORIGINAL_DST): a phone
that proxies all its watch's TCP to a port, declared in the topology, for workloads that name no
(server, port) to relay (page-load's several origins). A workload's own (server, port) rules come
first.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from collections.abc import Mapping

from wearlab.model import params as P
from wearlab.model.columns import Metric
from wearlab.model.features import KernelFeature
from wearlab.model.needs import Need, Relay
from wearlab.model.params import Param, ParamSet
from wearlab.model.ports import PROXY_LISTEN_BASE
from wearlab.model.roles import Role
from wearlab.model.quantities import format_size
from wearlab.nodes.devicecpu import DeviceProcess, RunCounters, node_cpu
from wearlab.nodes.node_kind import NodeKind
from wearlab.nodes.relay import APP_BUFFER, read_held
from wearlab.nodes.software import KindError, wait_listening

LISTEN_BASE = PROXY_LISTEN_BASE  # the proxy's port for the i-th upstream: LISTEN_BASE + i
THROTTLE_DEV = "ifb-vq"      # ingress of the phone's uplink is redirected here when throttling
THROTTLE_CLASS = "1:1"
UNTHROTTLED = "10gbit"
THROTTLE_QUEUE = 8           # packets: ~0.18 s at BW/2 of a 1.1 Mbit/s BT link
THROTTLE_PRIO = 10           # the uplinks' ingress redirect into the ifb (capture taps are prio 1)

UDP_MODES = ("forward", "nat", "drop")
# The chains a proxy kind fills (commands()), emptied before it fills them and when it stops.
UNDO_INTERCEPTION = ("iptables -t nat -F PREROUTING", "iptables -F FORWARD", "iptables -t nat -F POSTROUTING")
TCP_MEM_DEFAULTS = {"rmem_max": (4096, 131072), "wmem_max": (4096, 16384)}  # Linux's min, default

BUFFER_OPTIONS = (
    Param("rmem_max", P.positive_size, None, "net.ipv4.tcp_rmem max of the phone (receive buffer "
          "autotuning ceiling; seed 003 Table 4: 8,291,456)", to_doc=format_size),
    Param("rmem_default", lambda v: "max" if str(v).strip().lower() == "max" else P.positive_size(v), None,
          "net.ipv4.tcp_rmem default of the phone: a new connection's receive buffer (Linux's 131072 "
          "unless set; `max`: rmem_max from the start, so autotuning never holds the window back)",
          to_doc=lambda v: v if v == "max" else format_size(v)),
    Param("wmem_max", P.positive_size, None, "net.ipv4.tcp_wmem max of the phone", to_doc=format_size),
    Param("udp", P.choice("udp", UDP_MODES), "forward",
          "the watch's UDP (QUIC, which no TCP proxy splits): forward (routed as is), nat (forwarded with the "
          "phone's address, as Android's tethering) or drop"),
)


def _ports(value: Any) -> tuple[int, ...]:
    """TCP ports: 443 or [80, 443]."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for v in items:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v.strip())
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536:
            raise ValueError(f"intercept takes TCP port numbers (1-65535), like [80, 443]; got {v!r}")
        out.append(v)
    if len(set(out)) != len(out):
        raise ValueError(f"intercept names a port twice: {out}")
    return tuple(out)


def _command(value: Any) -> str:
    text = P.text("command")(value)
    missing = [p for p in ("{listen}", "{upstream}") if p not in text]
    if missing:
        raise ValueError(f"command needs both placeholders {{listen}} and {{upstream}}; "
                         f"missing {' and '.join(missing)} (e.g. './my-proxy {{listen}} {{upstream}}')")
    try:
        shlex.split(text)
    except ValueError as e:
        raise ValueError(f"command cannot be split into arguments: {e}") from None
    return text


def _share(value: Any) -> float:
    """A window share in (0, 1]: 0.5, 3/4 as 0.75, or '50%'."""
    if isinstance(value, str) and not value.strip().endswith("%"):
        try:
            value = float(value)   # --set gives text
        except ValueError:
            pass
    if value in (1, 1.0, "100%"):
        return 1.0
    return P.fraction(value)


class ProxyKind(NodeKind):
    roles = frozenset({Role.PHONE})
    process_name = "proxy"
    ACCEPTS = (Relay,)
    metrics = (Metric("proxy_device_cpu_s", "s", label="proxy device CPU",
                      doc="a phone with a device: the device's time for the proxy's own computation in the run "
                          "(its user-space time between system calls times the device's CPU factor)"),)

    @classmethod
    def features(cls, settings: Mapping[str, Any]) -> set[KernelFeature]:
        return {KernelFeature.IPT_REDIRECT}

    @classmethod
    def ports(cls, settings: Mapping[str, Any], needs: list[Need]) -> dict[int, str]:
        relays = [n for n in needs if isinstance(n, Relay)]
        out = {LISTEN_BASE + i: f"{cls.name} proxy for {n.server}:{n.port}" for i, n in enumerate(relays)}
        for j, port in enumerate(settings.get("intercept") or ()):
            out[LISTEN_BASE + len(relays) + j] = f"{cls.name} proxy for any server's TCP {port} (transparent)"
        return out

    @classmethod
    def splits(cls, settings: Mapping[str, Any], port: int) -> bool:
        return port in (settings.get("intercept") or ())

    @property
    def upstreams(self) -> list[Relay]:
        return [n for n in self.needs if isinstance(n, Relay)]

    @property
    def intercepted(self) -> tuple[int, ...]:
        """The TCP ports split whatever the server (`intercept:`), listening after the upstreams."""
        return tuple(self.settings.get("intercept") or ())

    @property
    def listeners(self) -> int:
        return len(self.upstreams) + len(self.intercepted)

    def listen_port(self, i: int) -> int:
        return LISTEN_BASE + i

    def held_down(self) -> int | None:
        """The bytes the proxy holds in its own (user-space) buffers toward the watch now: read
        from the server, not yet written to the watch - what the kernel's socket queues do not
        show of the paper's CPROXY count (in minus out). None: this kind cannot tell."""
        return None

    @classmethod
    def commands(cls, settings: Mapping[str, Any], needs: list[Need]) -> list[str]:
        lines = []
        for key, sysctl in (("rmem_max", "tcp_rmem"), ("wmem_max", "tcp_wmem")):
            if settings.get(key):
                lo, default = TCP_MEM_DEFAULTS[key]
                top = int(settings[key])
                if key == "rmem_max" and settings.get("rmem_default"):
                    d = settings["rmem_default"]
                    default = top if d == "max" else int(d)
                lines.append(f"echo '{min(lo, top)} {min(default, top)} {top}' > /proc/sys/net/ipv4/{sysctl}")
        # Transparent interception: (server address, port) -> the proxy's port for that upstream.
        lines.append(UNDO_INTERCEPTION[0])
        relays = [n for n in needs if isinstance(n, Relay)]
        for i, up in enumerate(relays):
            lines.append(f"iptables -t nat -A PREROUTING -p tcp -d {up.address} --dport {up.port} "
                         f"-j REDIRECT --to-ports {LISTEN_BASE + i}")
        for j, port in enumerate(settings.get("intercept") or ()):
            lines.append(f"iptables -t nat -A PREROUTING -p tcp --dport {port} "
                         f"-j REDIRECT --to-ports {LISTEN_BASE + len(relays) + j}")
        # The watch's UDP: forwarded packets only (a forwarded packet has no local socket).
        lines += UNDO_INTERCEPTION[1:]
        udp = settings.get("udp") or "forward"
        if udp == "nat":
            lines.append("iptables -t nat -A POSTROUTING -p udp -m owner ! --socket-exists -j MASQUERADE")
        elif udp == "drop":
            lines.append("iptables -A FORWARD -p udp -j DROP")
        return lines

    def prepare(self) -> None:
        self.net.sh(self.node, " && ".join(self.commands(self.settings, self.needs)))

    def processes(self) -> list[list[str]]:
        raise NotImplementedError

    def start(self) -> None:
        if not self.listeners:
            self.procs = []
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        device = self.ctx.plan.device_of(self.node) if self.ctx.plan is not None else None
        # A phone with a device: the proxy's own computation slows by the device's CPU factor.
        argvs = self.processes()
        self.device = [DeviceProcess(device, self.workdir, f"{self.process_name}-{i}", cpu_factor=True,
                                     node=node_cpu(self.net.workdir, self.node, device))
                       for i in range(len(argvs))] if device else []
        self.procs = [self.net.popen(self.node, argv, stdout=subprocess.DEVNULL,
                                     stderr=open(self.workdir / f"{self.process_name}-{i}.err", "w"),
                                     cwd=str(self.cwd()),
                                     **({"env": self.device[i].env()} if self.device else {}))
                      for i, argv in enumerate(argvs)]

    def cwd(self) -> Path:
        return Path.cwd()

    def ready(self, timeout: float = 15.0) -> None:
        ports = {self.listen_port(i) for i in range(self.listeners)}
        if not ports:
            return
        try:
            for proc in self.procs:
                wait_listening(self.net, self.node, ports, f"{self.name} proxy", timeout, proc)
        except KindError as e:
            raise KindError(f"{e}{self._stderr_tail()}") from None

    def _stderr_tail(self) -> str:
        for f in sorted(self.workdir.glob(f"{self.process_name}-*.err")):
            text = f.read_text(errors="replace").strip()
            if text:
                return f"; it said: {text.splitlines()[-1][:300]}"
        return ""

    def stop(self) -> None:
        for p in getattr(self, "procs", []):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in getattr(self, "procs", []):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # Undo the interception (NodeKind.stop): a kind that follows on this node in a later group
        # (`phone.kind: [relay, host]`) would otherwise find the REDIRECTs to a proxy that is gone,
        # and its connections to those ports reset.
        self.net.sh(self.node, " && ".join(UNDO_INTERCEPTION))

    def run_started(self, t0_ns: int) -> None:
        self._counters = [RunCounters(d) for d in getattr(self, "device", [])]

    def run_ended(self) -> None:
        """With a device: the run's device time closes with the run's connections. The client is
        done when its last byte arrives, but the proxy still computes the connection's end (the
        last reads and writes, the close) for a few ms; read now, that time showed in the next
        run through the same phone. So wait (at most CLOSE_WAIT_S) until no proxy process holds
        a connected socket."""
        if getattr(self, "_counters", None):
            _wait_connections_closed(getattr(self, "procs", []), CLOSE_WAIT_S)

    def run_metrics(self) -> dict[str, Any]:
        counters = getattr(self, "_counters", [])
        if not counters:
            return {}
        return {"proxy_device_cpu_s": round(sum(sum(m.values()) for m in (c.metrics() for c in counters)), 6)}

    def facts(self) -> dict[str, Any]:
        return {**super().facts(),
                "device": [d.facts() for d in getattr(self, "device", [])] or None,
                "interception": "iptables REDIRECT of each (server, port) to the proxy's port",
                "upstreams": [{"listen_port": self.listen_port(i), "server": u.server, "address": u.address,
                               "port": u.port} for i, u in enumerate(self.upstreams)],
                "intercept": [{"listen_port": self.listen_port(len(self.upstreams) + j), "tcp_port": p,
                               "upstream": "the connection's original destination (SO_ORIGINAL_DST)"}
                              for j, p in enumerate(self.intercepted)] or None,
                "udp": {"forward": "forwarded as is (routed, the watch's address kept)",
                        "nat": "forwarded with the phone's address (MASQUERADE, as Android's tethering)",
                        "drop": "dropped: the phone carries only the TCP its proxy splits"}[
                            self.settings.get("udp") or "forward"]}


class RelayProxy(ProxyKind):
    name = "relay"
    process_name = "relay"
    doc = ("wearlab's CPROXY relay: TCP_NODELAY, configurable socket and application buffers, its own "
           "read/write timestamps, optional virtual-queue mitigation (seed 003 section 4.3)")
    options = ParamSet((
        *BUFFER_OPTIONS,
        Param("sndbuf", P.positive_size, None, "SO_SNDBUF of the relay's sockets (default: autotuning)",
              to_doc=format_size),
        Param("rcvbuf", P.positive_size, None, "SO_RCVBUF of the relay's sockets (default: autotuning)",
              to_doc=format_size),
        Param("window_share", _share, None,
              "the share of its receive buffer a server-side socket of the relay fills with payload, as "
              "Linux before 6.6 did with tcp_adv_win_scale (0.5 at its default 1, the seed 003 phones' "
              "3.4-3.18 kernels: a window of half the buffer's free memory; 0.75 at 2); default: this "
              "kernel's own (a learned payload/memory ratio since 6.6, ~0.9 here). "
              "docs/phone-proxy.md#the-receive-buffers-payload-share"),
        Param("app_buffer", P.positive_size, APP_BUFFER, "the relay's own buffer per direction", to_doc=format_size),
        Param("intercept", _ports, (), "TCP ports it splits whatever the server (transparent: the upstream is "
              "each connection's original destination), e.g. [80, 443]; the workload's own (server, port) "
              "relays come first", to_doc=list),
        Param("mitigation", P.choice("mitigation", ("none", "virtual-queue")), "none",
              "virtual-queue: throttle server->phone to BW/2 while the shared virtual queue exceeds "
              "BW(1-eps)T, release below BW(1-2eps)T"),
        Param("vq_T", P.positive_duration, 1.0, "T of the virtual queue thresholds"),
        Param("vq_epsilon", P.fraction, 0.3, "epsilon of the virtual queue thresholds"),
    ))

    @classmethod
    def features(cls, settings: Mapping[str, Any]) -> set[KernelFeature]:
        extra = {KernelFeature.IFB, KernelFeature.HTB} if settings.get("mitigation") == "virtual-queue" else set()
        return super().features(settings) | extra

    @property
    def timestamps(self) -> bool:
        """Whether the relay takes its per-read/per-write timestamps: only when a workload reads
        them (needs.Relay.timestamps), for their clock reads cost a system call each in the guest."""
        return any(u.timestamps for u in self.upstreams)

    @property
    def events_file(self) -> Path | None:
        return self.workdir / "relay-events.csv" if self.timestamps else None

    @property
    def series_file(self) -> Path:
        return self.workdir / "relay-vq.csv"

    @property
    def held_file(self) -> Path:
        """What the relay's own buffers hold per direction, kept current (relay.HeldBytes): the
        interface selector's view into the one part of a split connection the kernel cannot show."""
        return self.workdir / "relay-held"

    def held_down(self) -> int | None:
        return read_held(self.held_file)["down"] if self.held_file.exists() else None

    def prepare(self) -> None:
        super().prepare()
        self.throttled_uplinks: list[str] = []
        if self.settings.get("mitigation") == "virtual-queue":
            self._throttle_device()

    def _throttle_device(self) -> None:
        """ifb on the phone carrying what arrives from its uplinks, htb class changed in place by
        the relay's controller (the paper throttled with tc on the phone too). Removed by stop():
        the next cell's relay (another rmem_max, say) builds its own."""
        uplinks = sorted({self.net.sh(self.node, f"ip -o route get {u.address}").split(" dev ")[1].split()[0]
                          for u in self.upstreams})
        self.throttled_uplinks = uplinks
        cmds = [f"ip link add {THROTTLE_DEV} type ifb", f"ip link set {THROTTLE_DEV} up",
                f"tc qdisc add dev {THROTTLE_DEV} root handle 1: htb default 1",
                f"tc class add dev {THROTTLE_DEV} parent 1: classid {THROTTLE_CLASS} htb rate {UNTHROTTLED} "
                f"ceil {UNTHROTTLED}",
                # A short queue behind the throttle, so the server's TCP slows down instead of the
                # throttle becoming the next bloated buffer (htb's default leaf holds 1000 packets).
                f"tc qdisc add dev {THROTTLE_DEV} parent {THROTTLE_CLASS} handle 10: pfifo limit {THROTTLE_QUEUE}"]
        for dev in uplinks:
            # clsact (not ingress): a capture tap may share the hook, at a higher priority.
            cmds += [f"(tc qdisc show dev {dev} | grep -q clsact || tc qdisc add dev {dev} clsact)",
                     f"tc filter add dev {dev} ingress prio {THROTTLE_PRIO} protocol all u32 match u32 0 0 "
                     f"action mirred egress redirect dev {THROTTLE_DEV}"]
        self.net.sh(self.node, " && ".join(cmds))

    def _remove_throttle(self) -> None:
        """Undo _throttle_device: the redirect filters first (a filter redirecting into a deleted
        device would drop what arrives), then the ifb with its qdiscs. The capture taps (prio 1)
        and the clsact qdisc stay: they belong to the captures."""
        if not getattr(self, "throttled_uplinks", None):
            return
        cmds = [f"tc filter del dev {dev} ingress prio {THROTTLE_PRIO}" for dev in self.throttled_uplinks]
        cmds.append(f"ip link del {THROTTLE_DEV}")
        self.net.sh(self.node, " && ".join(cmds))
        self.throttled_uplinks = []

    def stop(self) -> None:
        super().stop()
        self._remove_throttle()

    def processes(self) -> list[list[str]]:
        s = self.settings
        argv = [sys.executable, "-m", "wearlab.nodes.relay",
                *[f"{self.listen_port(i)}={u.address}:{u.port}" for i, u in enumerate(self.upstreams)],
                *[f"{self.listen_port(len(self.upstreams) + j)}=original" for j in range(len(self.intercepted))],
                "--app-buffer", str(s["app_buffer"]), "--held", str(self.held_file)]
        if self.timestamps:
            argv += ["--events", str(self.events_file)]
        for opt in ("sndbuf", "rcvbuf"):
            if s.get(opt):
                argv += [f"--{opt}", str(s[opt])]
        if s.get("window_share"):
            argv += ["--window-share", str(s["window_share"])]
        if s.get("mitigation") == "virtual-queue":
            argv += ["--mitigation", "virtual-queue", "--vq-T", str(s["vq_T"]), "--vq-epsilon", str(s["vq_epsilon"]),
                     "--throttle-dev", THROTTLE_DEV, "--throttle-classid", THROTTLE_CLASS,
                     "--series", str(self.series_file)]
        return [argv]

    def version(self) -> str:
        from wearlab import __version__
        return f"wearlab relay {__version__}"


class HaproxyProxy(ProxyKind):
    name = "haproxy"
    process_name = "haproxy"
    doc = "HAProxy in TCP mode (Debian's haproxy), one frontend/backend pair per upstream"
    options = ParamSet((
        *BUFFER_OPTIONS,
        Param("bufsize", P.positive_size, 16384, "HAProxy's tune.bufsize (its own buffer per direction)",
              to_doc=format_size),
    ))

    def held_down(self) -> int | None:
        """The response channels' bytes over HAProxy's sessions (its runtime API, `show sess
        all`): each channel's buffer, output scheduled plus input not yet forwarded (o + i), and
        its kernel pipe when it splices (pipe=). None while the API does not answer.
        The API's socket is ADMIN_SOCKET in the work directory (a container node shares it at the
        same path), named relative to it on both ends: a socket's path holds 108 bytes (HAProxy
        takes 97), fewer than a run's work directory can take. HAProxy is started in the directory
        (-C); this end goes through an O_PATH descriptor of it (/proc/self/fd/N/...)."""
        try:
            directory = os.open(self.workdir, os.O_PATH | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(ADMIN_TIMEOUT_S)
                s.connect(f"/proc/self/fd/{directory}/{ADMIN_SOCKET}")
                s.sendall(b"show sess all\n")
                text = b"".join(iter(lambda: s.recv(65536), b"")).decode(errors="replace")
        except OSError:
            return None
        finally:
            os.close(directory)
        return haproxy_response_bytes(text)

    def config(self) -> str:
        parts = ["# generated by wearlab", "global", "    maxconn 4096", "    nbthread 1",
                 f"    tune.bufsize {self.settings['bufsize']}",
                 f"    stats socket unix@{ADMIN_SOCKET} mode 600 level operator",   # in its -C directory
                 "defaults", "    mode tcp",
                 "    timeout connect 10s", "    timeout client 1h", "    timeout server 1h"]
        for i, u in enumerate(self.upstreams):
            port = self.listen_port(i)
            parts += [f"listen relay{port}", f"    bind 0.0.0.0:{port}", f"    server up{port} {u.address}:{u.port}"]
        return "\n".join(parts) + "\n"

    # Also as a container node (images/server-haproxy): the image's HAProxy, started as a daemon
    # inside it, with the node's interception rules set in its namespace like any phone's.
    in_container = True

    def processes(self) -> list[list[str]]:
        conf = self.workdir / "haproxy.cfg"
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf.write_text(self.config())
        return [["haproxy", "-db", "-C", str(self.workdir), "-f", str(conf)]]

    @property
    def pid_file(self) -> Path:
        return self.workdir / "haproxy.pid"

    def start(self) -> None:
        if not self.net.is_container(self.node):
            return super().start()
        self.procs = []
        if not self.upstreams:
            return
        argv = self.processes()[0]
        argv = [argv[0], "-D", "-p", str(self.pid_file), *argv[2:]]  # daemon instead of -db
        res = self.net.run_app(self.node, argv)
        if res.returncode != 0:
            raise KindError(f"haproxy in {self.node}'s container failed to start: {(res.stderr or res.stdout).strip()[-300:]}")

    def stop(self) -> None:
        if not self.net.is_container(self.node):
            return super().stop()
        if self.pid_file.exists():  # its pid is the container's own: signalled from inside it
            self.net.run_app(self.node, ["sh", "-c", f"kill $(cat {self.pid_file})"])

    def version(self) -> str:
        res = self.net.run_app(self.node, ["haproxy", "-v"])
        return (res.stdout.strip().splitlines() or ["haproxy (version unknown)"])[0]


ADMIN_SOCKET = "haproxy.sock"   # HAProxy's runtime API, in its work directory (HaproxyProxy.held_down)
ADMIN_TIMEOUT_S = 1.0
# `show sess all` (HAProxy 2.6, stream.c): per session a channel line, then its buffer's line:
#   res=0x... (f=0x... an=0x0 pipe=0 tofwd=-1 total=2824192)
#       an_exp=<NEVER> rex=<NEVER> wex=59m58s
#       buf=0x... data=0x... o=16384 p=2613 i=0 size=16384
# o: output (co_data, scheduled to send); i: input not yet forwarded (ci_data); p is a position.
_RES_PIPE = re.compile(r"^\s*res=\S+ \(.*?\bpipe=(\d+)")
_BUF = re.compile(r"^\s*buf=\S+ data=\S+ o=(\d+) p=-?\d+ i=(\d+) size=\d+")


def haproxy_response_bytes(show_sess: str) -> int:
    """The bytes HAProxy holds toward its clients: over its sessions' response channels, o + i of
    the buffer plus the channel's pipe (module's _RES_PIPE/_BUF show the format). The runtime API's
    own session (frontend=GLOBAL) holds this very answer and is left out."""
    total, in_res, skip = 0, False, False
    for line in show_sess.splitlines():
        if not line.startswith(" "):                # a session's first line
            in_res = skip = False
        elif line.lstrip().startswith("frontend=GLOBAL"):
            skip = True
        elif (m := _RES_PIPE.match(line)) and not skip:
            in_res = True
            total += int(m.group(1))
        elif line.lstrip().startswith("req="):
            in_res = False
        elif in_res and (m := _BUF.match(line)):
            total += int(m.group(1)) + int(m.group(2))
            in_res = False
    return total


class CommandProxy(ProxyKind):
    name = "command"
    process_name = "command"
    doc = "your own proxy: a command line with {listen} and {upstream} (host:port each), one per upstream"
    options = ParamSet((
        Param("command", _command, None, "the command line, e.g. './my-proxy {listen} {upstream}'",
              required=True),
        *BUFFER_OPTIONS,
    ))

    def processes(self) -> list[list[str]]:
        out = []
        for i, u in enumerate(self.upstreams):
            line = self.settings["command"].replace("{listen}", f"0.0.0.0:{self.listen_port(i)}") \
                                            .replace("{upstream}", f"{u.address}:{u.port}")
            out.append(shlex.split(line))
        return out


CLOSE_WAIT_S = 2.0   # a proxy's connections end within a few round trips of the client's last byte


def _wait_connections_closed(procs: list[subprocess.Popen], limit_s: float) -> bool:
    """Wait until the processes (and their children) hold no TCP socket other than listening
    ones; False when `limit_s` passed first. The kernel offers no event for "a process closed its
    last socket", so this looks every 5 ms."""
    import time

    deadline = time.monotonic() + limit_s
    while any(_connected_sockets(p.pid) for p in procs):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _connected_sockets(pid: int) -> int:
    """TCP sockets of a process tree that are not listening. Read from /proc/PID/net/tcp{,6}, the
    tables of the process's own network namespace (psutil reads the caller's, a node's is
    another), matched by inode to the sockets its descriptors hold."""
    import psutil

    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0
    inodes = set()
    for proc in tree:
        fd_dir = Path(f"/proc/{proc.pid}/fd")
        try:
            for fd in fd_dir.iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    if not inodes:
        return 0
    n = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...; st 0A = LISTEN
            if len(f) > 9 and f[9] in inodes and f[3] != "0A":
                n += 1
    return n
