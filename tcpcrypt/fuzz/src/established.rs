//! fuzz_established: a session that is already established (a deterministic fresh key
//! exchange replayed from setup, or a resumption from setup's tickets: no ECDH at all), of
//! either role, any TEP and AEAD. The target knows the traffic keys (crypto.rs) and plays the
//! peer: it seals frames with fuzzer-chosen control bytes (rekey, reserved bits) and plaintext
//! (FINp, URGp, reserved flags, any data), mutates them or not, inserts raw bytes, delivers the
//! stream in fuzzer-chosen pieces, and makes the session send data, FIN and rekeys, or see EOF.
//!
//! Oracle (a model of RFC 8548 §3.6-§3.8 beside the session):
//! * the session delivers exactly the data of the genuine frames received up to the first
//!   forged byte (URGp's urgent field stripped), never anything after it;
//! * genuine frames are never rejected, except a frame after FINp (DataAfterFin) and an URGp
//!   plaintext too short for its urgent field (BadPlaintext), which must be;
//! * the session's generation follows the rekey frames; every frame it sends opens under the
//!   key, generation and offset the peer expects, it answers a rekey, sends nothing after its
//!   FIN, and the data equals what it was given; EOF is clean exactly after FINp.
use tcpcrypt_proto::msgs::{FLAG_FINP, FLAG_URGP};
use tcpcrypt_proto::{Aead, Error, Session, Tep};

use crate::crypto::{Direction, Pair, SEED_A, SEED_B};
use crate::{DetRng, Input};

pub struct Established {
    pairs: Vec<Pair>,
}

/// What a run reached (bits of [`Established::run`]'s result; the corpus regression checks
/// that its seeds reach each).
pub mod reached {
    pub const DATA: u32 = 1 << 0;
    pub const URGP: u32 = 1 << 1;
    pub const FINP: u32 = 1 << 2;
    pub const REKEY: u32 = 1 << 3;
    pub const REKEY_ANSWERED: u32 = 1 << 4;
    pub const CLEAN_EOF: u32 = 1 << 5;
    pub const DATA_AFTER_FIN: u32 = 1 << 6;
    pub const BAD_PLAINTEXT: u32 = 1 << 7;
    pub const FORGED_REJECTED: u32 = 1 << 8;
    pub const RESUMED: u32 = 1 << 9;
    pub const SENT: u32 = 1 << 10;
    pub const ALL: u32 = (1 << 11) - 1;
}

#[derive(Clone)]
enum Kind {
    /// A frame the target sealed (and what the session must make of it).
    Frame { data: Vec<u8>, fin: bool, rekey: bool, bad_plain: bool },
    /// Raw bytes (never a frame the session can authenticate).
    Raw,
}

/// A piece of the peer's stream. `orig` is what the target meant to send (frames as sealed,
/// raw bytes as given); `cur` is what it sends: the same, or mutated (only the last segment,
/// before any of it is delivered).
struct Seg {
    orig_len: usize,
    cur: Vec<u8>,
    /// What was sealed, for re-sealing mutations.
    control: u8,
    plaintext: Vec<u8>,
    off: u64,
    kind: Kind,
}

const MAX_OPS: usize = 96;
const MAX_BYTES: usize = 1 << 20;

impl Default for Established {
    fn default() -> Self {
        Self::new()
    }
}

impl Established {
    pub fn new() -> Self {
        let mut pairs = Vec::new();
        for tep in [Tep::Curve25519, Tep::P256, Tep::P521] {
            for aead in Aead::ALL {
                pairs.push(Pair::new(tep, aead));
            }
        }
        Established { pairs }
    }

    pub fn run(&mut self, data: &[u8]) -> u32 {
        let mut r = Input::new(data);
        let c0 = r.u8();
        let c1 = r.u8();
        let pair = &self.pairs[usize::from(c0 & 0x0f) % self.pairs.len()];
        let test_b = c0 & 0x10 == 0;
        // A fresh exchange costs two scalar multiplications per run: X25519 only (P-256/P-521
        // sessions are resumed ones; the frame code does not depend on the TEP, and setup checks
        // the keys of their fresh exchanges).
        let resumed = c0 & 0x20 != 0 || pair.tep != Tep::Curve25519;
        let mut cfg = pair.cfg.clone();
        cfg.rekey_after_bytes = match c1 & 3 {
            0 => None,
            1 => Some(0),
            2 => Some(64),
            _ => Some(u64::from(c1 >> 2) * 16),
        };
        cfg.max_frame_data = match (c1 >> 4) & 3 {
            0 => 16 * 1024,
            1 => 1,
            2 => 7,
            _ => 300,
        };
        cfg.cache_sessions = c1 & 0x40 == 0;
        let mfd = cfg.max_frame_data;
        let aead = pair.aead;
        // x: the session under test; tx: target -> x; rx: x -> target.
        let (mut x, mut tx, mut rx) = match (resumed, test_b) {
            (false, true) => {
                let mut x = Session::new(&pair.plan_b, cfg, None, &mut DetRng::new(SEED_B)).unwrap();
                x.receive(&pair.init1).unwrap();
                assert_eq!(x.take_outgoing(), pair.init2, "deterministic Init2");
                let tx = Direction::new(&pair.mk0, aead, true, pair.init1.len() as u64);
                let rx = Direction::new(&pair.mk0, aead, false, pair.init2.len() as u64);
                (x, tx, rx)
            }
            (false, false) => {
                let mut x = Session::new(&pair.plan_a, cfg, None, &mut DetRng::new(SEED_A)).unwrap();
                assert_eq!(x.take_outgoing(), pair.init1, "deterministic Init1");
                x.receive(&pair.init2).unwrap();
                let tx = Direction::new(&pair.mk0, aead, false, pair.init2.len() as u64);
                let rx = Direction::new(&pair.mk0, aead, true, pair.init1.len() as u64);
                (x, tx, rx)
            }
            (true, true) => {
                let x = Session::new(&pair.rplan_b, cfg, Some(pair.rticket_b.clone()), &mut DetRng::new(SEED_B)).unwrap();
                (x, Direction::new(&pair.rmk0, aead, true, 0), Direction::new(&pair.rmk0, aead, false, 0))
            }
            (true, false) => {
                let x = Session::new(&pair.rplan_a, cfg, Some(pair.rticket_a.clone()), &mut DetRng::new(SEED_A)).unwrap();
                (x, Direction::new(&pair.rmk0, aead, false, 0), Direction::new(&pair.rmk0, aead, true, 0))
            }
        };
        assert!(x.is_established());
        assert_eq!(x.next_event(), Some(tcpcrypt_proto::Event::Established));

        let mut m = Model { x_frame_budget: 2048, ..Model::default() };
        if resumed {
            m.reached |= reached::RESUMED;
        }
        let mut ops = 0;
        while !r.is_empty() && ops < MAX_OPS && m.bytes < MAX_BYTES {
            ops += 1;
            match r.u8() % 10 {
                0 => {
                    // A frame with a small plaintext.
                    let control = r.u8();
                    let flags = r.u8();
                    let n = usize::from(r.u8());
                    let mut pt = vec![flags];
                    pt.extend_from_slice(r.take(n));
                    m.push_frame(&mut tx, control, pt);
                }
                1 => {
                    // A large frame (up to clen = 0xffff).
                    let control = r.u8();
                    let flags = r.u8();
                    let n = usize::from(r.u16()) % (0xffff - 16);
                    let fill = r.u8();
                    let mut pt = vec![flags];
                    pt.extend((0..n).map(|i| fill.wrapping_add(i as u8)));
                    m.push_frame(&mut tx, control, pt);
                }
                2 => m.mutate_last(&mut r, &mut tx),
                3 => {
                    let n = usize::from(r.u8());
                    let raw = r.take(n).to_vec();
                    if !raw.is_empty() {
                        tx.off += raw.len() as u64;
                        m.push(raw, 0, Vec::new(), 0, Kind::Raw);
                    }
                }
                4 => {
                    let n = usize::from(r.u16());
                    m.deliver(&mut x, if n == 0 { usize::MAX } else { n });
                }
                5 => {
                    let n = usize::from(r.u8());
                    let d = r.take(n).to_vec();
                    m.x_send(&mut x, &d);
                }
                6 => {
                    // At most 256 frames (each may be a rekey) per op and 2048 per run: bounded
                    // time (a run of 96 such ops with a rekey before every 7-byte frame took
                    // 0.4 s, an AFL "hang" on a loaded machine).
                    let n = usize::from(r.u16()).min(256 * mfd).min(m.x_frame_budget * mfd);
                    m.x_frame_budget -= n.div_ceil(mfd);
                    let fill = r.u8();
                    let d: Vec<u8> = (0..n).map(|i| fill ^ (i as u8)).collect();
                    m.bytes += d.len();
                    m.x_send(&mut x, &d);
                }
                7 => {
                    let before = x.error();
                    let res = x.send_fin();
                    match before {
                        Some(e) => assert_eq!(res, Err(e)),
                        None => {
                            assert_eq!(res, Ok(()), "send_fin");
                            m.x_fin_called = true;
                        }
                    }
                }
                8 => {
                    let before = x.error();
                    let (lg, rg) = x.generations();
                    let res = x.initiate_rekey();
                    match before {
                        Some(e) => assert_eq!(res, Err(e)),
                        None if x.fin_sent() => assert!(matches!(res, Err(Error::InvalidState(_)))),
                        None => assert_eq!(res, Ok(rg >= lg), "initiate_rekey at generations {lg}/{rg}"),
                    }
                    assert_eq!(x.error(), before, "initiate_rekey changed the state");
                }
                _ => {
                    let before = x.error();
                    let res = x.receive_eof();
                    if let Some(e) = before {
                        assert_eq!(res, Err(e));
                    } else if !m.diverged && m.dead.is_none() {
                        let clean = m.peer_fin && m.delivered == m.processed_end;
                        assert_eq!(res.is_ok(), clean, "receive_eof: {res:?}");
                        if clean {
                            m.reached |= reached::CLEAN_EOF;
                        }
                        if !clean {
                            assert_eq!(res, Err(Error::TruncatedStream));
                            m.dead = Some(Error::TruncatedStream);
                        }
                    } else if let Err(e) = res {
                        m.dead.get_or_insert(e);
                    }
                }
            }
            m.check(&mut x, &mut rx);
        }
        m.deliver(&mut x, usize::MAX);
        m.check(&mut x, &mut rx);
        if !m.diverged && m.dead.is_none() {
            assert_eq!(x.error(), None);
            assert_eq!(x.generations().1, m.remote_gen);
        }
        if m.diverged && x.error().is_some() {
            m.reached |= reached::FORGED_REJECTED;
        }
        if x.stats().rekeys_sent > 0 && m.remote_gen > 0 {
            m.reached |= reached::REKEY_ANSWERED;
        }
        if !m.x_got.is_empty() {
            m.reached |= reached::SENT;
        }
        m.reached
    }
}

/// The peer's stream as intended (`g`: every segment's original bytes) and as sent (`s`: the
/// current bytes). The session can only authenticate frames of `g` that lie within the common
/// prefix of what it was given and `g`: a frame with any byte changed, moved or missing fails
/// (short of forging a 128-bit tag), and raw bytes are never a frame it can open.
#[derive(Default)]
struct Model {
    segs: Vec<Seg>,
    g: Vec<u8>,
    s: Vec<u8>,
    /// Bytes of `s` given to the session so far.
    delivered: usize,
    /// Common prefix of s[..delivered] and g.
    lcp: usize,
    /// Segments accounted for; the offset in `g` where they end.
    processed: usize,
    processed_end: usize,
    diverged: bool,
    dead: Option<Error>,
    peer_fin: bool,
    remote_gen: u64,
    expected_plain: Vec<u8>,
    got_plain: Vec<u8>,
    // The session's own direction.
    out: Vec<u8>,
    x_expected: Vec<u8>,
    x_got: Vec<u8>,
    x_fin_called: bool,
    x_fin_seen: bool,
    bytes: usize,
    x_frame_budget: usize,
    reached: u32,
}

impl Model {
    fn push_frame(&mut self, tx: &mut Direction, control: u8, pt: Vec<u8>) {
        let flags = pt[0];
        // seal() advances the generation on the rekey bit, then seals at tx.off.
        let off = tx.off;
        let bytes = tx.seal(control, &pt);
        let (data, bad_plain) = if flags & FLAG_URGP != 0 {
            if pt.len() < 3 {
                (Vec::new(), true)
            } else {
                (pt[3..].to_vec(), false)
            }
        } else {
            (pt[1..].to_vec(), false)
        };
        let kind = Kind::Frame { data, fin: flags & FLAG_FINP != 0, rekey: control & 1 != 0, bad_plain };
        self.push(bytes, control, pt, off, kind);
    }

    fn push(&mut self, bytes: Vec<u8>, control: u8, plaintext: Vec<u8>, off: u64, kind: Kind) {
        self.bytes += bytes.len();
        self.g.extend_from_slice(&bytes);
        self.s.extend_from_slice(&bytes);
        self.segs.push(Seg { orig_len: bytes.len(), cur: bytes, control, plaintext, off, kind });
    }

    /// Change the last segment if nothing of it was delivered yet.
    fn mutate_last(&mut self, r: &mut Input, tx: &mut Direction) {
        let Some(seg) = self.segs.last_mut() else { return };
        let start = self.s.len() - seg.cur.len();
        if start < self.delivered || seg.cur.is_empty() {
            return;
        }
        let len = seg.cur.len();
        let is_frame = matches!(seg.kind, Kind::Frame { .. });
        match r.u8() % 8 {
            0 => {
                let i = usize::from(r.u16()) % len;
                seg.cur[i] ^= r.u8().max(1);
            }
            1 => seg.cur.truncate(usize::from(r.u16()) % len),
            2 => {
                if len >= 3 {
                    let c = r.u16().to_be_bytes();
                    seg.cur[1] = c[0];
                    seg.cur[2] = c[1];
                }
            }
            3 => seg.cur[0] ^= r.u8().max(1),
            4 if is_frame => {
                // The right key, the wrong frame ID (nonce).
                let d = u64::from(r.u16().max(1));
                let off = if r.u8() & 1 == 0 { seg.off.wrapping_add(d) } else { seg.off.wrapping_sub(d) };
                seg.cur = tx.seal_at(seg.control, &seg.plaintext, off);
            }
            5 if is_frame => {
                // The other direction's key (k_ab for k_ba), same generation and offset.
                let other = Direction::new(&tx.mk, tx.aead, !tx.ab, 0);
                seg.cur = other.seal_at(seg.control, &seg.plaintext, seg.off);
            }
            6 if is_frame => {
                // The next generation's key without the rekey bit (or one too many with it).
                let mut other = Direction::new(&tx.mk, tx.aead, tx.ab, 0);
                other.advance();
                seg.cur = other.seal_at(seg.control, &seg.plaintext, seg.off);
            }
            _ => {
                // Junk right after it: a raw segment of its own, part of the stream (later
                // frames are sealed at offsets after it).
                let n = usize::from(r.u8()).max(1);
                let junk = vec![r.u8(); n];
                tx.off += n as u64;
                self.push(junk, 0, Vec::new(), 0, Kind::Raw);
                return;
            }
        }
        self.s.truncate(start);
        self.s.extend_from_slice(&seg.cur);
    }

    fn deliver(&mut self, x: &mut Session, n: usize) {
        let end = self.delivered.saturating_add(n).min(self.s.len());
        if end == self.delivered {
            return;
        }
        let before = x.error();
        let res = x.receive(&self.s[self.delivered..end]);
        if let Some(e) = before {
            assert_eq!(res, Err(e), "a failed session must stay failed");
        }
        // The common prefix with the intended stream grows only while it is the whole of what
        // was delivered.
        if self.lcp == self.delivered {
            while self.lcp < end && self.lcp < self.g.len() && self.s[self.lcp] == self.g[self.lcp] {
                self.lcp += 1;
            }
        }
        self.delivered = end;
        // Account for the intended segments, in order.
        let mut pos = self.processed_end;
        while self.processed < self.segs.len() && !self.diverged && self.dead.is_none() {
            let seg = &self.segs[self.processed];
            let seg_end = pos + seg.orig_len;
            let Kind::Frame { data, fin, rekey, bad_plain } = seg.kind.clone() else {
                // Raw bytes where the session expects a frame: it may wait or fail, never deliver.
                if self.delivered > pos {
                    self.diverged = true;
                }
                break;
            };
            if seg_end > self.lcp {
                // Not (yet) all of the genuine frame: a changed byte was delivered, or only part.
                if self.delivered > self.lcp {
                    self.diverged = true;
                }
                break;
            }
            if self.peer_fin {
                self.dead = Some(Error::DataAfterFin);
                self.reached |= reached::DATA_AFTER_FIN;
                break;
            }
            if rekey {
                self.remote_gen += 1;
            }
            if bad_plain {
                self.dead = Some(Error::BadPlaintext);
                self.reached |= reached::BAD_PLAINTEXT;
                break;
            }
            self.expected_plain.extend_from_slice(&data);
            if !data.is_empty() {
                self.reached |= reached::DATA;
            }
            if seg.plaintext.first().is_some_and(|f| f & FLAG_URGP != 0) {
                self.reached |= reached::URGP;
            }
            if rekey {
                self.reached |= reached::REKEY;
            }
            if fin {
                self.peer_fin = true;
                self.reached |= reached::FINP;
            }
            self.processed += 1;
            pos = seg_end;
            self.processed_end = seg_end;
        }
    }

    fn x_send(&mut self, x: &mut Session, d: &[u8]) {
        let before = x.error();
        let res = x.send(d);
        match (before, res) {
            (Some(e), r) => assert_eq!(r, Err(e)),
            (None, Ok(())) => {
                assert!(!self.x_fin_called, "send after send_fin accepted");
                self.x_expected.extend_from_slice(d);
            }
            (None, Err(e)) => {
                assert!(self.x_fin_called, "send failed: {e:?}");
                assert!(matches!(e, Error::InvalidState(_)));
                assert_eq!(x.error(), None, "a refused send must not kill the session");
            }
        }
    }

    fn check(&mut self, x: &mut Session, rx: &mut Direction) {
        // What the session delivered.
        self.got_plain.extend_from_slice(&x.take_plaintext());
        assert!(
            self.got_plain == self.expected_plain,
            "plaintext: got {} bytes, expected {} (got {:02x?}, expected {:02x?}; segments {:?}, delivered {}, diverged {}, dead {:?})",
            self.got_plain.len(),
            self.expected_plain.len(),
            &self.got_plain[..self.got_plain.len().min(48)],
            &self.expected_plain[..self.expected_plain.len().min(48)],
            self.segs.iter().map(|s| (s.orig_len, s.cur.len(), matches!(s.kind, Kind::Raw))).collect::<Vec<_>>(),
            self.delivered,
            self.diverged,
            self.dead
        );
        if !self.diverged {
            assert_eq!(x.error(), self.dead, "session error");
            if self.dead.is_none() {
                assert_eq!(x.generations().1, self.remote_gen, "remote generation");
                assert_eq!(x.peer_fin(), self.peer_fin);
            }
        }
        // What the session sent.
        self.out.extend_from_slice(&x.take_outgoing());
        loop {
            if self.out.len() < 3 {
                break;
            }
            let clen = usize::from(u16::from_be_bytes([self.out[1], self.out[2]]));
            assert!(clen >= 17, "the session sent clen {clen}");
            if self.out.len() < 3 + clen {
                break;
            }
            let frame: Vec<u8> = self.out.drain(..3 + clen).collect();
            assert!(!self.x_fin_seen, "the session sent a frame after its FINp");
            assert_eq!(frame[0] & !1, 0, "reserved control bits set");
            let pt = rx.open(&frame).expect("the session's frame does not open under the expected key, generation and offset");
            let flags = pt[0];
            assert_eq!(flags & !FLAG_FINP, 0, "the session sent flags {flags:#04x}");
            if flags & FLAG_FINP != 0 {
                assert_eq!(pt.len(), 1, "FINp frame with data");
                self.x_fin_seen = true;
            }
            self.x_got.extend_from_slice(&pt[1..]);
        }
        assert!(self.x_got == self.x_expected, "the session sent {} data bytes, expected {}", self.x_got.len(), self.x_expected.len());
        assert_eq!(self.x_fin_seen, x.fin_sent() && self.out.is_empty());
        if x.error().is_none() && !x.fin_sent() {
            assert_eq!(rx.gen, x.generations().0, "local generation vs the rekey bits seen");
            if !self.diverged && self.dead.is_none() {
                assert!(x.generations().0 >= x.generations().1, "a peer's rekey was not answered");
            }
        }
    }
}
