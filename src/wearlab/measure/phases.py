"""Bytes on the wire per connection phase, read from a pcap capture.

This reproduces the accounting of Table III of "Are Wearables Ready for HTTPS?": for one TCP
connection, the bytes (and packets) each direction spends in the TCP handshake, the TLS
handshake, the data transfer and the teardown.

What is counted
---------------
Every packet of the connection counts with its frame length on the wire as captured, i.e. the
pcap record's *original* length (``orig_len``), which includes the link-layer header (14 bytes
for Ethernet, as captured by tcpdump on a veth) and is unaffected by snaplen truncation.
"up" is client->server, "down" is server->client. Every packet lands in exactly one phase, so
the four phases of a direction always add up to that direction's total.

Note that the kernel may hand tcpdump segmentation-offload "super packets" (GSO/GRO/TSO)
larger than the MTU; they are counted as captured. Disable offloads on the capture interface
(``ethtool -K <if> tso off gso off gro off``) if per-packet header overhead must match a real
link exactly.

Phase rules (per packet, in capture order)
------------------------------------------
``tcp_handshake``
    Every packet carrying SYN (the SYN, the SYN-ACK, and their retransmissions), plus the
    client's first packet after the SYN-ACK if it is a pure ACK (no payload, no FIN/RST). If
    that third-leg ACK carries payload it is not a handshake packet: it counts where its payload
    belongs (below). For plain HTTP, a stray packet between the handshake and the request (rare)
    also counts as ``tcp_handshake``.
``tls_handshake`` (HTTPS, or tcpcrypt's key exchange; always 0 for plain HTTP)
    Every packet after the TCP handshake and before the data phase.
``data``
    Starts at the first client->server packet carrying the first byte of the HTTP request, and
    includes every packet (both directions) from there on until the teardown.

    * plain HTTP: the first client->server packet with TCP payload.
    * TLS: the client->server byte stream is reassembled by TCP sequence number (handling
      retransmissions, overlaps and reordering) and walked record by record (5-byte header:
      content type, version, length). TLS 1.0-1.2: the request is the first record of content
      type 23 (application_data). TLS 1.3: the client's Finished is itself an encrypted type-23
      record, so the request is the *second* type-23 record from the client (type-20
      change_cipher_spec records are ignored). The data phase starts at the first packet (in
      capture order) whose payload holds the first byte of that record's header.
    * tcpcrypt (``tls_version="tcpcrypt"``, RFC 8548): the client->server stream starts with
      Init1 (INIT1_MAGIC 0x15101a0e, then its 4-byte big-endian message_len, §4.1); the data
      phase starts at the packet holding the stream byte right after Init1, the first frame
      (the client sends no frame before Init2 has arrived). A stream that does not start with
      INIT1_MAGIC fell back to plain TCP and is counted as plain HTTP. The TCP-ENO options of
      the SYN, SYN-ACK and third segment count in ``tcp_handshake``, as every header does.
      ``tls_version`` ("1.0".."1.3") selects the rule; "auto" takes the version the server
      selected in its ServerHello (plain HTTP if the client sent no ClientHello); an explicit
      version contradicting the captured ServerHello raises ``ValueError``. Only the client's
      record headers up to the request need to be in the capture, not the record bodies; if
      snaplen truncation or capture drops lost one of them, ``ValueError`` says so (tcpdump's
      default snaplen captures everything).
``teardown``
    From the first packet carrying FIN or RST (either direction), or - if earlier - the first
    packet carrying the start of a TLS alert record (type 21, e.g. close_notify) sent, in either
    direction, after the data phase began, to the end of the capture. (An alert before the data
    phase, e.g. a handshake failure, is part of ``tls_handshake``.)

If the connection never reaches a phase, that phase is 0 (e.g. a failed TLS handshake has no
data phase; a capture that stops before FIN has no teardown).

Known limitations
-----------------
* Attribution is per packet, never per byte: a segment holding the client Finished and the
  request together counts as data; a segment holding the end of the response and a
  close_notify counts as teardown.
* TLS 1.3 NewSessionTicket messages from the server are encrypted type-23 records that the
  server sends once it has the client's Finished: a ticket captured after the request packet
  counts as data, one captured before it (common on fast links) as tls_handshake. TLS 1.3
  alerts (close_notify included) are encrypted with outer type 23 too, so in TLS 1.3 they count
  as data and the teardown starts at the first FIN/RST. None of this is distinguishable without
  the keys.
* The TLS 1.3 rule assumes the client sends exactly one encrypted handshake record (its
  Finished): client-certificate authentication and 0-RTT early data are not handled.
* Alerts are only recognised while the record walk of a direction is intact; if record headers
  were not captured (capture drops, tiny snaplen) the teardown falls back to the first FIN/RST.

Reading the capture is apart from these rules: ``measure.pcap`` reads the file, ``measure.tcp``
decodes the frames, picks the connection's packets and reassembles each direction's byte stream,
``measure.tls`` walks the TLS records and tcpcrypt's Init1 in it. What they read and skip (link
types, one connection per client endpoint, no pcapng) is in their docstrings.

Parsers never crash on malformed input: undecodable packets are skipped; a file that is not a
pcap, or a TLS stream that cannot be walked where the rules need it, raises ``ValueError``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wearlab.measure.pcap import read_pcap
from wearlab.measure.tcp import ACK, FIN, RST, SYN, ConnPacket, ReassembledStream, connection_packets
from wearlab.measure.tls_records import (
    TCPCRYPT,
    detect_tls_version,
    server_hello_version,
    tcpcrypt_init1_end,
    walk_tls_records,
)
from wearlab.model.tls import TLS_VERSIONS

PHASES = ("tcp_handshake", "tls_handshake", "data", "teardown")


def _zeros() -> dict[str, int]:
    return {p: 0 for p in PHASES}


@dataclass
class PhaseBytes:
    """Frame bytes and packet counts per phase and direction (all four phase keys always present)."""

    up: dict[str, int] = field(default_factory=_zeros)  # client -> server
    down: dict[str, int] = field(default_factory=_zeros)  # server -> client
    up_packets: dict[str, int] = field(default_factory=_zeros)
    down_packets: dict[str, int] = field(default_factory=_zeros)

    def total_up(self) -> int:
        return sum(self.up.values())

    def total_down(self) -> int:
        return sum(self.down.values())

    def as_row(self) -> dict[str, int]:
        """Flat dict: bytes_{up,down}_<phase>, bytes_{up,down}_total, packets_{up,down}_<phase>,
        packets_{up,down}_total."""
        row: dict[str, int] = {}
        for p in PHASES:
            row[f"bytes_up_{p}"] = self.up[p]
            row[f"bytes_down_{p}"] = self.down[p]
        row["bytes_up_total"] = self.total_up()
        row["bytes_down_total"] = self.total_down()
        for p in PHASES:
            row[f"packets_up_{p}"] = self.up_packets[p]
            row[f"packets_down_{p}"] = self.down_packets[p]
        row["packets_up_total"] = sum(self.up_packets.values())
        row["packets_down_total"] = sum(self.down_packets.values())
        return row


# ---------------------------------------------------------------------------------------------
# phase split


def _check_version(tls_version: str | None) -> str | None:
    if tls_version is None or tls_version in ("auto", TCPCRYPT):
        return tls_version
    v = str(tls_version).lower().removeprefix("tlsv").removeprefix("tls")
    if v in ("1", "10"):
        v = "1.0"
    if v not in TLS_VERSIONS:
        raise ValueError(f"tls_version must be None (plain HTTP), 'auto' or one of "
                         f"{', '.join(TLS_VERSIONS)}; got {tls_version!r}")
    return v


def classify_packets(packets: Sequence[ConnPacket], *, tls_version: str | None) -> list[str]:
    """The phase (one of PHASES) of each packet of one connection, in order.

    ``tls_version``: None for plain HTTP, "1.0".."1.3" for HTTPS with that version, or "auto"
    to decide from the capture (ClientHello present? version selected in the ServerHello). An
    explicit version that contradicts the captured ServerHello raises ValueError.
    """
    pkts = list(packets)
    tls = _check_version(tls_version)
    up = ReassembledStream(pkts, "up")
    down = ReassembledStream(pkts, "down")
    if tls == TCPCRYPT:
        init1_end = tcpcrypt_init1_end(up)
        if init1_end is None:
            tls = None  # fell back to plain TCP: plain HTTP's rules
        else:
            start = up.first_covering(init1_end)  # the data phase: the first frame after Init1
    if tls == "auto":
        tls = detect_tls_version(pkts)
    elif tls is not None and tls != TCPCRYPT:
        seen = server_hello_version(down)
        if seen is not None and seen != tls:
            raise ValueError(f"tls_version={tls!r} but the captured ServerHello selected TLS {seen}")

    # TCP handshake: SYNs, SYN-ACKs, and the client's pure ACK right after the first SYN-ACK.
    handshake: set[int] = set()
    synack_seen = third_leg_done = False
    for i, p in enumerate(pkts):
        if p.flags & SYN:
            handshake.add(i)
            if p.direction == "down" and p.flags & ACK:
                synack_seen = True
        elif synack_seen and not third_leg_done and p.direction == "up":
            third_leg_done = True
            if p.flags & ACK and not p.flags & (FIN | RST) and p.payload_len == 0:
                handshake.add(i)

    # Data phase start.
    data_start: int | None = None
    up_records: list[tuple[int, int]] = []
    if tls is None:
        data_start = next((i for i, p in enumerate(pkts)
                           if p.direction == "up" and p.payload_len > 0 and not p.flags & RST),
                          None)
    elif tls == TCPCRYPT:
        data_start = start
    else:
        up_records, problem = walk_tls_records(up)
        nth = 2 if tls == "1.3" else 1
        app = [o for o, typ in up_records if typ == 23]
        if len(app) >= nth:
            data_start = up.first_covering(app[nth - 1])
        elif problem is not None:
            raise ValueError(f"cannot locate the HTTP request in the client->server TLS stream: "
                             f"{problem}")

    # Teardown start: first FIN/RST, or first alert record sent after the data phase began.
    teardown = next((i for i, p in enumerate(pkts) if p.flags & (FIN | RST)), None)
    if tls not in (None, TCPCRYPT) and data_start is not None:
        for stream, records in ((up, up_records), (down, walk_tls_records(down)[0])):
            for o, typ in records:
                if typ != 21:
                    continue
                j = stream.first_covering(o)
                if j is not None and j >= data_start and (teardown is None or j < teardown):
                    teardown = j

    phases: list[str] = []
    for i in range(len(pkts)):
        if i in handshake:
            phases.append("tcp_handshake")
        elif teardown is not None and i >= teardown:
            phases.append("teardown")
        elif data_start is not None and i >= data_start:
            phases.append("data")
        elif tls is not None:
            phases.append("tls_handshake")
        else:
            phases.append("tcp_handshake")
    return phases


def split_phases(packets: Sequence[ConnPacket], *, tls_version: str | None) -> PhaseBytes:
    """Frame bytes and packets per phase and direction for one connection (see module doc)."""
    pkts = list(packets)
    return _count(pkts, classify_packets(pkts, tls_version=tls_version), PhaseBytes())


def _count(pkts: Sequence[ConnPacket], phases: Sequence[str], result: PhaseBytes) -> PhaseBytes:
    for p, ph in zip(pkts, phases, strict=True):
        if p.direction == "up":
            result.up[ph] += p.frame_len
            result.up_packets[ph] += 1
        else:
            result.down[ph] += p.frame_len
            result.down_packets[ph] += 1
    return result


WIRE_TIMES = ("wire_connect_s", "wire_tls_handshake_s", "wire_pretransfer_s", "wire_starttransfer_s",
              "wire_total_s")


@dataclass
class ConnectionPhases(PhaseBytes):
    """Bytes per phase plus the phase boundaries in time, as curl names them but read from the
    capture (departures and arrivals at the client's interface), relative to the first SYN:

    ``wire_connect_s``        SYN-ACK arrival (curl: time_connect)
    ``wire_pretransfer_s``    departure of the first request packet (time_pretransfer)
    ``wire_tls_handshake_s``  pretransfer - connect for TLS; None (no such phase) for plain HTTP
    ``wire_starttransfer_s``  arrival of the first response byte (time_starttransfer)
    ``wire_total_s``          arrival of the last response byte before the teardown (time_total)

    A boundary the connection never reached is None.
    """

    times: dict[str, float | None] = field(default_factory=dict)

    def as_row(self) -> dict[str, Any]:
        return {**super().as_row(), **self.times}


def wire_times(packets: Sequence[ConnPacket], phases: Sequence[str], *, tls: bool) -> dict[str, float | None]:
    out: dict[str, float | None] = dict.fromkeys(WIRE_TIMES)
    syn = next((p for p in packets if p.flags & SYN and not p.flags & ACK and p.direction == "up"), None)
    if syn is None:
        return out
    t0 = syn.ts

    def first(pred) -> float | None:
        return next((p.ts - t0 for p, ph in zip(packets, phases) if pred(p, ph)), None)

    out["wire_connect_s"] = first(lambda p, ph: p.direction == "down" and p.flags & SYN and p.flags & ACK)
    out["wire_pretransfer_s"] = first(lambda p, ph: ph == "data" and p.direction == "up")
    out["wire_starttransfer_s"] = first(lambda p, ph: ph == "data" and p.direction == "down" and p.payload_len)
    last = [p.ts - t0 for p, ph in zip(packets, phases) if ph == "data" and p.direction == "down" and p.payload_len]
    out["wire_total_s"] = last[-1] if last else None
    if out["wire_connect_s"] is not None and out["wire_pretransfer_s"] is not None:
        out["wire_tls_handshake_s"] = out["wire_pretransfer_s"] - out["wire_connect_s"] if tls else None
    return out


def connection_phases(packets: Sequence[ConnPacket], *, tls_version: str | None) -> ConnectionPhases:
    """Bytes per phase and the phase boundaries in time of one connection."""
    pkts = list(packets)
    phases = classify_packets(pkts, tls_version=tls_version)
    result = _count(pkts, phases, ConnectionPhases())
    result.times = wire_times(pkts, phases, tls=tls_version not in (None, "auto", TCPCRYPT) or "tls_handshake" in phases)
    return result


def phases_from_pcap(path: str | os.PathLike[str], client: tuple[str, int], *,
                     tls_version: str | None) -> PhaseBytes:
    """Convenience: read a pcap file and split the connection of ``client`` into phases."""
    return split_phases(connection_packets(read_pcap(path), client), tls_version=tls_version)
