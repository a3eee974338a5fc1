"""Packet capture at the client: one tcpdump per client interface for the whole experiment,
read incrementally so each run's connection is cut out of the capture as soon as it closes
(no per-run tcpdump start-up cost, and the capture file is kept with the results).

Where the capture taps: a link's delay is netem on the *sender's* egress, so tcpdump on the
interface itself would see outgoing packets only after they have waited out their propagation
delay. Each captured interface therefore gets a tap: tc mirrors every packet into a dummy
device (a veth pair on a kernel without it) at the clsact hooks, egress *before* the root qdisc
(the moment the node sends it) and ingress as it arrives. Timestamps in the capture are
departures and arrivals on the wire, both read from the one kernel clock, so phase durations from
it are the network's own timing, without the application's time around it.
"""

from __future__ import annotations

import ipaddress
import select
import subprocess
import time
from pathlib import Path

from wearlab.measure.pcap import PcapReader
from wearlab.measure.phases import connection_phases
from wearlab.measure.tcp import (ACK, QUIC_0RTT, SYN, ReassembledStream, connection_packets, decode_tcp, ip_packet,
                                 quic_initial, quic_long_types, udp_payload)
from wearlab.measure.tls_records import tcpcrypt_init1_end, tls_resumed

# QUIC (HTTP/3) is captured on its port only: UDP elsewhere is not the capture's business.
QUIC_PORT = 443
LOOPBACK = "lo"   # where an app's connection to a node-local agent runs (the multipath transport's)


class ClientCapture:
    def __init__(self, net, node: str, interfaces: list[str], directory: Path, snaplen: int = 0):
        self.net, self.node = net, node
        self.files: dict[str, Path] = {}
        self.procs: list[subprocess.Popen] = []
        self.readers: dict[str, PcapReader] = {}
        self.packets: dict[str, list] = {}
        directory.mkdir(parents=True, exist_ok=True)
        for intf in interfaces:
            f = directory / f"{node}-{intf}.pcap"
            # The loopback has no qdisc to wait in (and a tap on it would mirror each packet twice,
            # leaving and arriving): tcpdump reads it itself.
            tap = intf if intf == LOOPBACK else add_tap(net, node, intf)
            # -B: a 32 MB kernel buffer (default 2 MB), so a busy single-CPU guest (e.g. with
            # tcpcrypt's daemons) does not drop packets of a 9 MB transfer before tcpdump reads them.
            # `-w -` into a file opened here: tcpdump changes the owner of a file it opens itself (to
            # -Z's user), which a results directory on hostfs, mounted by an ordinary user's guest
            # (the bundle), refuses.
            with f.open("wb") as out:
                p = net.popen(node, ["tcpdump", "-i", tap, "-n", "-s", str(snaplen), "-B", "32768", "-U", "--immediate-mode",
                                     "-Z", "root", "-w", "-", f"tcp or udp port {QUIC_PORT}"], stdout=out,
                              stderr=subprocess.PIPE, text=True)
            self._wait_listening(p, intf)
            self.procs.append(p)
            self.files[intf] = f
            self.packets[intf] = []

    @staticmethod
    def _wait_listening(p: subprocess.Popen, intf: str) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r, _, _ = select.select([p.stderr], [], [], 0.5)
            if r:
                line = p.stderr.readline()
                if "listening on" in line:
                    return
                if not line and p.poll() is not None:
                    break
        p.kill()
        raise RuntimeError(f"tcpdump on {intf} did not start")

    def _poll(self, intf: str) -> None:
        if intf not in self.readers:
            if not self.files[intf].exists():
                return
            self.readers[intf] = PcapReader(str(self.files[intf]))
        self.packets[intf].extend(self.readers[intf].read_new())

    def connection_bytes(self, intf: str, client: tuple[str, int], tls_version: str | None,
                         timeout: float = 3.0, redirected_to: tuple[str, int] | None = None):
        """Phase bytes of the connection from `client`; waits until its teardown is captured.
        `redirected_to`: the local socket netfilter redirected it to (tcp.connection_packets)."""
        deadline = time.monotonic() + timeout
        while True:
            self._poll(intf)
            conn = connection_packets(self.packets[intf], client, redirected_to)
            if conn and _closed(conn) or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if conn:
            # Runs are sequential: packets from before this connection began are not needed again.
            self.packets[intf] = [p for p in self.packets[intf] if p[0] >= conn[0].ts]
        return connection_phases(conn, tls_version=tls_version) if conn else None

    @staticmethod
    def now() -> float:
        """The capture's clock (the kernel's wall clock, as pcap timestamps)."""
        return time.time()

    def connections_opened(self, since: float, until: float, settle_s: float = 0.5
                           ) -> dict[str, list[tuple[str, int]]]:
        """{"tcp": [...], "quic": [...]}: (server address, client port) of each connection the
        client opened between `since` and `until` - a TCP SYN, a QUIC Initial to UDP port 443
        (retransmissions count once). Waits up to `settle_s` for the capture to hold packets past
        `until`, then forgets packets before `until`."""
        deadline = time.monotonic() + settle_s
        while True:
            for intf in self.files:
                self._poll(intf)
            if any(p and p[-1][0] >= until for p in self.packets.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        out: dict[str, dict[tuple[str, int], None]] = {"tcp": {}, "quic": {}}
        for intf, packets in self.packets.items():
            for p in packets:
                if not since <= p[0] <= until:
                    continue
                seg = decode_tcp(p[1], p[2])
                if seg is not None and seg.flags & SYN and not seg.flags & ACK:
                    out["tcp"][(str(ipaddress.ip_address(seg.dst)), seg.sport)] = None
                    continue
                quic = quic_initial(p[1], p[2]) if seg is None else None
                if quic is not None and quic[3] == QUIC_PORT:
                    out["quic"][(str(ipaddress.ip_address(quic[1])), quic[2])] = None
            self.packets[intf] = [p for p in packets if p[0] > until]
        return {k: list(v) for k, v in out.items()}

    def flows(self, since: float, until: float, servers: set[str], settle_s: float = 1.0,
              redirected_to: tuple[str, int] | None = None) -> list[dict]:
        """The connections the client opened to `servers` (addresses) between `since` and `until` - a
        TCP SYN, or a QUIC Initial to UDP 443 from a new client port - each with every packet of it
        in the capture, teardown included (waited for up to `settle_s`): its IP bytes up and down
        (IP headers and payload, as the IP length fields give them) and, for TCP, whether its TLS
        1.3 ServerHello accepted a pre-shared key (`resumed`: True/False; None when it has no TLS
        or the ServerHello was not captured), for QUIC the client's 0-RTT packets
        (`zero_rtt_packets`, within the snaplen) and whether its client stream opens with tcpcrypt's
        Init1 (`tcpcrypt_init1`: a fresh key exchange). Forgets packets from before `until` afterwards.
        `redirected_to` (the multipath transport's watch agent): the client's TCP to `servers` is
        REDIRECTed there, so its connections are the loopback's - the client's packets addressed to
        that socket (DNAT in OUTPUT), the replies from the original destination (NAT undone before
        they are sent), which is the flow's `server` - and only those count."""
        deadline = time.monotonic() + settle_s
        while True:
            for intf in self.files:
                self._poll(intf)
            found = self._flows(since, until, servers, redirected_to)
            done = all(f["closed"] for f in found if f["proto"] == "tcp")
            if done and any(p and p[-1][0] >= until for p in self.packets.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for intf, packets in self.packets.items():
            self.packets[intf] = [p for p in packets if p[0] > until]
        return found

    def _flows(self, since: float, until: float, servers: set[str],
               redirected_to: tuple[str, int] | None = None) -> list[dict]:
        found: dict[tuple, dict] = {}
        for intf, packets in self.packets.items():
            if redirected_to is not None and intf != LOOPBACK:
                continue                 # the transport's own paths: not the app's connections
            mine: list = []
            for p in packets:
                if p[0] < since:
                    continue
                ip = ip_packet(p[1], p[2])
                if ip is None:
                    continue
                if redirected_to is None:
                    up = str(ipaddress.ip_address(ip.dst)) in servers
                    server, client = (ip.dst, ip.src) if up else (ip.src, ip.dst)
                    key = (ip.proto, server, ip.sport if up else ip.dport)
                else:
                    # to the agent's socket: the client's; from an original destination: the reply
                    up = (str(ipaddress.ip_address(ip.dst)), ip.dport) == redirected_to
                    if not up and str(ipaddress.ip_address(ip.src)) not in servers:
                        continue
                    server, client = (ip.dst, ip.src) if up else (ip.src, ip.dst)
                    key = (ip.proto, "redirected", ip.sport if up else ip.dport)
                f = found.get(key)
                if f is None and up and p[0] <= until:
                    seg = decode_tcp(p[1], p[2]) if ip.proto == 6 else None
                    opens = (seg is not None and seg.flags & SYN and not seg.flags & ACK) or (
                        ip.proto == 17 and ip.dport == QUIC_PORT and quic_initial(p[1], p[2]) is not None)
                    if opens:
                        f = found[key] = {"proto": "tcp" if ip.proto == 6 else "quic",
                                          "server": str(ipaddress.ip_address(server)),
                                          "client": str(ipaddress.ip_address(client)), "client_port": key[2],
                                          "intf": intf, "opened_s": p[0], "bytes_up": 0, "bytes_down": 0,
                                          "packets": 0, "resumed": None, "tcpcrypt_init1": False,
                                          "zero_rtt_packets": 0, "closed": ip.proto != 6}
                if f is None or (redirected_to is not None and not up and str(ipaddress.ip_address(client)) != f["client"]):
                    continue
                if redirected_to is not None and not up and f["server"] == redirected_to[0]:
                    f["server"] = str(ipaddress.ip_address(server))     # the reply names the destination
                f["bytes_up" if up else "bytes_down"] += ip.ip_len
                f["packets"] += 1
                if ip.proto == 6:
                    mine.append(p)
                elif up:
                    # QUIC 0-RTT: the client's long header packets of type 0-RTT, alone or coalesced
                    # after its Initial (seen as far as the snaplen reaches)
                    f["zero_rtt_packets"] += quic_long_types(udp_payload(p[1], p[2]) or b"").count(QUIC_0RTT)
            for f in found.values():
                if f["proto"] != "tcp" or f["intf"] != intf:
                    continue
                conn = connection_packets(mine, (f["client"], f["client_port"]), redirected_to)
                f["closed"] = bool(conn) and _closed(conn)
                # TLS 1.3: the ServerHello's pre_shared_key; 1.2: the session ID echoed, or the
                # abbreviated handshake's ChangeCipherSpec right after the ServerHello
                f["resumed"] = tls_resumed(ReassembledStream(conn, "up"), ReassembledStream(conn, "down")) if conn else None
                # tcpcrypt's fresh key exchange: the client's stream opens with Init1 (RFC 8548 4.1)
                f["tcpcrypt_init1"] = bool(conn) and tcpcrypt_init1_end(ReassembledStream(conn, "up")) is not None
        return sorted(found.values(), key=lambda f: f["opened_s"])

    def stream_offsets(self, intf: str, server_ip: str, server_port: int, since: float) -> list[tuple[int, float]]:
        """For the busiest connection from server_ip:server_port seen on `intf` after `since`:
        (cumulative payload offset reached, time) for each packet that moved it forward, i.e.
        when each byte of the server's stream first crossed this interface (retransmissions of
        bytes already seen are skipped)."""
        self._poll(intf)
        src = ipaddress.ip_address(server_ip).packed
        flows: dict[tuple, dict] = {}
        for p in self.packets[intf]:
            if p[0] < since:
                continue
            seg = decode_tcp(p[1], p[2])
            if seg is None or seg.src != src or seg.sport != server_port:
                continue
            f = flows.setdefault((seg.dst, seg.dport), {"isn": None, "points": [], "top": 0})
            if seg.flags & SYN:
                f["isn"] = seg.seq
                continue
            if f["isn"] is None or not seg.payload_len:
                continue
            end = (seg.seq - f["isn"] - 1 + seg.payload_len) & 0xFFFFFFFF
            if end > f["top"]:
                f["top"] = end
                f["points"].append((end, float(p[0])))
        if not flows:
            return []
        return max(flows.values(), key=lambda f: f["top"])["points"]

    def stop(self) -> None:
        end_tcpdumps(self.procs, grace_s=5)


def end_tcpdumps(procs, grace_s: float) -> None:
    """SIGTERM every capture process (tcpdump flushes its buffer), then SIGKILL what is still
    there after `grace_s`."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def tap_name(intf: str) -> str:
    return f"tap-{intf}"


def add_tap(net, node: str, intf: str) -> str:
    """Mirror everything `intf` sends (before its qdiscs) and receives into a dummy device;
    returns the device's name. u32 match-all works on kernels without the matchall classifier.
    A kernel without the dummy driver (this machine's host kernel, where container nodes run)
    gets a veth pair instead: mirred needs its target up with carrier, so the peer is up too,
    without addresses (no IPv6 link-local either), and drops what it receives as not its own
    (PACKET_OTHERHOST, before netfilter)."""
    tap, peer = tap_name(intf), f"tapp-{intf}"
    # Priority 1: before any other clsact filter (e.g. a redirect into an ifb throttle), and
    # `continue` so that those filters still see the packet (a plain mirror ends classification).
    match = f"prio 1 protocol all u32 match u32 0 0 action mirred egress mirror dev {tap} continue"
    net.sh(node, f"{{ ip link add {tap} type dummy 2>/dev/null || {{ ip link add {tap} type veth peer name {peer} && "
                 f"ip link set {peer} addrgenmode none && ip link set {peer} up; }}; }} && ip link set {tap} up && "
                 f"(tc qdisc show dev {intf} | grep -q clsact || tc qdisc add dev {intf} clsact) && "
                 f"tc filter add dev {intf} egress {match} && tc filter add dev {intf} ingress {match}")
    return tap


FIN, RST, ACK = 0x01, 0x04, 0x10


def _closed(conn) -> bool:
    """RST seen, or FINs both ways followed by the ACK of the second FIN."""
    if any(p.flags & RST for p in conn):
        return True
    fins = [i for i, p in enumerate(conn) if p.flags & FIN]
    dirs = {conn[i].direction for i in fins}
    if dirs != {"up", "down"}:
        return False
    last_fin = conn[max(fins)]
    # The final ACK comes from the side that received the last FIN.
    return any(p.direction != last_fin.direction and p.flags & ACK for p in conn[max(fins) + 1:])
