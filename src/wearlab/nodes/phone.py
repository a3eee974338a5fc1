"""The phone kind: relays wearable connections to servers over its own uplink."""

from __future__ import annotations

import select
import subprocess
import sys

from wearlab.model.topology import Role
from wearlab.nodes.kinds import NodeKind, register

RELAY_PORT_OFFSET = 10000  # the relay for server port P listens on P + 10000


def relay_port(server_port: int) -> int:
    return server_port + RELAY_PORT_OFFSET


@register(Role.PHONE)
class Phone(NodeKind):
    proc: subprocess.Popen | None = None

    def start(self, *, relay_to: list[tuple[str, int]] = (), **_) -> None:
        if not relay_to:
            return
        specs = [f"{relay_port(port)}={ip}:{port}" for ip, port in relay_to]
        self.proc = self.net.popen(self.name, [sys.executable, "-m", "wearlab.nodes.relay", *specs],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().strip() if ready else ""
        if line != "ready":
            self.proc.kill()
            raise RuntimeError(f"relay on {self.name} did not start: {line or 'timeout'}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
