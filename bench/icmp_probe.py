"""ICMP echo round trips with microsecond resolution, measured two ways (run inside a node).

iputils ping prints per-packet RTTs with 2-3 significant digits (10.1 ms, 100 ms), too coarse to
see a bias of tens of microseconds. This probe sends echo requests on a raw socket one at a time
(stop-and-wait) and records, per probe, in nanoseconds:

- user RTT   = kernel receive time of the reply - user-space time just before sendto()
               (what ping measures: it includes the send system call of a UML guest);
- kernel RTT = kernel receive time of the reply - the time the request entered the qdisc layer
               (SOF_TIMESTAMPING_TX_SCHED): the wire-level round trip, both netem traversals and
               the peer's echo reply, without the sender's user space.

Usage: icmp_probe.py DST COUNT INTERVAL_S  -> one JSON object on stdout.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import sys
import time

SO_TIMESTAMPING = 37            # SO_TIMESTAMPING_OLD on x86-64: struct timespec is 64-bit there
SOF_TX_SOFTWARE = 1 << 1
SOF_RX_SOFTWARE = 1 << 3
SOF_SOFTWARE = 1 << 4
SOF_TX_SCHED = 1 << 8
SOF_OPT_TSONLY = 1 << 11
SCM_TSTAMP_SCHED = 1
IP_RECVERR = 11


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes) -> bytes:
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, checksum(hdr + payload), ident, seq) + payload


def ts_from(ancdata) -> tuple[int | None, int | None]:
    """(software timestamp in ns, ee_info of a sock_extended_err) from ancillary data."""
    ts, info = None, None
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            ts = sec * 1_000_000_000 + nsec
        elif level == socket.SOL_IP and kind == IP_RECVERR and len(data) >= 16:
            # struct sock_extended_err: u32 errno; u8 origin, type, code, pad; u32 info; u32 data
            info = struct.unpack("IBBBBII", data[:16])[5]
    return ts, info


def main() -> int:
    dst, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING,
                 SOF_TX_SCHED | SOF_RX_SOFTWARE | SOF_SOFTWARE | SOF_OPT_TSONLY)
    s.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
    ident = os.getpid() & 0xFFFF
    payload = b"wearlab-bench-rtt" + bytes(39)  # 56 bytes, as ping's default
    user, kern, lost = [], [], 0
    for seq in range(1, count + 1):
        t_next = time.monotonic() + interval
        t_user = time.time_ns()
        s.sendto(echo_request(ident, seq, payload), (dst, 0))
        t_sched, t_rx = None, None
        deadline = time.monotonic() + 5.0
        while (t_rx is None or t_sched is None) and time.monotonic() < deadline:
            r, _, x = select.select([s], [], [s], max(0.0, deadline - time.monotonic()))
            if not r and not x:
                break
            # The TX timestamp arrives on the error queue (POLLERR), the reply on the normal queue.
            try:
                _, anc, _, _ = s.recvmsg(0, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
                ts, info = ts_from(anc)
                if info == SCM_TSTAMP_SCHED and ts is not None:
                    t_sched = ts
            except BlockingIOError:
                pass
            try:
                data, anc, _, _ = s.recvmsg(2048, 512, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            ihl = (data[0] & 0x0F) * 4
            typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq == seq:
                t_rx, _ = ts_from(anc)
        if t_rx is None:
            lost += 1
        else:
            user.append((t_rx - t_user) / 1e6)
            if t_sched is not None:
                kern.append((t_rx - t_sched) / 1e6)
        time.sleep(max(0.0, t_next - time.monotonic()))
    json.dump({"user_ms": user, "kernel_ms": kern, "lost": lost, "sent": count}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
