//! fuzz_resume: resumption tickets (RFC 8548 §3.5, proto/src/resume.rs). A pool of genuine
//! tickets (both ends of ss[1], ss[2], ss[3] of an X25519 session, and of a P-256 session),
//! a passive opener's store of tickets (a simple model: one per peer, the oldest evicted, single
//! use, TEP checked; tcpcryptd's own stores, `Proposer` and `Acceptor`, are fuzz_successors'),
//! and connections where the active opener offers a ticket (nonce, TEP lists, optionally forged
//! SYN/SYN-ACK bytes) through `syn_option`, `synack_option`, `negotiate` and `Session::new`.
//!
//! Oracle: `synack_option` asks the store for the offer the target expects (the TEP it picks,
//! one offer for it), and each ticket is handed out once; an honest exchange whose passive side holds the partner ticket resumes on
//! both sides with equal session IDs and working keys, and one without it falls back to a
//! fresh key exchange on both sides; whatever the options, two sides that both negotiate agree
//! on TEP and transcript, and a resumption plan always finds its ticket.
use tcpcrypt_proto::consts::{MAX_RESUME_NONCE_LEN, RESUME_HALF_LEN};
use tcpcrypt_proto::eno::{SynOption, TepSuboption};
use tcpcrypt_proto::resume::{self, resume_fields, InvalidResume, TicketSource};
use tcpcrypt_proto::{Acceptor, Aead, Config, KeyMode, ResumeTicket, Session, Tep};

use crate::crypto::{Pair, RESUME_NONCE_A, SEED_A, SEED_B, SEED_SYNACK};
use crate::{DetRng, Input};

pub struct Resume {
    /// Tickets in partner pairs: pool[2k] and pool[2k+1] are the two ends of one ss[i].
    pool: Vec<ResumeTicket>,
    cfg: Config,
}

impl Default for Resume {
    fn default() -> Self {
        Self::new()
    }
}

/// Resume with ticket `ta` (offered by the active opener) against `acceptor`, which holds the
/// chain of its partner, and return the next tickets of both ends, for a pool of successive
/// secrets.
fn resume_once(cfg: &Config, ta: ResumeTicket, acceptor: &mut Acceptor) -> (ResumeTicket, ResumeTicket) {
    let syn = resume::syn_option(&cfg.teps, Some(&ta.suboption(&RESUME_NONCE_A))).unwrap();
    let (synack, tb) = resume::synack_option(&syn, &cfg.teps, Some(acceptor), 8, &mut DetRng::new(SEED_SYNACK));
    let tb = tb.unwrap();
    let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[&ta]).unwrap();
    let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[&tb]).unwrap();
    let mut a = Session::new(&pa, cfg.clone(), Some(ta), &mut DetRng::new(SEED_A)).unwrap();
    let mut b = Session::new(&pb, cfg.clone(), Some(tb), &mut DetRng::new(SEED_B)).unwrap();
    (a.take_ticket().unwrap(), b.take_ticket().unwrap())
}

impl Resume {
    pub fn new() -> Self {
        let cfg = Config::default();
        let mut pool = Vec::new();
        let p = Pair::new(Tep::Curve25519, Aead::Aes128Gcm);
        let (mut ta, mut tb) = (p.ticket_a.clone(), p.ticket_b.clone());
        let mut acceptor = Acceptor::new(1);
        acceptor.insert(b"peer", tb.clone());
        for _ in 0..3 {
            pool.push(ta.clone());
            pool.push(tb.clone());
            (ta, tb) = resume_once(&cfg, ta, &mut acceptor);
        }
        let q = Pair::new(Tep::P256, Aead::ChaCha20Poly1305);
        pool.push(q.ticket_a.clone());
        pool.push(q.ticket_b.clone());
        // Roles swapped: B's ticket offered by an active opener (its original role stays B).
        for k in (0..pool.len()).step_by(2) {
            assert_eq!(pool[k].id, pool[k + 1].id);
            assert_eq!(pool[k].my_half(), pool[k + 1].peer_half());
        }
        Resume { pool, cfg }
    }

    fn teps(r: &mut Input) -> Vec<Tep> {
        let m = r.u8();
        let mut v: Vec<Tep> = Tep::ALL.iter().copied().enumerate().filter(|(i, _)| m & (1 << i) != 0).map(|(_, t)| t).collect();
        let rot = usize::from(m >> 3) % 3;
        if !v.is_empty() {
            let n = v.len();
            v.rotate_left(rot % n);
        }
        if m & 0x80 != 0 {
            v.reverse();
        }
        v
    }

    /// One execution; returns what it reached (bits: 1 resumed on both sides, 2 honest offer
    /// fell back to a fresh exchange, 4 a ticket taken out of the cache, 8 forged options, 16 a
    /// resumption plan refused the wrong ticket).
    pub fn run(&mut self, data: &[u8]) -> u32 {
        let mut r = Input::new(data);
        let mut reached = 0;
        let cap = usize::from(r.u8() % 5);
        let mut model = CacheModel { cap, entries: Vec::new(), seq: 0 };
        // Each ss[i] enters the passive cache at most once per run (one host holds one end).
        let mut used = vec![false; self.pool.len() / 2];
        // Tickets handed out by the cache: (id, original role); each at most once.
        let mut handed: Vec<([u8; 18], tcpcrypt_proto::Role)> = Vec::new();
        let mut ops = 0;
        while !r.is_empty() && ops < 48 {
            ops += 1;
            match r.u8() % 7 {
                0 => {
                    let k = usize::from(r.u8()) % self.pool.len();
                    let peer = r.u8() % 4;
                    if !used[k / 2] {
                        used[k / 2] = true;
                        model.insert(peer, k);
                    }
                }
                1 => {
                    let peer = r.u8() % 4;
                    if let Some(k) = model.take_for_peer(peer) {
                        reached |= 4;
                        let t = &self.pool[k];
                        assert!(!handed.contains(&(t.id, t.orig_role)), "ticket used twice");
                        handed.push((t.id, t.orig_role));
                    }
                }
                2 => {
                    let k = usize::from(r.u8()) % self.pool.len();
                    let mut half = self.pool[k].peer_half();
                    if r.u8() & 1 == 1 {
                        half = r.array::<RESUME_HALF_LEN>();
                    }
                    let tep = Tep::ALL[usize::from(r.u8()) % 3];
                    if let Some(k) = model.take_by_half(&self.pool, &half, tep) {
                        reached |= 4;
                        let t = &self.pool[k];
                        assert_eq!(t.peer_half(), half);
                        assert_eq!(t.tep, tep);
                        assert!(!handed.contains(&(t.id, t.orig_role)), "ticket used twice");
                        handed.push((t.id, t.orig_role));
                    }
                }
                3 => model.entries.clear(),
                4 => {
                    // resume_fields on any suboption.
                    let tep = r.u8();
                    let v = r.u8() & 1 == 1;
                    let n = usize::from(r.u8() % 40);
                    let sub = TepSuboption { tep, v, data: r.take(n).to_vec() };
                    let f = resume_fields(&sub);
                    if !v || sub.data.len() < RESUME_HALF_LEN {
                        assert_eq!(f, Ok(None));
                    } else if sub.data.len() > RESUME_HALF_LEN + MAX_RESUME_NONCE_LEN {
                        assert_eq!(f, Err(InvalidResume));
                    } else {
                        let (h, nonce) = f.unwrap().unwrap();
                        assert_eq!(&h[..], &sub.data[..RESUME_HALF_LEN]);
                        assert_eq!(nonce, &sub.data[RESUME_HALF_LEN..]);
                    }
                }
                _ => reached |= self.connect(&mut r, &mut model, &mut handed),
            }
            if cap > 0 {
                assert!(model.entries.len() <= cap);
            }
        }
        reached
    }

    /// An active opener offers pool[k]; the passive opener answers from `model`'s tickets.
    fn connect(&self, r: &mut Input, model: &mut CacheModel, handed: &mut Vec<([u8; 18], tcpcrypt_proto::Role)>) -> u32 {
        let mut reached = 0;
        let k = usize::from(r.u8()) % self.pool.len();
        let ta = self.pool[k].clone();
        // The active opener supports the TEP of the ticket it offers (its cache only holds such).
        let mut teps_a = Self::teps(r);
        if !teps_a.contains(&ta.tep) {
            teps_a.push(ta.tep);
        }
        let teps_b = Self::teps(r);
        let nlen = usize::from(r.u8() % 10);
        let nonce = r.take(nlen).to_vec();
        let synack_nonce_len = usize::from(r.u8() % 10);
        let forge = r.u8();
        let sub = ta.suboption(&nonce);
        assert_eq!(sub.data.len(), RESUME_HALF_LEN + nonce.len().min(MAX_RESUME_NONCE_LEN));
        let Ok(mut syn) = resume::syn_option(&teps_a, Some(&sub)) else { return 0 };
        // The offer is the last suboption of a well-formed option.
        let parsed = SynOption::parse(&syn).expect("syn_option made an ill-formed option");
        assert_eq!(parsed.teps().last(), Some(&sub));
        if forge & 1 != 0 {
            let n = usize::from(r.u8() % 4) + 1;
            for _ in 0..n {
                let i = usize::from(r.u8()) % syn.len();
                syn[i] ^= r.u8().max(1);
            }
        }
        let half_a = ta.my_half();
        // Which ticket the passive side must take: worked out on a copy of the store, before.
        let mut expected = model.clone();
        let mut source = Source { model, pool: &self.pool };
        let (mut synack, tb) = resume::synack_option(&syn, &teps_b, Some(&mut source), synack_nonce_len, &mut DetRng::new(SEED_SYNACK));
        let expect_tb = match SynOption::parse(&syn) {
            Ok(o) if !o.global().b() => match teps_b.iter().copied().find(|t| o.teps().any(|s| s.tep == t.id())) {
                Some(tep) => {
                    let offers: Vec<_> = o.teps().filter(|s| s.tep == tep.id()).filter_map(|s| resume_fields(s).ok().flatten()).collect();
                    if offers.len() == 1 {
                        expected.take_by_half(&self.pool, &offers[0].0, tep)
                    } else {
                        None
                    }
                }
                None => None,
            },
            _ => None,
        };
        assert_eq!(tb.as_ref().map(|t| (t.id, t.orig_role)), expect_tb.map(|k| (self.pool[k].id, self.pool[k].orig_role)), "synack_option's ticket");
        if let Some(t) = &tb {
            assert!(!handed.contains(&(t.id, t.orig_role)), "ticket used twice");
            handed.push((t.id, t.orig_role));
            // Single use: it is no longer in the store.
            assert!(source.take_by_peer_half(&t.peer_half(), t.tep).is_none());
        }
        if forge & 2 != 0 && !synack.is_empty() {
            let i = usize::from(r.u8()) % synack.len();
            synack[i] ^= r.u8().max(1);
        }
        let honest = forge & 3 == 0;
        if !honest {
            reached |= 8;
        }
        let pa = resume::negotiate(&syn, &synack, false, true, &teps_a, &[&ta]);
        let tbs: Vec<&ResumeTicket> = tb.iter().collect();
        let pb = resume::negotiate(&syn, &synack, true, true, &teps_b, &tbs);
        if honest {
            let partner = tb.as_ref().is_some_and(|t| t.id == ta.id && t.my_half() == ta.peer_half() && t.peer_half() == half_a);
            if tb.is_some() {
                assert!(partner, "the passive side took a ticket that is not the offer's partner");
            }
            match (&pa, &pb) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.tep, b.tep);
                    if partner {
                        assert!(matches!(a.mode, KeyMode::Resume { .. }) && matches!(b.mode, KeyMode::Resume { .. }), "honest resumption not negotiated");
                    } else {
                        assert_eq!((&a.mode, &b.mode), (&KeyMode::Fresh, &KeyMode::Fresh));
                        reached |= 2;
                    }
                }
                (Err(ea), Err(eb)) => assert_eq!(ea, eb),
                (a, b) => panic!("honest options, sides disagree: {a:?} / {b:?}"),
            }
        }
        if let (Ok(a), Ok(b)) = (&pa, &pb) {
            // Same option bytes: the same transcript and complementary roles (forged b bits may
            // swap them). The TEPs may differ under forged options only, where the two sides'
            // validity checks differ (each holds its own ticket) or their TEP lists do.
            assert_eq!(a.eno.transcript, b.eno.transcript);
            assert_ne!(a.eno.role, b.eno.role);
            if honest {
                assert_eq!(a.eno.role, tcpcrypt_proto::Role::A);
            }
            if let (KeyMode::Resume { id: ia, .. }, KeyMode::Resume { id: ib, .. }) = (&a.mode, &b.mode) {
                assert_eq!(ia, ib, "both sides resume, different secrets");
                assert_eq!(a.tep, b.tep);
            }
        }
        // Sessions for the resumption plans (fresh ones would need a key exchange: skipped).
        let sa = pa.as_ref().ok().filter(|p| matches!(p.mode, KeyMode::Resume { .. })).map(|p| {
            Session::new(p, self.cfg.clone(), Some(ta.clone()), &mut DetRng::new(SEED_A)).expect("resume plan without its ticket (A)")
        });
        let sb = pb.as_ref().ok().filter(|p| matches!(p.mode, KeyMode::Resume { .. })).map(|p| {
            Session::new(p, self.cfg.clone(), tb.clone(), &mut DetRng::new(SEED_B)).expect("resume plan without its ticket (B)")
        });
        // A resumption plan with someone else's ticket is refused, not used.
        if let Ok(p) = &pa {
            if matches!(p.mode, KeyMode::Resume { .. }) {
                let other = &self.pool[(k + 2) % self.pool.len()];
                assert!(Session::new(p, self.cfg.clone(), Some(other.clone()), &mut DetRng::new(SEED_A)).is_err());
                assert!(Session::new(p, self.cfg.clone(), None, &mut DetRng::new(SEED_A)).is_err());
                reached |= 16;
            }
        }
        if let (Some(mut a), Some(mut b)) = (sa, sb) {
            assert!(a.resumed() && b.resumed());
            assert_eq!(a.session_id(), b.session_id(), "resumed sides disagree on the session ID");
            assert_eq!(a.session_id().unwrap()[0], 0x80 | a.tep().id());
            let n = usize::from(r.u8() % 32);
            let msg = r.take(n).to_vec();
            a.send(&msg).unwrap();
            a.send_fin().unwrap();
            b.receive(&a.take_outgoing()).unwrap();
            assert_eq!(b.take_plaintext(), msg);
            assert!(b.peer_fin());
            b.receive_eof().unwrap();
            b.send(b"back").unwrap();
            a.receive(&b.take_outgoing()).unwrap();
            assert_eq!(a.take_plaintext(), b"back");
            // The next tickets are partners again, with the next index.
            let (na, nb) = (a.take_ticket().unwrap(), b.take_ticket().unwrap());
            assert_eq!(na.id, nb.id);
            assert_eq!(na.index, ta.index + 1);
            assert_eq!(na.orig_role, ta.orig_role);
            reached |= 1;
        }
        reached
    }
}

/// The passive opener's store of tickets: a list in insertion order.
#[derive(Clone)]
struct CacheModel {
    cap: usize,
    /// (peer, pool index, sequence)
    entries: Vec<(u8, usize, u64)>,
    seq: u64,
}

impl CacheModel {
    fn insert(&mut self, peer: u8, k: usize) {
        self.entries.retain(|e| e.0 != peer);
        if self.cap > 0 && self.entries.len() >= self.cap {
            let oldest = (0..self.entries.len()).min_by_key(|&i| self.entries[i].2).unwrap();
            self.entries.remove(oldest);
        }
        self.seq += 1;
        self.entries.push((peer, k, self.seq));
    }
    fn take_for_peer(&mut self, peer: u8) -> Option<usize> {
        let i = self.entries.iter().position(|e| e.0 == peer)?;
        Some(self.entries.remove(i).1)
    }
    fn take_by_half(&mut self, pool: &[ResumeTicket], half: &[u8; RESUME_HALF_LEN], tep: Tep) -> Option<usize> {
        let i = self.entries.iter().position(|e| pool[e.1].peer_half() == *half)?;
        if pool[self.entries[i].1].tep != tep {
            return None;
        }
        Some(self.entries.remove(i).1)
    }
}

/// The store as `synack_option` asks it.
struct Source<'a> {
    model: &'a mut CacheModel,
    pool: &'a [ResumeTicket],
}

impl TicketSource for Source<'_> {
    fn take_by_peer_half(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep) -> Option<ResumeTicket> {
        self.model.take_by_half(self.pool, half, tep).map(|k| self.pool[k].clone())
    }
}
