//! The production ENO source: the `tcpcrypt-eno-bpf` sock_ops program attached to the
//! daemon's cgroup. Its records live in socket storage (`BPF_MAP_TYPE_SK_STORAGE`) of the
//! connection's own socket, so no other connection (or SYN flood) can evict them; the daemon
//! reads them through the socket's fd.
//!
//! Resumption (RFC 8548 §3.5): an outgoing socket's SYN carries the resumption suboption the
//! daemon sets for it (`eno_sk_syn`: the configured TEPs plus the ticket's TEP with v = 1, its
//! identifier half and an 8-byte nonce_a); if that does not fit in the SYN's option space the
//! program sends the configured TEPs instead (a fresh key exchange). A listener's program answers
//! a resumption suboption with one (its half, a zero-byte nonce_b) when the half is in
//! `eno_resume`, the map this daemon fills with the tickets it holds (see `accept_resume`).

use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;

use tcpcrypt_eno_bpf::{EnoBpf, EnoConfig, EnoFallback};
use tcpcrypt_proto::eno::TepSuboption;
use tcpcrypt_proto::{resume, ResumeName, Tep};

use crate::eno_source::{EnoLookup, EnoRecord, EnoSource};

struct Bpf(EnoBpf);

fn v4(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(v) => Some(v),
        SocketAddr::V6(v) => v.ip().to_ipv4_mapped().map(|ip| SocketAddrV4::new(ip, v.port())),
    }
}

impl EnoSource for Bpf {
    fn name(&self) -> &'static str {
        "bpf"
    }
    fn supports_resumption(&self) -> bool {
        true
    }
    fn prepare_connect(&self, sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, resume: Option<&TepSuboption>) -> bool {
        let Some(sub) = resume else { return false };
        if v4(local).is_none() || v4(remote).is_none() || remote.ip().is_loopback() || !remote.is_ipv4() {
            return false;
        }
        // Only the ticket's TEP (its resumption suboption also offers it for a fresh key
        // exchange, RFC 8548 §3.5): 2 + 1 + 9 + 8 = 20 bytes, all the room a Linux SYN leaves
        // next to MSS, SACK-permitted, timestamps and window scale (20 bytes).
        let Ok(opt) = resume::syn_option(&[], Some(sub)) else { return false };
        match self.0.set_syn_option(sock, &opt) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("tcpcryptd: resumption not offered: {e:#}");
                false
            }
        }
    }
    fn accept_resume(&self, t: &ResumeName) {
        if let Err(e) = self.0.accept_resume(t.tep.id(), &t.peer_half, &t.my_half) {
            eprintln!("tcpcryptd: resumption ticket not given to eno-bpf: {e:#}");
        }
    }
    fn unaccept_resume(&self, t: &ResumeName) {
        self.0.unaccept_resume(t.tep.id(), &t.peer_half);
    }
    fn record(&self, sock: BorrowedFd<'_>, local: SocketAddr, remote: SocketAddr, _passive: bool) -> anyhow::Result<EnoLookup> {
        // What the program leaves alone never carried ENO: plain TCP by design.
        let (Some(l), Some(r)) = (v4(local), v4(remote)) else {
            return Ok(EnoLookup::NotApplicable("IPv6: eno-bpf runs on IPv4 sockets only".into()));
        };
        if matches!(local, SocketAddr::V6(_)) {
            return Ok(EnoLookup::NotApplicable("v4-mapped IPv6 socket: eno-bpf runs on AF_INET sockets only".into()));
        }
        if l.ip().is_loopback() || r.ip().is_loopback() {
            return Ok(EnoLookup::NotApplicable("loopback: eno-bpf skips 127/8".into()));
        }
        // The program writes the record before connect()/accept() return (ACTIVE_ESTABLISHED
        // runs before the connect completes, PASSIVE_ESTABLISHED before the child is queued
        // for accept), so there is nothing to wait for: missing or incomplete = fail closed.
        let Some(x) = self.0.record(sock)? else {
            return Ok(EnoLookup::Missing("no ENO record for the socket".into()));
        };
        if !x.complete {
            return Ok(EnoLookup::Missing(format!("ENO record incomplete: {x:?}")));
        }
        if x.fallback == Some(EnoFallback::SynNotSaved) && x.ack_had_eno {
            // The SYN-ACK carried ENO and A's ACK too, but the SYN (hence the transcript) is
            // not known here (e.g. a SYN cookie): A has encryption enabled; we cannot run it.
            return Ok(EnoLookup::Missing("SYN not saved (SYN cookie?) but the ACK carried ENO".into()));
        }
        Ok(EnoLookup::Record(EnoRecord {
            passive: x.passive,
            encrypted_hint: Some(x.encrypted()),
            fallback: x.fallback.map(|f| format!("eno-bpf: {f:?}")),
            syn_option: x.syn_option,
            synack_option: x.synack_option,
            ack_had_eno: x.ack_had_eno,
            resume_ticket: None,
        }))
    }
    fn forget(&self, sock: BorrowedFd<'_>, _local: SocketAddr, _remote: SocketAddr, _passive: bool) {
        let _ = self.0.forget(sock);
    }
}

/// Attach the sock_ops program to `cgroup` offering `teps` (most preferred first).
pub fn attach(cgroup: &Path, teps: &[Tep]) -> anyhow::Result<Arc<dyn EnoSource>> {
    let cfg = EnoConfig { teps: teps.iter().map(|t| t.id()).collect() };
    Ok(Arc::new(Bpf(EnoBpf::attach(cgroup, &cfg)?)))
}
