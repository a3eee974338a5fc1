//! Reading a packet capture for `tcpcryptd decrypt`: classic pcap and pcapng files, their TCP
//! segments over IPv4, and each connection's two byte streams.
//!
//! No pcap crate is vendored (the build is offline and `--locked`), so this is a minimal reader
//! of the two file formats' framing (pcap: the 24-byte header and 16-byte records, either byte
//! order, micro- or nanosecond; pcapng: Section Header, Interface Description, Enhanced and
//! Simple Packet blocks, other blocks skipped) and of the link layers tcpdump writes on Linux
//! (Ethernet with 802.1Q/802.1ad tags, Linux cooked SLL and SLL2, raw IP, BSD loopback).
//!
//! Reassembly, per direction: segments are placed by sequence number relative to the SYN's
//! (so out-of-order segments are put in order), a retransmission or an overlap contributes only
//! the bytes not yet seen, and the stream ends at the first hole (bytes the capture lost: what
//! follows cannot be framed). Not handled: IPv6 (TCP-ENO runs on IPv4 only in eno-bpf), IP
//! fragments, connections whose SYN is not in the capture, data in a SYN (TCP Fast Open, which
//! tcpcrypt does not use), streams longer than 4 GiB (sequence wrap), truncated snapshots (`-s`
//! below the packet size: a segment cut short counts as a hole).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};

use anyhow::{anyhow, bail, Context};

/// One TCP segment over IPv4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub seq: u32,
    pub flags: u8,
    /// The TCP options, raw.
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
    /// The payload is shorter than the IP header says (the capture's snapshot length cut it).
    pub cut: bool,
}

pub const SYN: u8 = 0x02;
pub const ACK: u8 = 0x10;
pub const RST: u8 = 0x04;

const LINKTYPE_NULL: u32 = 0;
const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const LINKTYPE_RAW_ALT: [u32; 2] = [12, 14];
const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_LINUX_SLL2: u32 = 276;

fn u16be(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32be(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u32e(b: &[u8], at: usize, le: bool) -> Option<u32> {
    let a: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if le { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) })
}
fn u16e(b: &[u8], at: usize, le: bool) -> Option<u16> {
    let a: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
    Some(if le { u16::from_le_bytes(a) } else { u16::from_be_bytes(a) })
}

/// The packets of a capture file: (link type, packet bytes), in file order.
pub fn packets(data: &[u8]) -> anyhow::Result<Vec<(u32, &[u8])>> {
    let magic = u32e(data, 0, true).ok_or_else(|| anyhow!("too short for a capture file"))?;
    match magic {
        0x0A0D_0D0A => pcapng(data),
        0xa1b2_c3d4 | 0xa1b2_3c4d => classic(data, true),
        0xd4c3_b2a1 | 0x4d3c_b2a1 => classic(data, false),
        m => bail!("not a pcap or pcapng file (magic {m:#010x})"),
    }
}

fn classic(data: &[u8], le: bool) -> anyhow::Result<Vec<(u32, &[u8])>> {
    let link = u32e(data, 20, le).ok_or_else(|| anyhow!("pcap header truncated"))? & 0x0FFF_FFFF;
    let mut out = Vec::new();
    let mut off = 24;
    while off < data.len() {
        let incl = u32e(data, off + 8, le).ok_or_else(|| anyhow!("pcap record header truncated at byte {off}"))? as usize;
        let start = off + 16;
        let pkt = data.get(start..start + incl).ok_or_else(|| anyhow!("pcap record at byte {off} runs past the end of the file"))?;
        out.push((link, pkt));
        off = start + incl;
    }
    Ok(out)
}

fn pcapng(data: &[u8]) -> anyhow::Result<Vec<(u32, &[u8])>> {
    let mut out = Vec::new();
    let mut links: Vec<u32> = Vec::new();
    let mut le = true;
    let mut off = 0;
    while off < data.len() {
        let kind_le = u32e(data, off, true).ok_or_else(|| anyhow!("pcapng block truncated at byte {off}"))?;
        if kind_le == 0x0A0D_0D0A {
            // Section Header Block: its byte-order magic decides this section's byte order.
            le = match u32e(data, off + 8, true) {
                Some(0x1A2B_3C4D) => true,
                Some(0x4D3C_2B1A) => false,
                _ => bail!("pcapng section at byte {off}: bad byte-order magic"),
            };
            links.clear();
        }
        let kind = u32e(data, off, le).unwrap_or(0);
        let len = u32e(data, off + 4, le).ok_or_else(|| anyhow!("pcapng block truncated at byte {off}"))? as usize;
        if len < 12 || !len.is_multiple_of(4) || off + len > data.len() {
            bail!("pcapng block at byte {off}: bad length {len}");
        }
        let body = &data[off + 8..off + len - 4];
        match kind {
            1 => links.push(u16e(body, 0, le).ok_or_else(|| anyhow!("pcapng interface block truncated"))? as u32),
            6 => {
                let ifc = u32e(body, 0, le).unwrap_or(0) as usize;
                let cap = u32e(body, 12, le).ok_or_else(|| anyhow!("pcapng packet block truncated at byte {off}"))? as usize;
                let link = *links.get(ifc).ok_or_else(|| anyhow!("pcapng packet at byte {off} names unknown interface {ifc}"))?;
                let pkt = body.get(20..20 + cap).ok_or_else(|| anyhow!("pcapng packet at byte {off} runs past its block"))?;
                out.push((link, pkt));
            }
            3 => {
                let link = *links.first().ok_or_else(|| anyhow!("pcapng simple packet before any interface"))?;
                let orig = u32e(body, 0, le).unwrap_or(0) as usize;
                let pkt = body.get(4..).unwrap_or_default();
                out.push((link, &pkt[..orig.min(pkt.len())]));
            }
            _ => {}
        }
        off += len;
    }
    Ok(out)
}

/// The IPv4 packet in a link-layer frame (None: not IPv4, or too short).
fn ipv4(link: u32, pkt: &[u8]) -> anyhow::Result<Option<&[u8]>> {
    let (ethertype, ip) = match link {
        LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut et = u16be(pkt, at);
            while matches!(et, Some(0x8100 | 0x88a8)) {
                at += 4;
                et = u16be(pkt, at);
            }
            (et, pkt.get(at + 2..))
        }
        LINKTYPE_LINUX_SLL => (u16be(pkt, 14), pkt.get(16..)),
        LINKTYPE_LINUX_SLL2 => (u16be(pkt, 0), pkt.get(20..)),
        LINKTYPE_RAW | LINKTYPE_IPV4 => (Some(0x0800), Some(pkt)),
        l if LINKTYPE_RAW_ALT.contains(&l) => (Some(0x0800), Some(pkt)),
        LINKTYPE_NULL => {
            let fam = u32e(pkt, 0, true).map(|f| if f > 0xffff { f.swap_bytes() } else { f });
            (if fam == Some(2) { Some(0x0800) } else { None }, pkt.get(4..))
        }
        l => bail!("unsupported link type {l} (Ethernet, Linux cooked SLL/SLL2, raw IP, loopback are read)"),
    };
    Ok(match (ethertype, ip) {
        (Some(0x0800), Some(ip)) if ip.first().is_some_and(|v| v >> 4 == 4) => Some(ip),
        _ => None,
    })
}

/// The TCP segment in an IPv4 packet (None: not TCP, a fragment, or malformed).
fn tcp(ip: &[u8]) -> Option<Segment> {
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16be(ip, 2)?);
    let frag = u16be(ip, 6)?;
    if ip.get(9) != Some(&6) || frag & 0x3fff != 0 || ihl < 20 || total < ihl {
        return None;
    }
    let src = Ipv4Addr::from(u32be(ip, 12)?);
    let dst = Ipv4Addr::from(u32be(ip, 16)?);
    let t = ip.get(ihl..total.min(ip.len()))?;
    let doff = usize::from(t.get(12)? >> 4) * 4;
    if doff < 20 || t.len() < doff {
        return None;
    }
    let payload_len = total - ihl - doff.min(total - ihl);
    let payload = t[doff..].to_vec();
    Some(Segment {
        src: SocketAddrV4::new(src, u16be(t, 0)?),
        dst: SocketAddrV4::new(dst, u16be(t, 2)?),
        seq: u32be(t, 4)?,
        flags: t[13],
        options: t[20..doff].to_vec(),
        cut: payload.len() < payload_len,
        payload,
    })
}

/// Every TCP-over-IPv4 segment of a capture file, in file order.
pub fn segments(data: &[u8]) -> anyhow::Result<Vec<Segment>> {
    let mut out = Vec::new();
    for (link, pkt) in packets(data)? {
        if let Some(ip) = ipv4(link, pkt)? {
            out.extend(tcp(ip));
        }
    }
    Ok(out)
}

/// The ENO option (kind 69, kind and length included) among raw TCP options, if there is one.
pub fn eno_option(opts: &[u8]) -> Option<Vec<u8>> {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            k => {
                let l = usize::from(*opts.get(i + 1)?);
                if l < 2 || i + l > opts.len() {
                    return None;
                }
                if k == 69 {
                    return Some(opts[i..i + l].to_vec());
                }
                i += l;
            }
        }
    }
    None
}

/// One direction of a connection, reassembled.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stream {
    pub bytes: Vec<u8>,
    /// Where the first hole is (bytes lost from the capture), if there is one: the stream
    /// stops there.
    pub hole_at: Option<usize>,
    /// Segments that only repeated bytes already placed (retransmissions).
    pub retransmitted: usize,
}

/// A connection as the capture saw it (from its SYN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The active opener (its SYN) and the passive one.
    pub a: SocketAddrV4,
    pub b: SocketAddrV4,
    pub syn_option: Vec<u8>,
    pub synack_option: Vec<u8>,
    pub a_to_b: Stream,
    pub b_to_a: Stream,
    pub reset: bool,
}

#[derive(Default)]
struct Half {
    isn: Option<u32>,
    /// Payload by offset into the stream (relative sequence number - 1).
    segs: BTreeMap<u64, Vec<Vec<u8>>>,
    cut_at: Option<u64>,
}

fn assemble(h: &Half) -> Stream {
    let mut s = Stream::default();
    for (&at, pieces) in &h.segs {
        for p in pieces {
            let end = at + p.len() as u64;
            let have = s.bytes.len() as u64;
            if at > have {
                s.hole_at = Some(s.bytes.len());
                return s;
            }
            if end <= have {
                s.retransmitted += 1;
                continue;
            }
            s.bytes.extend_from_slice(&p[(have - at) as usize..]);
        }
    }
    if let Some(c) = h.cut_at {
        if c < s.bytes.len() as u64 {
            s.bytes.truncate(c as usize);
            s.hole_at = Some(c as usize);
        }
    }
    s
}

/// The capture's connections that start with a SYN, in the order of their SYNs. A new SYN on a
/// 4-tuple starts a new connection.
pub fn connections(segments: &[Segment]) -> Vec<Connection> {
    struct Conn {
        a: SocketAddrV4,
        b: SocketAddrV4,
        syn_option: Vec<u8>,
        synack_option: Option<Vec<u8>>,
        halves: [Half; 2],
        reset: bool,
    }
    let mut conns: Vec<Conn> = Vec::new();
    let mut live: BTreeMap<(SocketAddrV4, SocketAddrV4), usize> = BTreeMap::new();
    for s in segments {
        if s.flags & (SYN | ACK) == SYN {
            let known = live.get(&(s.src, s.dst)).map(|&i| conns[i].halves[0].isn == Some(s.seq));
            if known != Some(true) {
                // a new connection (a retransmitted SYN has the same ISN)
                let mut c = Conn {
                    a: s.src,
                    b: s.dst,
                    syn_option: eno_option(&s.options).unwrap_or_default(),
                    synack_option: None,
                    halves: [Half::default(), Half::default()],
                    reset: false,
                };
                c.halves[0].isn = Some(s.seq);
                live.insert((s.src, s.dst), conns.len());
                live.insert((s.dst, s.src), conns.len());
                conns.push(c);
            }
            continue;
        }
        let Some(&i) = live.get(&(s.src, s.dst)) else { continue };
        let c = &mut conns[i];
        let dir = usize::from(s.src != c.a);
        if s.flags & (SYN | ACK) == SYN | ACK {
            if dir == 1 && c.synack_option.is_none() {
                c.synack_option = Some(eno_option(&s.options).unwrap_or_default());
                c.halves[1].isn = Some(s.seq);
            }
            continue;
        }
        if s.flags & RST != 0 {
            c.reset = true;
        }
        let h = &mut c.halves[dir];
        let Some(isn) = h.isn else { continue };
        if s.payload.is_empty() {
            continue;
        }
        // Offset in the stream: the byte after the SYN is offset 0.
        let at = u64::from(s.seq.wrapping_sub(isn).wrapping_sub(1));
        if s.cut {
            let end = at + s.payload.len() as u64;
            h.cut_at = Some(h.cut_at.map_or(end, |c| c.min(end)));
        }
        h.segs.entry(at).or_default().push(s.payload.clone());
    }
    conns
        .into_iter()
        .map(|c| Connection {
            a: c.a,
            b: c.b,
            syn_option: c.syn_option,
            synack_option: c.synack_option.unwrap_or_default(),
            a_to_b: assemble(&c.halves[0]),
            b_to_a: assemble(&c.halves[1]),
            reset: c.reset,
        })
        .collect()
}

/// The connections of a capture file.
pub fn read(path: &std::path::Path) -> anyhow::Result<Vec<Connection>> {
    let data = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    let segs = segments(&data).with_context(|| format!("{}", path.display()))?;
    Ok(connections(&segs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame with IPv4 and TCP.
    fn frame((src, sport): ([u8; 4], u16), (dst, dport): ([u8; 4], u16), seq: u32, flags: u8, opts: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut tcp = Vec::new();
        tcp.extend(sport.to_be_bytes());
        tcp.extend(dport.to_be_bytes());
        tcp.extend(seq.to_be_bytes());
        tcp.extend(0u32.to_be_bytes());
        let mut o = opts.to_vec();
        while !o.len().is_multiple_of(4) {
            o.push(0);
        }
        tcp.push((((20 + o.len()) / 4) as u8) << 4);
        tcp.push(flags);
        tcp.extend([0, 0, 0, 0, 0, 0]);
        tcp.extend(&o);
        tcp.extend(payload);
        let mut ip = vec![0x45, 0];
        ip.extend(((20 + tcp.len()) as u16).to_be_bytes());
        ip.extend([0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend(src);
        ip.extend(dst);
        ip.extend(tcp);
        let mut eth = vec![0u8; 12];
        eth.extend([0x08, 0x00]);
        eth.extend(ip);
        eth
    }

    fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend(0xa1b2c3d4u32.to_le_bytes());
        f.extend(2u16.to_le_bytes());
        f.extend(4u16.to_le_bytes());
        f.extend([0u8; 8]);
        f.extend(65535u32.to_le_bytes());
        f.extend(1u32.to_le_bytes());
        for p in frames {
            f.extend([0u8; 8]);
            f.extend((p.len() as u32).to_le_bytes());
            f.extend((p.len() as u32).to_le_bytes());
            f.extend(p);
        }
        f
    }

    fn pcapng(frames: &[Vec<u8>], le: bool) -> Vec<u8> {
        let w32 = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
        let w16 = |v: u16| if le { v.to_le_bytes() } else { v.to_be_bytes() };
        let mut f = Vec::new();
        f.extend(w32(0x0A0D0D0A));
        f.extend(w32(28));
        f.extend(w32(0x1A2B3C4D));
        f.extend(w16(1));
        f.extend(w16(0));
        f.extend([0xff; 8]);
        f.extend(w32(28));
        f.extend(w32(1));
        f.extend(w32(20));
        f.extend(w16(1));
        f.extend(w16(0));
        f.extend(w32(0));
        f.extend(w32(20));
        // a block of a kind we skip
        f.extend(w32(0x0BAD));
        f.extend(w32(16));
        f.extend([1, 2, 3, 4]);
        f.extend(w32(16));
        for p in frames {
            let pad = (4 - p.len() % 4) % 4;
            let len = (32 + p.len() + pad) as u32;
            f.extend(w32(6));
            f.extend(w32(len));
            f.extend(w32(0));
            f.extend(w32(0));
            f.extend(w32(0));
            f.extend(w32(p.len() as u32));
            f.extend(w32(p.len() as u32));
            f.extend(p);
            f.extend(vec![0u8; pad]);
            f.extend(w32(len));
        }
        f
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    fn conversation() -> Vec<Vec<u8>> {
        let eno_syn = [69, 5, 0x23, 0x21, 0x22];
        let eno_synack = [1, 69, 4, 0x01, 0x23];
        vec![
            frame((A, 40000), (B, 80), 1000, SYN, &eno_syn, b""),
            frame((B, 80), (A, 40000), 5000, SYN | ACK, &eno_synack, b""),
            frame((A, 40000), (B, 80), 1001, ACK, &[69, 2], b"hello "),
            // out of order, then the segment before it, then a retransmission overlapping both
            frame((A, 40000), (B, 80), 1013, ACK, &[], b"!!"),
            frame((A, 40000), (B, 80), 1007, ACK, &[], b"world"),
            frame((A, 40000), (B, 80), 1012, ACK, &[], b"?"),
            frame((A, 40000), (B, 80), 1005, ACK, &[], b"o world?!!"),
            frame((B, 80), (A, 40000), 5001, ACK, &[], b"reply"),
            // a hole in B's stream: "lost" never arrives, "after" cannot be placed
            frame((B, 80), (A, 40000), 5010, ACK, &[], b"after"),
            frame((A, 40000), (B, 80), 1015, ACK | RST, &[], b""),
        ]
    }

    fn check(conns: &[Connection]) {
        assert_eq!(conns.len(), 1);
        let c = &conns[0];
        assert_eq!((c.a.port(), c.b.port()), (40000, 80));
        assert_eq!(c.syn_option, [69, 5, 0x23, 0x21, 0x22]);
        assert_eq!(c.synack_option, [69, 4, 0x01, 0x23]);
        assert_eq!(c.a_to_b.bytes, b"hello world?!!");
        assert_eq!(c.a_to_b.hole_at, None);
        // "o world?!!" (placed before the segments it overlaps, by its offset) leaves "world",
        // "?" and "!!" nothing new
        assert_eq!(c.a_to_b.retransmitted, 3);
        assert_eq!(c.b_to_a.bytes, b"reply");
        assert_eq!(c.b_to_a.hole_at, Some(5));
        assert!(c.reset);
    }

    #[test]
    fn classic_and_pcapng_of_either_byte_order() {
        let frames = conversation();
        check(&connections(&segments(&pcap(&frames)).unwrap()));
        check(&connections(&segments(&pcapng(&frames, true)).unwrap()));
        check(&connections(&segments(&pcapng(&frames, false)).unwrap()));
        assert!(segments(b"not a capture file").is_err());
        let mut cut = pcap(&frames);
        cut.truncate(cut.len() - 3);
        assert!(segments(&cut).is_err(), "a truncated record is an error, not a short stream");
    }

    #[test]
    fn eno_option_among_others() {
        assert_eq!(eno_option(&[1, 1, 2, 4, 5, 0xb4, 69, 3, 0x23]), Some(vec![69, 3, 0x23]));
        assert_eq!(eno_option(&[2, 4, 5, 0xb4, 0, 69, 3, 0x23]), None, "after EOL");
        assert_eq!(eno_option(&[69, 9, 1]), None, "runs past the options");
    }
}
