//! Where the daemon learns what TCP-ENO put on the wire for a connection.
//!
//! In production that is the sock_ops BPF program of `tcpcrypt-eno-bpf` (see `bpf.rs`); the
//! trait lets tests run the whole daemon over plain loopback sockets with [`FakeEnoNet`],
//! an in-process stand-in that computes the SYN and SYN-ACK options the way the two hosts
//! would have.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use tcpcrypt_proto::eno::TepSuboption;
use tcpcrypt_proto::{resume, Acceptor, ResumeName, ResumeTicket, Tep};

/// The ENO options of one connection, as the kernel saw them.
#[derive(Debug, Clone, Default)]
pub struct EnoRecord {
    /// Whether we are the passive opener.
    pub passive: bool,
    /// The active opener's SYN ENO option incl. kind/len (empty if none).
    pub syn_option: Vec<u8>,
    /// The passive opener's SYN-ACK ENO option (empty if none).
    pub synack_option: Vec<u8>,
    /// Whether the third segment (ACK) carried ENO.
    pub ack_had_eno: bool,
    /// Passive side: the resumption ticket the SYN-ACK was built with, if it resumed.
    pub resume_ticket: Option<ResumeTicket>,
    /// The kernel side's own verdict, if it has one: whether it enabled encryption (sent or
    /// received the ENO-bearing ACK). The daemon never relays plaintext when this is true.
    pub encrypted_hint: Option<bool>,
    /// The kernel side's fallback reason, if it decided to fall back.
    pub fallback: Option<String>,
}

/// What an ENO source knows about one connection.
#[derive(Debug, Clone)]
pub enum EnoLookup {
    /// The kernel side's record (which may itself say that ENO fell back, and why).
    Record(EnoRecord),
    /// ENO does not run on this connection by design (`--eno none`, IPv6 or loopback with
    /// eno-bpf): our SYN/SYN-ACK carried no ENO, so the peer cannot have enabled encryption
    /// and plain TCP is the legitimate fallback of RFC 8547 §4.6. The reason.
    NotApplicable(String),
    /// The record should exist and does not, or is incomplete (deleted, evicted, the SYN was
    /// not saved): we cannot know whether the peer enabled encryption, so the connection is
    /// reset - never relayed in plaintext. The reason.
    Missing(String),
}

/// A source of per-connection ENO records.
pub trait EnoSource: Send + Sync + 'static {
    /// Short name for logs.
    fn name(&self) -> &'static str;
    /// Whether [`EnoSource::prepare_connect`] can put a resumption suboption in the SYN.
    fn supports_resumption(&self) -> bool {
        false
    }
    /// Called after bind() and before connect() of an outgoing socket (`sock`). Returns
    /// whether the resumption suboption is meant for the SYN (it may still not fit: the
    /// record's SYN option says what went out).
    fn prepare_connect(&self, _sock: BorrowedFd<'_>, _local: SocketAddr, _remote: SocketAddr, _resume: Option<&TepSuboption>) -> bool {
        false
    }
    /// Passive side: SYNs naming this ticket (our cache holds it) may now be answered with
    /// a resumption (RFC 8548 §3.5).
    fn accept_resume(&self, _name: &ResumeName) {}
    /// Passive side: the secret left our cache (used, erased, expired): stop accepting it.
    fn unaccept_resume(&self, _name: &ResumeName) {}
    /// The record of an established connection (`sock`: its socket, after connect()/accept()).
    fn record(&self, sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, passive: bool) -> anyhow::Result<EnoLookup>;
    /// Drop per-connection state (eno-bpf: the socket's storage; tests use it to delete a
    /// record mid-handshake).
    fn forget(&self, _sock: BorrowedFd<'_>, _local: SocketAddr, _remote: SocketAddr, _passive: bool) {}
    /// The daemon is done with the connection (its socket may be gone): drop what is kept by
    /// address (eno-bpf keeps nothing: its storage dies with the socket).
    fn done(&self, _local: SocketAddr, _remote: SocketAddr, _passive: bool) {}
}

/// No ENO at all: every connection is relayed as plain TCP.
pub struct NoEno;

impl EnoSource for NoEno {
    fn name(&self) -> &'static str {
        "none"
    }
    fn record(&self, _: BorrowedFd<'_>, _: SocketAddr, _: SocketAddr, _: bool) -> anyhow::Result<EnoLookup> {
        Ok(EnoLookup::NotApplicable("ENO disabled (--eno none)".into()))
    }
}

/// How a fake listener answers SYNs.
#[derive(Clone)]
pub struct ListenerPolicy {
    /// TEPs (most preferred first); None = a host without TCP-ENO.
    pub teps: Option<Vec<Tep>>,
    /// The listening daemon's resumption acceptor.
    pub cache: Option<Arc<Mutex<Acceptor>>>,
}

type Key = (u16, SocketAddr); // (active opener's port, passive opener's address)

#[derive(Default)]
struct NetState {
    listeners: HashMap<SocketAddr, ListenerPolicy>,
    records: HashMap<(Key, bool), EnoRecord>,
}

/// An in-process "network" shared by the daemons of one test.
#[derive(Default, Clone)]
pub struct FakeEnoNet {
    state: Arc<Mutex<NetState>>,
}

impl FakeEnoNet {
    /// A new empty network.
    pub fn new() -> Self {
        Self::default()
    }
    /// Register how the listener at `addr` answers SYNs.
    pub fn listen(&self, addr: SocketAddr, policy: ListenerPolicy) {
        self.lock().listeners.insert(addr, policy);
    }
    /// A host's view: with TEPs (None = ENO disabled on that host).
    pub fn host(&self, teps: Option<Vec<Tep>>) -> FakeEno {
        FakeEno { net: self.clone(), teps }
    }
    /// For a test middlebox that relays a connection: what the passive end of the
    /// connection `(from_port -> via)` saw is what the passive end of `(out_port -> to)` sees.
    pub fn relay(&self, from_port: u16, via: SocketAddr, out_port: u16, to: SocketAddr) {
        let mut st = self.lock();
        if let Some(r) = st.records.get(&((from_port, via), true)).cloned() {
            st.records.insert(((out_port, to), true), r);
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, NetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One host on a [`FakeEnoNet`].
pub struct FakeEno {
    net: FakeEnoNet,
    teps: Option<Vec<Tep>>,
}

fn key(local: SocketAddr, remote: SocketAddr, passive: bool) -> Key {
    if passive {
        (remote.port(), local)
    } else {
        (local.port(), remote)
    }
}

impl EnoSource for FakeEno {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn supports_resumption(&self) -> bool {
        true
    }
    fn prepare_connect(&self, _sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, resume: Option<&TepSuboption>) -> bool {
        let syn = match &self.teps {
            Some(t) => resume::syn_option(t, resume).unwrap_or_default(),
            None => Vec::new(),
        };
        let mut st = self.net.lock();
        let policy = st.listeners.get(&remote).cloned();
        let (synack, ticket) = match policy.as_ref().and_then(|p| p.teps.clone().map(|t| (t, p.cache.clone()))) {
            Some((teps, cache)) if !syn.is_empty() => {
                let mut guard = cache.as_ref().map(|c| c.lock().unwrap_or_else(|p| p.into_inner()));
                let source = guard.as_deref_mut().map(|a| a as &mut dyn resume::TicketSource);
                resume::synack_option(&syn, &teps, source, 8, &mut rand_core::OsRng)
            }
            _ => (Vec::new(), None),
        };
        let ack = !synack.is_empty();
        let k = key(local, remote, false);
        let base = EnoRecord { passive: false, syn_option: syn.clone(), synack_option: synack, ack_had_eno: ack, ..Default::default() };
        st.records.insert((k, true), EnoRecord { passive: true, resume_ticket: ticket, ..base.clone() });
        st.records.insert((k, false), base);
        resume.is_some() && !syn.is_empty()
    }
    fn record(&self, _sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, passive: bool) -> anyhow::Result<EnoLookup> {
        let mut st = self.net.lock();
        // The passive side's record is consumed (it holds the resumption ticket).
        let k = (key(local, remote, passive), passive);
        let r = if passive { st.records.remove(&k) } else { st.records.get(&k).cloned() };
        Ok(match r {
            Some(r) => EnoLookup::Record(r),
            None => EnoLookup::Missing("no record of the connection in the fake ENO network".into()),
        })
    }
    fn forget(&self, _sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, passive: bool) {
        self.done(local, remote, passive);
    }
    fn done(&self, local: SocketAddr, remote: SocketAddr, passive: bool) {
        self.net.lock().records.remove(&(key(local, remote, passive), passive));
    }
}
