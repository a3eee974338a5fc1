"""Packet capture at the client: one tcpdump per client interface for the whole experiment,
read incrementally so each run's connection is cut out of the capture as soon as it closes
(no per-run tcpdump start-up cost, and the capture file is kept with the results)."""

from __future__ import annotations

import select
import subprocess
import time
from pathlib import Path

from wearlab.measure.phases import PcapReader, connection_packets, split_phases


class ClientCapture:
    def __init__(self, net, node: str, interfaces: list[str], directory: Path):
        self.net, self.node = net, node
        self.files: dict[str, Path] = {}
        self.procs: list[subprocess.Popen] = []
        self.readers: dict[str, PcapReader] = {}
        self.packets: dict[str, list] = {}
        directory.mkdir(parents=True, exist_ok=True)
        for intf in interfaces:
            f = directory / f"{node}-{intf}.pcap"
            p = net.popen(node, ["tcpdump", "-i", intf, "-n", "-s", "0", "-U", "--immediate-mode", "-Z", "root",
                                 "-w", str(f), "tcp"], stdout=subprocess.DEVNULL,
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
                         timeout: float = 3.0):
        """Phase bytes of the connection from `client`; waits until its teardown is captured."""
        deadline = time.monotonic() + timeout
        while True:
            self._poll(intf)
            conn = connection_packets(self.packets[intf], client)
            if conn and _closed(conn) or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if conn:
            # Runs are sequential: packets from before this connection began are not needed again.
            self.packets[intf] = [p for p in self.packets[intf] if p[0] >= conn[0].ts]
        return split_phases(conn, tls_version=tls_version) if conn else None

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


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
