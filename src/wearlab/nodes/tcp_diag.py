"""The bytes a node's TCP connections hold written but not yet sent (struct tcp_info's
tcpi_notsent_bytes: write_seq - snd_nxt), from the kernel's socket diagnostics (NETLINK_SOCK_DIAG,
what `ss -ti` reads), for sockets of another process.

/proc/net/tcp cannot tell these bytes apart: its tx_queue is write_seq - snd_una, the unsent
bytes AND those sent and not yet acknowledged (in the qdisc, on the wire, or with the peer), so
a reader that also counts the qdisc would count the latter twice.

A netlink socket answers for the network namespace it was opened in, so this module runs as a
small line-protocol process inside the node (`TcpDiag` starts it there with the network's popen,
as the tc and ip batches are started): each line "SRC DST PORT" (IPv4) is answered with one line,
the sum of tcpi_notsent_bytes over the ESTABLISHED TCP connections from SRC to DST:PORT.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_ESTABLISHED = 1
INET_DIAG_INFO = 2
NLMSG = struct.Struct("=LHHLL")                 # struct nlmsghdr
REQ = struct.Struct("=BBBxI")                  # struct inet_diag_req_v2, before its inet_diag_sockid
SOCKID_BYTES = 48                               # be16 sport, be16 dport, be32 src[4], dst[4], u32 if, cookie[2]
DIAG_MSG_BYTES = 4 + SOCKID_BYTES + 20          # struct inet_diag_msg: 4 x u8, the sockid, 5 x u32
# struct tcp_info (include/uapi/linux/tcp.h; wearlab.nodes.vqueue spells out the fields before):
# ... bytes_received (u64, 128), segs_out (u32, 136), segs_in (140), notsent_bytes (144), Linux >= 4.6.
OFF_NOTSENT = 144


def _request(seq: int) -> bytes:
    body = REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 1 << TCP_ESTABLISHED) \
        + bytes(SOCKID_BYTES)
    return NLMSG.pack(NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def parse(messages: bytes) -> tuple[list[tuple[str, str, int, int]], bool]:
    """Netlink answers -> ([(src, dst, dport, notsent bytes)], whether the dump is done)."""
    out, off = [], 0
    while off + NLMSG.size <= len(messages):
        length, kind, _, _, _ = NLMSG.unpack_from(messages, off)
        if length < NLMSG.size:
            break
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            (errno,) = struct.unpack_from("=i", messages, off + NLMSG.size)
            raise OSError(-errno, "sock_diag refused the request")
        m = off + NLMSG.size
        _, dport = struct.unpack_from(">HH", messages, m + 4)
        src = socket.inet_ntoa(messages[m + 8:m + 12])
        dst = socket.inet_ntoa(messages[m + 24:m + 28])
        notsent, a = 0, m + DIAG_MSG_BYTES
        while a + 4 <= off + length:
            rta_len, rta_type = struct.unpack_from("=HH", messages, a)
            if rta_len < 4:
                break
            if rta_type == INET_DIAG_INFO and rta_len - 4 >= OFF_NOTSENT + 4:
                (notsent,) = struct.unpack_from("=I", messages, a + 4 + OFF_NOTSENT)
            a += (rta_len + 3) & ~3
        out.append((src, dst, dport, notsent))
        off += (length + 3) & ~3
    return out, False


def connections(sock: socket.socket, seq: int) -> list[tuple[str, str, int, int]]:
    """Every ESTABLISHED IPv4 TCP connection of the namespace: (src, dst, dport, notsent bytes)."""
    sock.send(_request(seq))
    out = []
    while True:
        rows, done = parse(sock.recv(1 << 16))
        out += rows
        if done:
            return out


def serve(lines, answer) -> None:
    """The in-node loop: a query per line, an answer per line."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as sock:
        for seq, line in enumerate(lines, 1):
            src, dst, port = line.split()
            answer(sum(n for s, d, p, n in connections(sock, seq) if s == src and d == dst and p == int(port)))


class TcpDiag:
    """The runner's end: one process in `node` answering `notsent(src, dst, port)`."""

    def __init__(self, net, node: str) -> None:
        self.node = node
        self.proc = net.popen(node, [sys.executable, "-u", "-m", "wearlab.nodes.tcp_diag"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()

    def notsent(self, src: str, dst: str, port: int) -> int:
        with self.lock:
            self.proc.stdin.write(f"{src} {dst} {port}\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            raise OSError(f"{self.node}: the TCP diagnostics process ended ({self.proc.poll()})")
        return int(answer)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main() -> None:
    def answer(n: int) -> None:
        print(n, flush=True)
    serve(sys.stdin, answer)


if __name__ == "__main__":
    main()
