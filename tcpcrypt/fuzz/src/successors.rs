//! fuzz_successors: resumption for connections opened at once (RFC 8548 §3.5,
//! proto/src/successors.rs). Client hosts, each with a `Proposer`, and two servers, each with an
//! `Acceptor` configured as tcpcryptd configures it (or with small limits), driven by a random
//! sequence of operations: fresh key exchanges (one at a time or a burst over many hosts, past
//! the per-host and total limits), proposals, their SYNs accepted in any order (directly or
//! through `synack_option`, `negotiate` and `Session::new` end to end), lost or refused,
//! a resumed session's successor cached, time passing (on a clock of the target's own, past the
//! 3 s grace and the chains' lifetime), purges, flushes.
//!
//! Oracle: a reference model of both (what each proposal must be; which SYNs must be accepted:
//! the window of `ahead` secrets past the highest used one, minus the used ones and those below
//! a used one whose grace ran out before a purge; LRU eviction per host and in all; lifetimes),
//! and the RFC's invariants checked on their own: an ss[i] is accepted at most once; a client
//! never proposes an i twice; the client's, the server's and the target's own ss[i] (derived
//! from the fresh exchange's PRK by §3.3/§3.5's ss[i] = CPRF(ss[i-1], CONST_NEXTK)) agree, as
//! resume[i] and, end to end, as the session ID; never more than `per_peer` chains per host and
//! `capacity` in all; the names published to the ENO source (eno-bpf's map, applied as tcpcryptd
//! applies them) are exactly the secrets held: no used or erased secret is ever answered.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use rand_core::RngCore;
use tcpcrypt_proto::consts::RESUME_HALF_LEN;
use tcpcrypt_proto::keys::{self, Secret};
use tcpcrypt_proto::msgs::{Init2, Parse};
use tcpcrypt_proto::resume::{self, TicketSource};
use tcpcrypt_proto::successors::{Changes, DEFAULT_AHEAD, DEFAULT_GRACE};
use tcpcrypt_proto::{Acceptor, Aead, Config, KeyMode, Proposer, ResumeName, ResumeTicket, Role, Session, Tep};

use crate::crypto::{cfg_for, replay_es, SEED_SYNACK};
use crate::{DetRng, Input};

/// Fresh key exchanges made at setup: more than tcpcryptd's 256 chains, so that a run can pass
/// the total limit.
pub const POOL: usize = 300;
/// Client hosts: 4 chains each at one server would be 256 at 64 hosts.
pub const CLIENTS: usize = 96;
const SERVERS: usize = 2;
/// tcpcryptd's limits (tcpcryptd/src/proxy.rs: eno-bpf's map of 4,096 names / (2 * 8)).
pub const DAEMON_CAPACITY: usize = 4096 / (2 * DEFAULT_AHEAD as usize);
pub const DAEMON_PER_PEER: usize = 4;
const MAX_OPS: usize = 1024;

/// What a run reached (bits of [`Successors::run`]'s result; the corpus regression checks that
/// the seeds reach all of them).
pub mod reached {
    /// A proposal accepted.
    pub const ACCEPTED: u32 = 1 << 0;
    /// A proposal accepted after a higher i of its chain was.
    pub const OUT_OF_ORDER: u32 = 1 << 1;
    /// A proposal refused (outside the window, used, erased, evicted, wrong TEP).
    pub const REFUSED: u32 = 1 << 2;
    /// An unused secret below a used one erased by a purge after the grace.
    pub const GRACE_ERASED: u32 = 1 << 3;
    /// A chain evicted by the per-host limit.
    pub const PER_PEER_EVICTED: u32 = 1 << 4;
    /// A chain evicted by the total limit.
    pub const CAPACITY_EVICTED: u32 = 1 << 5;
    /// A chain dropped because its lifetime ran out (acceptor) or a proposal refused for it
    /// (proposer).
    pub const EXPIRED: u32 = 1 << 6;
    /// Resumed sessions end to end: both sides' session IDs agree with the target's ss[i].
    pub const SESSION: u32 = 1 << 7;
    /// A resumed session's successor offered to a cache and refused.
    pub const SUCCESSOR_REFUSED: u32 = 1 << 8;
    pub const ALL: u32 = (1 << 9) - 1;
}

/// One fresh key exchange: the client's (role A) and the server's ss[1], and ss[1] as the target
/// derives it from the PRK it recomputes.
struct Exchange {
    a: ResumeTicket,
    b: ResumeTicket,
    ss1: Secret,
}

fn exchange(k: usize) -> Exchange {
    // Mostly X25519 (cheap to set up); every 25th P-256, so that a TEP mismatch can be tried on a
    // chain of either.
    let tep = if k % 25 == 7 { Tep::P256 } else { Tep::Curve25519 };
    let cfg = cfg_for(tep, Aead::Aes128Gcm);
    let (seed_a, seed_b) = (0x5ecc_0000 + 2 * k as u64, 0x5ecc_0001 + 2 * k as u64);
    let syn = resume::syn_option(&cfg.teps, None).unwrap();
    let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut DetRng::new(SEED_SYNACK));
    let plan_a = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
    let plan_b = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
    let mut a = Session::new(&plan_a, cfg.clone(), None, &mut DetRng::new(seed_a)).unwrap();
    let mut b = Session::new(&plan_b, cfg, None, &mut DetRng::new(seed_b)).unwrap();
    let init1 = a.take_outgoing();
    b.receive(&init1).unwrap();
    let init2 = b.take_outgoing();
    a.receive(&init2).unwrap();
    let Ok(Parse::Done(m2, _)) = Init2::parse(tep, &init2) else { panic!("Init2") };
    let es = replay_es(tep, seed_a, &m2.pub_key).expect("ES");
    let mut n_a = [0u8; 32];
    DetRng::new(seed_a).fill_bytes(&mut n_a);
    let ss1 = keys::next_session_secret(&keys::prk(&n_a, &plan_a.eno.transcript, &init1, &init2, &es));
    let (ta, tb) = (a.take_ticket().unwrap(), b.take_ticket().unwrap());
    assert_eq!((ta.id, tb.id, ta.index, tb.index), (keys::resume_id(&ss1), keys::resume_id(&ss1), 1, 1));
    assert_eq!((ta.orig_role, tb.orig_role), (Role::A, Role::B));
    Exchange { a: ta, b: tb, ss1 }
}


/// An acceptor's `take` at the target's clock, as `synack_option` asks a ticket source.
struct AtTime<'a> {
    acc: &'a mut Acceptor,
    now: Instant,
    changes: Changes,
}

impl TicketSource for AtTime<'_> {
    fn take_by_peer_half(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep) -> Option<ResumeTicket> {
        let (t, ch) = self.acc.take_at(half, tep, self.now);
        self.changes.published.extend(ch.published);
        self.changes.withdrawn.extend(ch.withdrawn);
        t
    }
}

/// The model of one chain at an acceptor.
#[derive(Clone, Debug)]
struct ChainModel {
    client: usize,
    /// The highest index derived: the highest used + ahead.
    hi: u64,
    used: BTreeSet<u64>,
    /// Unused held indices below a used one -> when they may be erased.
    marks: BTreeMap<u64, Instant>,
    erased: BTreeSet<u64>,
    expires: Option<Instant>,
    seq: u64,
}

impl ChainModel {
    fn holds(&self, i: u64) -> bool {
        i >= 1 && i <= self.hi && !self.used.contains(&i) && !self.erased.contains(&i)
    }
    fn held(&self) -> Vec<u64> {
        (1..=self.hi).filter(|&i| self.holds(i)).collect()
    }
}

/// The model of one acceptor: its alive chains by exchange index.
struct ServerModel {
    chains: BTreeMap<usize, ChainModel>,
    seq: u64,
}

struct Limits {
    ahead: u64,
    grace: Duration,
    capacity: usize,
    per_peer: usize,
    lifetime: Option<Duration>,
}

impl ServerModel {
    fn drop_lru(&mut self, among: impl Iterator<Item = usize>) {
        let victim = among.min_by_key(|k| self.chains[k].seq);
        if let Some(k) = victim {
            self.chains.remove(&k);
        }
    }
    /// Returns reached bits.
    fn insert(&mut self, k: usize, client: usize, now: Instant, l: &Limits) -> u32 {
        let mut got = 0;
        let mine: Vec<usize> = self.chains.iter().filter(|(_, c)| c.client == client).map(|(k, _)| *k).collect();
        if l.per_peer > 0 && mine.len() >= l.per_peer {
            self.drop_lru(mine.into_iter());
            got |= reached::PER_PEER_EVICTED;
        }
        if l.capacity > 0 && self.chains.len() >= l.capacity {
            let all: Vec<usize> = self.chains.keys().copied().collect();
            self.drop_lru(all.into_iter());
            got |= reached::CAPACITY_EVICTED;
        }
        self.seq += 1;
        let c = ChainModel {
            client,
            hi: l.ahead,
            used: BTreeSet::new(),
            marks: BTreeMap::new(),
            erased: BTreeSet::new(),
            expires: l.lifetime.map(|d| now + d),
            seq: self.seq,
        };
        self.chains.insert(k, c);
        got
    }
    fn take(&mut self, k: usize, i: u64, tep_ok: bool, now: Instant, l: &Limits) -> bool {
        let Some(c) = self.chains.get_mut(&k) else { return false };
        if !c.holds(i) || !tep_ok {
            return false;
        }
        c.hi = c.hi.max(i + l.ahead);
        self.seq += 1;
        c.seq = self.seq;
        c.expires = l.lifetime.map(|d| now + d);
        c.used.insert(i);
        c.marks.remove(&i);
        for b in 1..i {
            if c.holds(b) {
                c.marks.entry(b).or_insert(now + l.grace);
            }
        }
        true
    }
    fn purge(&mut self, now: Instant) -> u32 {
        let mut got = 0;
        let before = self.chains.len();
        self.chains.retain(|_, c| !c.expires.is_some_and(|x| x <= now));
        if self.chains.len() < before {
            got |= reached::EXPIRED;
        }
        for c in self.chains.values_mut() {
            let due: Vec<u64> = c.marks.iter().filter(|(_, m)| **m <= now).map(|(i, _)| *i).collect();
            for i in due {
                c.marks.remove(&i);
                c.erased.insert(i);
                got |= reached::GRACE_ERASED;
            }
        }
        got
    }
    fn held_total(&self) -> usize {
        self.chains.values().map(|c| (c.hi as usize) - c.used.len() - c.erased.len()).sum()
    }
}

/// The model of one client's proposer: per server, (exchange, next i, expiry).
type ProposerModel = HashMap<usize, (usize, u64, Option<Instant>)>;

/// A proposal on its way: exchange, i, the client's ticket, client, server.
struct InFlight {
    k: usize,
    i: u64,
    ticket: ResumeTicket,
    client: usize,
    server: usize,
}

pub struct Successors {
    pool: Vec<Exchange>,
}

impl Default for Successors {
    fn default() -> Self {
        Self::new()
    }
}

fn server_name(s: usize) -> [u8; 2] {
    [b's', s as u8]
}

fn client_name(c: usize) -> [u8; 2] {
    [b'c', c as u8]
}

/// One run's state.
struct World<'p> {
    pool: &'p [Exchange],
    limits: Limits,
    t0: Instant,
    clock: Duration,
    proposers: Vec<Proposer>,
    proposer_models: Vec<ProposerModel>,
    acceptors: Vec<Acceptor>,
    servers: Vec<ServerModel>,
    /// What each server's ENO source holds, from the published/withdrawn names.
    maps: Vec<HashSet<ResumeName>>,
    /// exchange -> (client, server) for the exchanges made in this run.
    made: BTreeMap<usize, (usize, usize)>,
    next_exchange: usize,
    proposed: HashSet<(usize, u64)>,
    accepted: HashSet<[u8; 18]>,
    in_flight: Vec<InFlight>,
    /// Tickets (both ends) of accepted proposals: (client's, server's), for the successor op.
    resumed: Vec<(ResumeTicket, ResumeTicket, usize, usize)>,
    /// The target's own ss[1], ss[2], ... of each exchange, as far as derived (a chain is
    /// proposed from thousands of times in a long input: each ss[i] derived once).
    derived: HashMap<usize, Vec<Secret>>,
    got: u32,
}

impl World<'_> {
    fn now(&self) -> Instant {
        self.t0 + self.clock
    }

    /// The target's own ss[i] of exchange `k`: ss[i] = CPRF(ss[i-1], CONST_NEXTK) from the ss[1]
    /// of the PRK it recomputed.
    fn ss(&mut self, k: usize, i: u64) -> Secret {
        let v = self.derived.entry(k).or_insert_with(|| vec![self.pool[k].ss1.clone()]);
        while (v.len() as u64) < i {
            let next = keys::next_session_secret(v.last().unwrap());
            v.push(next);
        }
        v[i as usize - 1].clone()
    }

    fn apply(&mut self, s: usize, ch: Changes) {
        for n in &ch.withdrawn {
            self.maps[s].remove(n);
        }
        for n in ch.published {
            assert!(self.maps[s].insert(n), "a name published twice");
        }
    }

    /// Cheap invariants, after every operation.
    fn check(&self) {
        for s in 0..SERVERS {
            let (acc, m) = (&self.acceptors[s], &self.servers[s]);
            assert_eq!(acc.chains(), m.chains.len(), "server {s}: chains");
            assert_eq!(acc.len(), m.held_total(), "server {s}: secrets held");
            assert_eq!(self.maps[s].len(), acc.len(), "server {s}: ENO map against the secrets held");
            if self.limits.capacity > 0 {
                assert!(acc.chains() <= self.limits.capacity, "more than {} chains", self.limits.capacity);
            }
            let mut per: HashMap<usize, usize> = HashMap::new();
            for c in m.chains.values() {
                *per.entry(c.client).or_default() += 1;
            }
            if self.limits.per_peer > 0 {
                assert!(per.values().all(|&n| n <= self.limits.per_peer), "more than {} chains for a host", self.limits.per_peer);
            }
        }
    }

    /// Full comparison, at the end: every chain ever made, index by index, and the ENO map's
    /// names against the model's held secrets.
    fn check_all(&self) {
        for (&k, &(_, s)) in &self.made {
            let e = &self.pool[k];
            let want = self.servers[s].chains.get(&k).map(|c| c.held()).unwrap_or_default();
            assert_eq!(self.acceptors[s].indices(&e.a.lineage), want, "server {s}, exchange {k}: indices held");
            let mut t = e.b.clone();
            for &i in &want {
                while t.index < i {
                    t = t.successor();
                }
                assert!(self.maps[s].contains(&t.name()), "held ss[{i}] not in the ENO map");
            }
        }
        for c in 0..CLIENTS {
            for s in 0..SERVERS {
                let want = self.proposer_models[c].get(&s).map(|e| e.1);
                assert_eq!(self.proposers[c].next_index(&server_name(s)), want, "client {c} server {s}: next i");
            }
        }
    }

    fn fresh(&mut self, c: usize, s: usize) {
        let Some(e) = self.pool.get(self.next_exchange) else { return };
        let k = self.next_exchange;
        self.next_exchange += 1;
        let now = self.now();
        assert!(self.proposers[c].insert_at(&server_name(s), e.a.clone(), now));
        self.proposer_models[c].insert(s, (k, 1, self.limits.lifetime.map(|d| now + d)));
        let ch = self.acceptors[s].insert_at(&client_name(c), e.b.clone(), now);
        self.got |= self.servers[s].insert(k, c, now, &self.limits);
        self.apply(s, ch);
        self.made.insert(k, (c, s));
    }

    fn propose(&mut self, c: usize, s: usize) {
        let now = self.now();
        let got = self.proposers[c].propose_at(&server_name(s), now);
        let want = match self.proposer_models[c].get_mut(&s) {
            Some(e) if !e.2.is_some_and(|x| x <= now) => {
                let r = (e.0, e.1);
                e.1 += 1;
                e.2 = self.limits.lifetime.map(|d| now + d);
                Some(r)
            }
            Some(_) => {
                self.proposer_models[c].remove(&s);
                self.got |= reached::EXPIRED;
                None
            }
            None => None,
        };
        assert_eq!(got.as_ref().map(|t| (t.lineage, t.index)), want.map(|(k, i)| (self.pool[k].a.lineage, i)), "client {c} server {s}: proposal");
        let (Some(t), Some((k, i))) = (got, want) else { return };
        assert!(self.proposed.insert((k, i)), "ss[{i}] of exchange {k} proposed twice");
        assert_eq!(t.id, keys::resume_id(&self.ss(k, i)), "the client's resume[{i}] is not the RFC's");
        assert_eq!((t.orig_role, t.tep), (Role::A, self.pool[k].a.tep));
        self.in_flight.push(InFlight { k, i, ticket: t, client: c, server: s });
    }

    /// The server receives the SYN of an in-flight proposal (TEP possibly changed: a SYN-ACK
    /// for another TEP), directly or through the ENO options and sessions end to end.
    fn accept(&mut self, r: &mut Input) {
        if self.in_flight.is_empty() {
            return;
        }
        let p = self.in_flight.remove(usize::from(r.u16()) % self.in_flight.len());
        let flags = r.u8();
        let tep = if flags & 1 != 0 { Tep::ALL[usize::from(flags >> 1) % 3] } else { p.ticket.tep };
        let end_to_end = flags & 0x80 != 0 && tep == p.ticket.tep;
        let now = self.now();
        let s = p.server;
        let higher_used = self.servers[s].chains.get(&p.k).is_some_and(|c| c.used.iter().any(|&j| j > p.i));
        let want = self.servers[s].take(p.k, p.i, tep == p.ticket.tep, now, &self.limits);
        let got = if end_to_end {
            self.end_to_end(&p, now)
        } else {
            let (t, ch) = self.acceptors[s].take_at(&p.ticket.my_half(), tep, now);
            self.apply(s, ch);
            t
        };
        assert_eq!(got.is_some(), want, "server {s}, exchange {}, ss[{}] (tep {tep:?}): accepted?", p.k, p.i);
        let Some(tb) = got else {
            self.got |= reached::REFUSED;
            return;
        };
        self.got |= reached::ACCEPTED;
        if higher_used {
            self.got |= reached::OUT_OF_ORDER;
        }
        assert!(self.accepted.insert(tb.id), "ss[{}] accepted twice", p.i);
        assert_eq!((tb.id, tb.index, tb.lineage, tb.tep, tb.orig_role), (p.ticket.id, p.i, p.ticket.lineage, p.ticket.tep, Role::B));
        assert_eq!((tb.my_half(), tb.peer_half()), (p.ticket.peer_half(), p.ticket.my_half()));
        let withdrawn = !self.maps[s].contains(&tb.name());
        assert!(withdrawn, "a used ss[{}] is still in the ENO map", p.i);
        self.resumed.push((p.ticket, tb, p.client, s));
    }

    /// `synack_option` with the acceptor as its ticket source, then both sides' plans and
    /// sessions: their session IDs must be the one the target derives from its own ss[i].
    fn end_to_end(&mut self, p: &InFlight, now: Instant) -> Option<ResumeTicket> {
        let ta = &p.ticket;
        let nonce = p.i.to_be_bytes();
        let syn = resume::syn_option(&[ta.tep], Some(&ta.suboption(&nonce))).unwrap();
        let cfg = Config::default();
        let mut src = AtTime { acc: &mut self.acceptors[p.server], now, changes: Changes::default() };
        let (synack, tb) = resume::synack_option(&syn, &cfg.teps, Some(&mut src), 8, &mut DetRng::new(SEED_SYNACK));
        let ch = src.changes;
        self.apply(p.server, ch);
        let pa = resume::negotiate(&syn, &synack, false, true, &[ta.tep], &[ta]).unwrap();
        let tbs: Vec<&ResumeTicket> = tb.iter().collect();
        let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &tbs).unwrap();
        let Some(t) = tb.clone() else {
            assert_eq!((&pa.mode, &pb.mode), (&KeyMode::Fresh, &KeyMode::Fresh));
            return None;
        };
        let KeyMode::Resume { my_nonce, peer_nonce, .. } = &pa.mode else { panic!("A did not resume: {:?}", pa.mode) };
        let a = Session::new(&pa, cfg_for(ta.tep, ta.aead), Some(ta.clone()), &mut DetRng::new(1)).unwrap();
        let b = Session::new(&pb, cfg.clone(), Some(t), &mut DetRng::new(2)).unwrap();
        assert!(a.resumed() && b.resumed());
        let sid = a.session_id().unwrap().to_vec();
        assert_eq!(b.session_id(), Some(&sid[..]), "the two sides' session IDs differ");
        let sn = [my_nonce.as_slice(), peer_nonce].concat();
        assert_eq!(sid, keys::session_id(sid[0], &self.ss(p.k, p.i), &sn), "session ID not from the RFC's ss[{}]", p.i);
        self.got |= reached::SESSION;
        tb
    }

    /// A resumed session's successor (ss[i+1], as `Session::take_ticket` gives it) offered to
    /// both caches: it must not start (or restart) a chain.
    fn successor(&mut self, r: &mut Input) {
        if self.resumed.is_empty() {
            return;
        }
        let (ta, tb, c, s) = &self.resumed[usize::from(r.u8()) % self.resumed.len()];
        let (na, nb) = (ta.successor(), tb.successor());
        let now = self.now();
        assert!(!self.proposers[*c].insert_at(&server_name(*s), na, now), "the proposer took a resumed session's successor");
        let ch = self.acceptors[*s].insert_at(&client_name(*c), nb, now);
        assert_eq!(ch, Changes::default(), "the acceptor took a resumed session's successor");
        self.got |= reached::SUCCESSOR_REFUSED;
    }

    fn purge(&mut self) {
        let now = self.now();
        for s in 0..SERVERS {
            let ch = self.acceptors[s].purge_at(now);
            self.got |= self.servers[s].purge(now);
            self.apply(s, ch);
        }
        for c in 0..CLIENTS {
            self.proposers[c].purge_at(now);
            self.proposer_models[c].retain(|_, e| !e.2.is_some_and(|x| x <= now));
        }
    }
}

impl Successors {
    pub fn new() -> Self {
        Successors { pool: (0..POOL).map(exchange).collect() }
    }

    /// One execution; returns the [`reached`] bits.
    pub fn run(&mut self, data: &[u8]) -> u32 {
        let mut r = Input::new(data);
        // tcpcryptd's configuration unless the first byte's top bits are all set: then small
        // limits, so that short inputs reach eviction and the window's edges.
        let c = r.u8();
        let limits = if c & 0xc0 != 0xc0 {
            Limits { ahead: DEFAULT_AHEAD, grace: DEFAULT_GRACE, capacity: DAEMON_CAPACITY, per_peer: DAEMON_PER_PEER, lifetime: None }
        } else {
            Limits {
                ahead: u64::from(c & 3) + 1,
                grace: DEFAULT_GRACE,
                capacity: usize::from((c >> 2) & 7) + 1,
                per_peer: usize::from((c >> 5) & 1) * 2 + 1,
                lifetime: None,
            }
        };
        let lifetime = match r.u8() % 4 {
            0 => None,
            1 => Some(Duration::from_secs(2)),
            2 => Some(Duration::from_secs(10)),
            _ => Some(Duration::from_secs(600)),
        };
        let limits = Limits { lifetime, ..limits };
        let acceptor = |_| {
            let mut a = Acceptor::new(limits.capacity);
            (a.ahead, a.grace, a.per_peer, a.lifetime) = (limits.ahead, limits.grace, limits.per_peer, limits.lifetime);
            a
        };
        let proposer = |_| {
            let mut p = Proposer::new(4096);
            p.lifetime = limits.lifetime;
            p
        };
        let mut w = World {
            pool: &self.pool,
            acceptors: (0..SERVERS).map(acceptor).collect(),
            proposers: (0..CLIENTS).map(proposer).collect(),
            limits,
            t0: Instant::now(),
            clock: Duration::ZERO,
            proposer_models: vec![ProposerModel::new(); CLIENTS],
            servers: (0..SERVERS).map(|_| ServerModel { chains: BTreeMap::new(), seq: 0 }).collect(),
            maps: vec![HashSet::new(); SERVERS],
            made: BTreeMap::new(),
            next_exchange: 0,
            proposed: HashSet::new(),
            accepted: HashSet::new(),
            in_flight: Vec::new(),
            resumed: Vec::new(),
            derived: HashMap::new(),
            got: 0,
        };
        let mut ops = 0;
        while !r.is_empty() && ops < MAX_OPS {
            ops += 1;
            let op = r.u8();
            let (c, s) = (usize::from(op >> 4) % 4, usize::from(op >> 6) % SERVERS);
            match op % 10 {
                // Fresh key exchange between a client and a server (clients 0..4: one byte).
                0 => w.fresh(c, s),
                // Fresh key exchanges of many clients with one server: past both limits.
                1 => {
                    let (n, first, stride) = (usize::from(r.u8()), usize::from(r.u8()), usize::from(r.u8() % 8) + 1);
                    for j in 0..n {
                        w.fresh((first + j * stride) % CLIENTS, s);
                    }
                }
                // Connections opened at once: n proposals by a client.
                2 => {
                    let n = usize::from(r.u8() % 8) + 1;
                    for _ in 0..n {
                        w.propose(c, s);
                    }
                }
                3 => {
                    let c = usize::from(r.u8()) % CLIENTS;
                    w.propose(c, s);
                }
                4 | 5 => w.accept(&mut r),
                // A SYN lost for good (or refused by a server that lost its state, such as
                // after a restart): its i is used up all the same.
                6 => {
                    if !w.in_flight.is_empty() {
                        let p = w.in_flight.remove(usize::from(r.u8()) % w.in_flight.len());
                        // Refused: the connection's fresh key exchange starts a new chain.
                        if r.u8() & 1 == 1 {
                            w.fresh(p.client, p.server);
                        }
                    }
                }
                7 => {
                    // Time passes: up to 12.75 s in steps of 50 ms (the grace is 3 s).
                    w.clock += Duration::from_millis(50 * u64::from(r.u8()));
                }
                8 => w.purge(),
                _ => match op >> 4 {
                    0..=11 => w.successor(&mut r),
                    _ => {
                        // The API's flush.
                        let ch = w.acceptors[s].clear();
                        w.servers[s].chains.clear();
                        w.apply(s, ch);
                    }
                },
            }
            w.check();
        }
        w.check_all();
        w.got
    }
}
