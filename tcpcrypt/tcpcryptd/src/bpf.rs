//! The production ENO source: the `tcpcrypt-eno-bpf` sock_ops program attached to the
//! daemon's cgroup. Its SYN-ACK carries one fresh-key-exchange TEP, so a daemon behind it
//! never resumes sessions (it still caches nothing it cannot use: `supports_resumption`
//! is false).

use std::net::{SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tcpcrypt_eno_bpf::{EnoBpf, EnoConfig};
use tcpcrypt_proto::Tep;

use crate::eno_source::{EnoRecord, EnoSource};

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
    fn record(&self, local: SocketAddr, remote: SocketAddr, passive: bool) -> anyhow::Result<Option<EnoRecord>> {
        let (Some(l), Some(r)) = (v4(local), v4(remote)) else { return Ok(None) };
        // After accept() the first ACK has been processed; allow the record a moment anyway.
        let mut rec = self.0.record(l, r)?;
        for _ in 0..20 {
            match &rec {
                Some(x) if !x.complete => {
                    std::thread::sleep(Duration::from_millis(1));
                    rec = self.0.record(l, r)?;
                }
                _ => break,
            }
        }
        Ok(rec.map(|x| EnoRecord {
            passive: x.passive || passive && x.syn_option.is_empty(),
            encrypted_hint: Some(x.encrypted()),
            fallback: x.fallback.map(|f| format!("eno-bpf: {f:?}")),
            syn_option: x.syn_option,
            synack_option: x.synack_option,
            ack_had_eno: x.ack_had_eno,
            resume_ticket: None,
        }))
    }
    fn forget(&self, local: SocketAddr, remote: SocketAddr, _passive: bool) {
        if let (Some(l), Some(r)) = (v4(local), v4(remote)) {
            self.0.forget(l, r);
        }
    }
}

/// Attach the sock_ops program to `cgroup` offering `teps` (most preferred first).
pub fn attach(cgroup: &Path, teps: &[Tep]) -> anyhow::Result<Arc<dyn EnoSource>> {
    let cfg = EnoConfig { teps: teps.iter().map(|t| t.id()).collect() };
    Ok(Arc::new(Bpf(EnoBpf::attach(cgroup, &cfg)?)))
}
