//! Resumption for connections opened at once (RFC 8548 §3.5): the chain of session secrets
//! ss[1], ss[2], ... that one fresh key exchange leaves, used one link per connection.
//!
//! * [`Proposer`] (the active opener): per peer, the lowest unused ss[n] of one chain. Proposing
//!   hands ss[n] to the connection and keeps ss[n+1] at once, so connections opened together
//!   propose ss[n], ss[n+1], ss[n+2], ... without waiting for one another (§3.5: "the lowest value
//!   of i that has not already been used (successfully or not)"). A proposal counts as used
//!   whatever its outcome: refused (fresh key exchange), lost, or resumed.
//! * [`Acceptor`] (the passive opener): per chain, a window of the next [`Acceptor::ahead`]
//!   secrets, each published to the ENO source (eno-bpf's `eno_resume` map: the kernel answers a
//!   SYN before the daemon sees the connection) and taken out when a connection uses it, so no
//!   ss[i] secures two connections. A SYN naming any i in the window resumes, in any order.
//!
//! Only a fresh key exchange's ss[1] starts a chain ([`ResumeTicket::starts_chain`]); the
//! successor a resumed session computes (ss[j+1]) is dropped: its chain's cache derived it already
//! and may have handed it out, and a chain dropped (replaced, expired) must never come back.
//!
//! Secrets kept, and why (§3.5 asks to compute ss[i+1] and erase ss[i] once ss[i] is used):
//! the proposer keeps one, the next it will propose; the acceptor keeps the window's ss[i], each
//! because a SYN naming it may arrive and the kernel's SYN-ACK agrees from the map alone, so the
//! daemon must then hold ss[i]. A used ss[j] leaves at once. An unused ss[i] below a used j would
//! still derive ss[j] (the chain runs one way): it is kept only [`Acceptor::grace`] longer, for
//! SYNs of the same burst that arrive after j's (they were proposed before j: lowest unused i
//! first), then erased; the window's ss[i] above j derive only connections not yet made.
//! Roles: a chain is used for active opens by the host that was the active opener of its fresh
//! key exchange and for passive opens by the other (§3.5 MAY), so the two hosts never propose the
//! same ss[i] to each other.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::consts::{RESUME_HALF_LEN, RESUME_ID_LEN};
use crate::resume::{ResumeName, ResumeTicket, TicketSource};
use crate::suite::Tep;

/// How many successors an acceptor publishes ahead of the lowest unused one: an HTTP/1.1
/// browser opens at most 6 connections per origin (RFC 9112 sets no number; Chrome and Firefox
/// use 6), so 8 cover a pool opened at once plus its replacements.
pub const DEFAULT_AHEAD: u64 = 8;

/// How long an unused secret below a used one stays acceptable: SYNs of one burst reach the
/// server within a round trip or so of each other, and a lost SYN is sent again after 1 s
/// (RFC 6298's initial RTO); 3 s covers both. Longer would keep ss[j] derivable from memory
/// longer after connection j used it.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

/// Active opener: per peer, the lowest unused ss[n] of its newest chain.
#[derive(Debug, Default)]
pub struct Proposer {
    /// peer -> (ss[n], when the chain was last used or started, + lifetime).
    chains: HashMap<Vec<u8>, (ResumeTicket, Option<Instant>, u64)>,
    seq: u64,
    /// Maximum number of peers (the least recently used dropped); 0 = unlimited.
    pub capacity: usize,
    /// How long a chain may be proposed from after it was started or last proposed from.
    pub lifetime: Option<Duration>,
}

impl Proposer {
    /// An empty proposer for at most `capacity` peers.
    pub fn new(capacity: usize) -> Self {
        Proposer { capacity, ..Default::default() }
    }
    /// Number of peers with a chain.
    pub fn len(&self) -> usize {
        self.chains.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }
    /// Cache a session's successor for `peer`. A fresh key exchange's ss[1] starts a new chain
    /// (replacing the peer's old one: its unused links are erased); any other successor is
    /// dropped (see the module's doc). Returns whether it was kept.
    pub fn insert(&mut self, peer: &[u8], ticket: ResumeTicket) -> bool {
        self.insert_at(peer, ticket, Instant::now())
    }
    /// [`Proposer::insert`] as at `now` (a clock of the caller's: tests, fuzzing).
    pub fn insert_at(&mut self, peer: &[u8], ticket: ResumeTicket, now: Instant) -> bool {
        if !ticket.starts_chain() {
            return false;
        }
        if self.capacity > 0 && self.chains.len() >= self.capacity && !self.chains.contains_key(peer) {
            if let Some(oldest) = self.chains.iter().min_by_key(|(_, e)| e.2).map(|(k, _)| k.clone()) {
                self.chains.remove(&oldest);
            }
        }
        self.seq += 1;
        let expires = self.lifetime.map(|l| now + l);
        self.chains.insert(peer.to_vec(), (ticket, expires, self.seq));
        true
    }
    /// The secret to propose to `peer`: its chain's lowest unused ss[n], now counted as used
    /// (successfully or not). The chain keeps ss[n+1] for the next proposal; the connection
    /// erases ss[n] once its keys are set.
    pub fn propose(&mut self, peer: &[u8]) -> Option<ResumeTicket> {
        self.propose_at(peer, Instant::now())
    }
    /// [`Proposer::propose`] as at `now`.
    pub fn propose_at(&mut self, peer: &[u8], now: Instant) -> Option<ResumeTicket> {
        let (t, expires, _) = self.chains.remove(peer)?;
        if expires.is_some_and(|x| x <= now) {
            return None;
        }
        self.seq += 1;
        let expires = self.lifetime.map(|l| now + l);
        self.chains.insert(peer.to_vec(), (t.successor(), expires, self.seq));
        Some(t)
    }
    /// The index n the next proposal to `peer` would use.
    pub fn next_index(&self, peer: &[u8]) -> Option<u64> {
        self.chains.get(peer).map(|e| e.0.index)
    }
    /// Drop chains whose lifetime ran out.
    pub fn purge_expired(&mut self) {
        self.purge_at(Instant::now())
    }
    /// [`Proposer::purge_expired`] as at `now`.
    pub fn purge_at(&mut self, now: Instant) {
        self.chains.retain(|_, e| !e.1.is_some_and(|x| x <= now));
    }
    /// Drop everything.
    pub fn clear(&mut self) {
        self.chains.clear();
    }
}

/// One chain's window at the acceptor.
#[derive(Debug)]
struct Window {
    peer: Vec<u8>,
    /// index -> (ss[index], erase at: set once a higher index was used).
    entries: BTreeMap<u64, (ResumeTicket, Option<Instant>)>,
    /// The highest index derived so far; its entry is always held (the next are derived from it).
    hi: u64,
    expires: Option<Instant>,
    seq: u64,
}

/// What the ENO source must learn after a change: names to publish, names to withdraw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Secrets now accepted (eno-bpf: `accept_resume`).
    pub published: Vec<ResumeName>,
    /// Secrets no longer accepted (used, erased, expired: `unaccept_resume`).
    pub withdrawn: Vec<ResumeName>,
}

impl Changes {
    fn extend(&mut self, o: Changes) {
        self.published.extend(o.published);
        self.withdrawn.extend(o.withdrawn);
    }
}

/// Passive opener: per chain, a window of the next secrets, each accepted once.
#[derive(Debug)]
pub struct Acceptor {
    windows: HashMap<[u8; RESUME_ID_LEN], Window>,
    /// The peer's half of every held ss[i] -> (chain, i).
    by_half: HashMap<[u8; RESUME_HALF_LEN], ([u8; RESUME_ID_LEN], u64)>,
    seq: u64,
    /// Secrets published ahead of the lowest unused one (at least 1).
    pub ahead: u64,
    /// How long an unused ss[i] below a used one stays (see the module's doc).
    pub grace: Duration,
    /// Maximum number of chains (the least recently used dropped); 0 = unlimited.
    pub capacity: usize,
    /// Maximum number of chains per peer (its least recently used dropped); 0 = unlimited.
    pub per_peer: usize,
    /// How long a chain is accepted after it was started or last used; None = no expiry.
    pub lifetime: Option<Duration>,
}

impl Default for Acceptor {
    fn default() -> Self {
        Acceptor::new(0)
    }
}

impl Acceptor {
    /// An empty acceptor for at most `capacity` chains, [`DEFAULT_AHEAD`] secrets ahead each.
    pub fn new(capacity: usize) -> Self {
        Acceptor {
            windows: HashMap::new(),
            by_half: HashMap::new(),
            seq: 0,
            ahead: DEFAULT_AHEAD,
            grace: DEFAULT_GRACE,
            capacity,
            per_peer: 4,
            lifetime: None,
        }
    }
    /// Number of secrets held (all windows).
    pub fn len(&self) -> usize {
        self.by_half.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.by_half.is_empty()
    }
    /// Number of chains.
    pub fn chains(&self) -> usize {
        self.windows.len()
    }
    /// The indices held for the chain `lineage`, lowest first.
    pub fn indices(&self, lineage: &[u8; RESUME_ID_LEN]) -> Vec<u64> {
        self.windows.get(lineage).map(|w| w.entries.keys().copied().collect()).unwrap_or_default()
    }

    /// Cache a session's successor from `peer`: a fresh key exchange's ss[1] starts a chain whose
    /// ss[1..=ahead] are published; any other successor is dropped (see the module's doc).
    pub fn insert(&mut self, peer: &[u8], ticket: ResumeTicket) -> Changes {
        self.insert_at(peer, ticket, Instant::now())
    }
    /// [`Acceptor::insert`] as at `now` (a clock of the caller's: tests, fuzzing).
    pub fn insert_at(&mut self, peer: &[u8], ticket: ResumeTicket, now: Instant) -> Changes {
        let mut ch = Changes::default();
        if !ticket.starts_chain() || self.windows.contains_key(&ticket.lineage) {
            return ch;
        }
        let mine: Vec<_> = self.windows.iter().filter(|(_, w)| w.peer == peer).map(|(k, w)| (*k, w.seq)).collect();
        if self.per_peer > 0 && mine.len() >= self.per_peer {
            if let Some((k, _)) = mine.iter().min_by_key(|(_, s)| *s) {
                ch.extend(self.drop_chain(k));
            }
        }
        if self.capacity > 0 && self.windows.len() >= self.capacity {
            if let Some(k) = self.windows.iter().min_by_key(|(_, w)| w.seq).map(|(k, _)| *k) {
                ch.extend(self.drop_chain(&k));
            }
        }
        self.seq += 1;
        let lineage = ticket.lineage;
        let hi = ticket.index;
        ch.published.push(ticket.name());
        self.by_half.insert(ticket.peer_half(), (lineage, hi));
        let mut entries = BTreeMap::new();
        entries.insert(hi, (ticket, None));
        let expires = self.lifetime.map(|l| now + l);
        self.windows.insert(lineage, Window { peer: peer.to_vec(), entries, hi, expires, seq: self.seq });
        ch.extend(self.fill(&lineage, hi + self.ahead.max(1) - 1));
        ch
    }

    /// Derive the chain's secrets up to index `upto` (from its highest, which is always held).
    fn fill(&mut self, lineage: &[u8; RESUME_ID_LEN], upto: u64) -> Changes {
        let mut ch = Changes::default();
        let Some(w) = self.windows.get_mut(lineage) else { return ch };
        while w.hi < upto {
            let Some(next) = w.entries.get(&w.hi).map(|(t, _)| t.successor()) else { break };
            w.hi = next.index;
            ch.published.push(next.name());
            self.by_half.insert(next.peer_half(), (*lineage, next.index));
            w.entries.insert(next.index, (next, None));
        }
        ch
    }

    fn drop_chain(&mut self, lineage: &[u8; RESUME_ID_LEN]) -> Changes {
        let mut ch = Changes::default();
        if let Some(w) = self.windows.remove(lineage) {
            for (t, _) in w.entries.values() {
                self.by_half.remove(&t.peer_half());
                ch.withdrawn.push(t.name());
            }
        }
        ch
    }

    /// Take ss[j], named by the peer's identifier half, for a connection that resumes with it
    /// (single use); the window moves on to j + ahead, and the unused secrets below j are erased
    /// after the grace period. None if not held for `tep`.
    pub fn take(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep) -> (Option<ResumeTicket>, Changes) {
        self.take_at(half, tep, Instant::now())
    }
    /// [`Acceptor::take`] as at `now`.
    pub fn take_at(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep, now: Instant) -> (Option<ResumeTicket>, Changes) {
        let mut ch = Changes::default();
        let Some(&(lineage, j)) = self.by_half.get(half) else { return (None, ch) };
        let Some(w) = self.windows.get(&lineage) else { return (None, ch) };
        if w.entries.get(&j).map(|(t, _)| t.tep) != Some(tep) {
            return (None, ch);
        }
        // The successors first (derived from the highest, which may be j itself).
        let upto = j + self.ahead.max(1);
        ch.extend(self.fill(&lineage, upto));
        self.seq += 1;
        let (grace, seq, lifetime) = (self.grace, self.seq, self.lifetime);
        let Some(w) = self.windows.get_mut(&lineage) else { return (None, ch) };
        let Some((t, _)) = w.entries.remove(&j) else { return (None, ch) };
        self.by_half.remove(half);
        ch.withdrawn.push(t.name());
        for (_, (_, erase)) in w.entries.range_mut(..j) {
            erase.get_or_insert(now + grace);
        }
        w.seq = seq;
        w.expires = lifetime.map(|l| now + l);
        (Some(t), ch)
    }

    /// Erase what is due: chains whose lifetime ran out, and unused secrets below a used one
    /// past their grace period.
    pub fn purge_expired(&mut self) -> Changes {
        self.purge_at(Instant::now())
    }

    /// [`Acceptor::purge_expired`] as at `now`.
    pub fn purge_at(&mut self, now: Instant) -> Changes {
        let mut ch = Changes::default();
        let dead: Vec<_> = self.windows.iter().filter(|(_, w)| w.expires.is_some_and(|x| x <= now)).map(|(k, _)| *k).collect();
        for k in &dead {
            ch.extend(self.drop_chain(k));
        }
        for w in self.windows.values_mut() {
            let due: Vec<u64> = w.entries.iter().filter(|(_, (_, e))| e.is_some_and(|x| x <= now)).map(|(i, _)| *i).collect();
            for i in due {
                if let Some((t, _)) = w.entries.remove(&i) {
                    self.by_half.remove(&t.peer_half());
                    ch.withdrawn.push(t.name());
                }
            }
        }
        ch
    }

    /// Drop everything (the API's "flush the cache"); returns what to withdraw.
    pub fn clear(&mut self) -> Changes {
        let all: Vec<_> = self.windows.keys().copied().collect();
        let mut ch = Changes::default();
        for k in &all {
            ch.extend(self.drop_chain(k));
        }
        ch
    }
}

impl TicketSource for Acceptor {
    fn take_by_peer_half(&mut self, half: &[u8; RESUME_HALF_LEN], tep: Tep) -> Option<ResumeTicket> {
        self.take(half, tep).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::K_LEN;
    use crate::eno::Role;
    use crate::keys::Secret;
    use crate::resume::{self, KeyMode};
    use crate::suite::Aead;
    use crate::{Config, Session};
    use rand_core::OsRng;

    /// Both ends' ss[1] of one fresh key exchange: the active opener's (role A) and the passive's.
    fn pair(b: u8) -> (ResumeTicket, ResumeTicket) {
        let t = |role| ResumeTicket::new(Tep::Curve25519, Aead::Aes128Gcm, role, 1, Secret::from_bytes([b; K_LEN]));
        (t(Role::A), t(Role::B))
    }

    #[test]
    fn the_proposer_uses_the_lowest_unused_i_each_once() {
        let (a, _) = pair(1);
        let mut p = Proposer::new(8);
        assert!(p.propose(b"www").is_none());
        assert!(p.insert(b"www", a.clone()));
        // Five connections opened at once: ss[1] .. ss[5], each the successor of the one before.
        let got: Vec<ResumeTicket> = (0..5).map(|_| p.propose(b"www").unwrap()).collect();
        assert_eq!(got.iter().map(|t| t.index).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        let mut want = a;
        for t in &got {
            assert_eq!((t.id, t.lineage), (want.id, got[0].id));
            want = want.successor();
        }
        // The successor a resumed session computes (ss[2], from ss[1]) was handed out already.
        assert!(!p.insert(b"www", got[0].successor()));
        assert_eq!(p.next_index(b"www"), Some(6));
        // A new fresh key exchange starts a new chain, at ss[1].
        let (a2, _) = pair(2);
        assert!(p.insert(b"www", a2.clone()));
        assert_eq!(p.propose(b"www").map(|t| t.id), Some(a2.id));
    }

    /// A chain's lifetime runs from its start or from its last proposal.
    #[test]
    fn an_expired_chain_is_not_proposed_and_purge_drops_it() {
        let t0 = Instant::now();
        let mut p = Proposer::new(8);
        p.lifetime = Some(Duration::from_secs(10));
        p.insert_at(b"p", pair(1).0, t0);
        assert_eq!(p.propose_at(b"p", t0 + Duration::from_secs(9)).map(|t| t.index), Some(1));
        // The proposal renewed it: 9 s later it is still alive; 10 s after that, gone.
        assert_eq!(p.propose_at(b"p", t0 + Duration::from_secs(18)).map(|t| t.index), Some(2));
        assert!(p.propose_at(b"p", t0 + Duration::from_secs(28)).is_none(), "an expired chain must not be proposed");
        assert!(p.is_empty());
        p.insert_at(b"q", pair(2).0, t0);
        p.insert_at(b"r", pair(3).0, t0 + Duration::from_secs(5));
        p.purge_at(t0 + Duration::from_secs(10));
        assert_eq!((p.len(), p.next_index(b"q"), p.next_index(b"r")), (1, None, Some(1)));
    }

    #[test]
    fn a_refused_proposal_consumes_its_i() {
        let (a, b) = pair(3);
        let mut p = Proposer::new(8);
        p.insert(b"www", a);
        let cfg = Config::default();
        // The server does not hold the chain: ss[1] is refused (a fresh key exchange)...
        let t1 = p.propose(b"www").unwrap();
        let syn = resume::syn_option(&cfg.teps, Some(&t1.suboption(&[1; 8]))).unwrap();
        let (synack, held) = resume::synack_option(&syn, &cfg.teps, Some(&mut Acceptor::new(8)), 0, &mut OsRng);
        assert!(held.is_none());
        let plan = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[&t1]).unwrap();
        assert_eq!(plan.mode, KeyMode::Fresh);
        // ... and counts as used: the next proposal is ss[2], which a server holding it accepts.
        let mut acc = Acceptor::new(8);
        acc.insert(b"client", b);
        let t2 = p.propose(b"www").unwrap();
        assert_eq!(t2.index, 2);
        assert!(acc.take(&t2.my_half(), t2.tep).0.is_some());
    }

    #[test]
    fn the_acceptor_accepts_any_i_in_its_window_once_and_moves_it_on() {
        let (a, b) = pair(4);
        let mut acc = Acceptor::new(8);
        let ch = acc.insert(b"client", b);
        assert_eq!(ch.published.len() as u64, DEFAULT_AHEAD, "ss[1..=8] published");
        assert_eq!(acc.indices(&a.lineage), (1..=8).collect::<Vec<_>>());
        let mut p = Proposer::new(8);
        p.insert(b"www", a);
        let offers: Vec<ResumeTicket> = (0..10).map(|_| p.propose(b"www").unwrap()).collect();
        // SYNs of one burst in any order: 3 first, then 1 and 2 (below a used one: still in grace).
        for k in [2, 0, 1, 4, 3] {
            let (t, ch) = acc.take(&offers[k].my_half(), offers[k].tep);
            let t = t.unwrap_or_else(|| panic!("ss[{}] refused", k + 1));
            assert_eq!((t.id, t.index), (offers[k].id, k as u64 + 1));
            assert!(ch.withdrawn.contains(&t.name()));
            // never the same i twice
            assert!(acc.take(&offers[k].my_half(), offers[k].tep).0.is_none());
        }
        // The window moved on: 8 ahead of the highest used (5), so ss[9] and ss[10] are held.
        assert_eq!(acc.indices(&offers[0].lineage), (6..=13).collect::<Vec<_>>());
        assert!(acc.take(&offers[9].my_half(), offers[9].tep).0.is_some());
        // Wrong TEP, unknown half: refused.
        assert!(acc.take(&offers[5].my_half(), Tep::P256).0.is_none());
        assert!(acc.take(&[9; RESUME_HALF_LEN], Tep::Curve25519).0.is_none());
    }

    #[test]
    fn outside_the_window_is_refused_and_below_a_used_i_is_erased_after_the_grace() {
        let (a, b) = pair(5);
        let mut acc = Acceptor::new(8);
        acc.insert(b"client", b);
        let mut p = Proposer::new(8);
        p.insert(b"www", a);
        let offers: Vec<ResumeTicket> = (0..12).map(|_| p.propose(b"www").unwrap()).collect();
        assert!(acc.take(&offers[8].my_half(), offers[8].tep).0.is_none(), "ss[9]: beyond 8 ahead");
        assert!(acc.take(&offers[3].my_half(), offers[3].tep).0.is_some(), "ss[4]");
        // ss[1..3] stay for the grace period, then are erased (each derives ss[4]).
        assert!(acc.purge_at(Instant::now()).withdrawn.is_empty());
        let ch = acc.purge_at(Instant::now() + DEFAULT_GRACE + Duration::from_millis(1));
        assert_eq!(ch.withdrawn.len(), 3);
        for t in &offers[..3] {
            assert!(ch.withdrawn.iter().any(|n| n.peer_half == t.my_half() && n.my_half == t.peer_half()));
            assert!(acc.take(&t.my_half(), t.tep).0.is_none());
        }
        assert_eq!(acc.indices(&offers[0].lineage), (5..=12).collect::<Vec<_>>());
        // A chain's lifetime: all of it withdrawn.
        acc.lifetime = Some(Duration::ZERO);
        assert!(acc.take(&offers[4].my_half(), offers[4].tep).0.is_some());
        let ch = acc.purge_expired();
        assert_eq!((ch.withdrawn.len(), acc.len(), acc.chains()), (8, 0, 0));
    }

    #[test]
    fn only_a_fresh_exchange_starts_a_chain_and_a_peer_keeps_a_few() {
        let mut acc = Acceptor::new(0);
        let (_, b) = pair(6);
        assert!(acc.insert(b"c", b.successor()).published.is_empty(), "ss[2] of a resumed session");
        for k in 0..6 {
            acc.insert(b"c", pair(10 + k).1);
        }
        assert_eq!(acc.chains(), 4);
        assert_eq!(acc.len(), 4 * DEFAULT_AHEAD as usize);
        assert_eq!(acc.clear().withdrawn.len(), 4 * DEFAULT_AHEAD as usize);
        assert!(acc.is_empty());
    }

    /// Three connections opened at once resume ss[1], ss[2], ss[3] end to end: both sides agree
    /// on each session ID, and no two connections share one.
    #[test]
    fn parallel_connections_resume_with_distinct_secrets() {
        let cfg = Config::default();
        let (a, b) = pair(7);
        let (mut p, mut acc) = (Proposer::new(8), Acceptor::new(8));
        p.insert(b"www", a);
        acc.insert(b"client", b);
        let offers: Vec<ResumeTicket> = (0..3).map(|_| p.propose(b"www").unwrap()).collect();
        let syns: Vec<Vec<u8>> = offers.iter().map(|t| resume::syn_option(&cfg.teps, Some(&t.suboption(&[t.index as u8; 8]))).unwrap()).collect();
        let mut sids = Vec::new();
        for k in [1, 2, 0] {
            let (synack, held) = resume::synack_option(&syns[k], &cfg.teps, Some(&mut acc), 0, &mut OsRng);
            let held = held.expect("resumed");
            let pa = resume::negotiate(&syns[k], &synack, false, true, &cfg.teps, &[&offers[k]]).unwrap();
            let pb = resume::negotiate(&syns[k], &synack, true, true, &cfg.teps, &[&held]).unwrap();
            let x = Session::new(&pa, cfg.clone(), Some(offers[k].clone()), &mut OsRng).unwrap();
            let y = Session::new(&pb, cfg.clone(), Some(held), &mut OsRng).unwrap();
            assert!(x.resumed() && y.resumed());
            assert_eq!(x.session_id(), y.session_id());
            sids.push(x.session_id().unwrap().to_vec());
        }
        sids.sort();
        sids.dedup();
        assert_eq!(sids.len(), 3);
    }
}
