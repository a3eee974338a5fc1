//! TCP-ENO (RFC 8547) on the wire for wearlab's tcpcrypt daemon, without a kernel patch.
//!
//! A cgroup `sock_ops` BPF program (`bpf/eno.bpf.c`, compiled by `build.rs` and embedded in
//! the binary) writes and parses the ENO option (TCP option kind 69) for the TCP sockets of
//! the processes in one cgroup v2 directory — normally the daemon's own cgroup:
//!
//! | segment | sent by | ENO option written |
//! |---|---|---|
//! | SYN | active opener (host A) | SYN form: `69, 2+n, tep_1 .. tep_n` (config TEPs, b=0 implicit), or a per-socket override ([`EnoBpf::set_syn_option`]) |
//! | SYN-ACK | passive opener (host B) | SYN form: `69, 4, 0x01, tep` (global suboption b=1 and the most preferred configured TEP that A offered), `69, 3, 0x01` (vacuous) if none, nothing if the SYN had no (valid) ENO |
//! | 3rd segment and any later A segment until A receives a non-SYN segment | A | non-SYN form `69, 2` (RFC 8547 §4.6) |
//! | anything else | | nothing (the callbacks are switched off per socket) |
//!
//! The program records, per connection, everything the daemon needs for the negotiation
//! transcript (§4.8) in socket storage (`BPF_MAP_TYPE_SK_STORAGE`) of the connection's own
//! socket: read it with [`EnoBpf::record`] (by the socket's fd) once `connect()`/`accept()`
//! has returned. It is freed with the socket; no other connection, and no SYN flood, can evict
//! it (half-open connections hold no state of ours: the passive side decides statelessly from
//! the SYN, which the kernel saves with the request sock and the new socket, `TCP_SAVE_SYN`).
//!
//! `unsafe`: this library denies it except at two sites, each with its own `allow` and a
//! `SAFETY:` comment: the `Pod` impl of the config record shared with the C program, and the
//! raw `bpf(2)` call on the socket-storage maps (aya has no type for them).
//!
//! Lifetime: [`EnoBpf::attach`] attaches with a `bpf_link` (`BPF_LINK_CREATE`) and pins
//! nothing, so the program is detached as soon as the [`EnoBpf`] is dropped or the process
//! dies (even `kill -9`): the last reference to the link is the process's fd.
//!
//! Limits: IPv4 only (AF_INET sockets; IPv6 and v4-mapped sockets are left alone),
//! 127.0.0.0/8 is skipped, no simultaneous open support beyond what a per-socket override with
//! b=1 gives, no SYN data. The listener must be created after [`EnoBpf::attach`] (the program
//! enables the SYN-ACK callback in `BPF_SOCK_OPS_TCP_LISTEN_CB`).

#![deny(unsafe_code)]

use std::{
    fs::File,
    os::fd::{AsFd, AsRawFd, BorrowedFd},
    path::Path,
    sync::Mutex,
};

use anyhow::{anyhow, bail, Context, Result};
use aya::{
    maps::{Array, HashMap, Map, MapData},
    programs::{links::CgroupAttachMode, SockOps},
    Ebpf, EbpfLoader, Pod,
};

#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);
// The ELF parser needs the object 8-byte aligned; include_bytes! alone only guarantees 1.
static ALIGNED_OBJECT: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/eno.bpf.o")));

/// The compiled sock_ops object (clang -target bpf), embedded so the daemon is one file.
pub static ENO_BPF_OBJECT: &[u8] = &ALIGNED_OBJECT.0;

/// TCP option kind of TCP-ENO (RFC 8547 §7).
pub const ENO_KIND: u8 = 69;
/// tcpcrypt TEP identifiers (RFC 8548 §7): TCPCRYPT_ECDHE_P256 .. TCPCRYPT_ECDHE_Curve448.
pub const TEP_TCPCRYPT_ECDHE_P256: u8 = 0x21;
pub const TEP_TCPCRYPT_ECDHE_P521: u8 = 0x22;
pub const TEP_TCPCRYPT_ECDHE_CURVE25519: u8 = 0x23;
pub const TEP_TCPCRYPT_ECDHE_CURVE448: u8 = 0x24;

const MAX_CFG_TEPS: usize = 32;
const ENO_MAX: usize = 40;
/// Half of an RFC 8548 resumption identifier resume[i] (9 bytes).
pub const RESUME_HALF_LEN: usize = 9;

/// What the program offers / accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnoConfig {
    /// Supported TEP ids (the 7-bit `glt` value, 0x20..=0x7f, no `v` bit), most preferred
    /// first. As active opener all of them are offered in this order; as passive opener the
    /// first one that the peer also offered is chosen. Empty: active opens carry no ENO
    /// (unless overridden per socket) and passive opens answer ENO SYNs with a vacuous option.
    pub teps: Vec<u8>,
}

/// Why TCP-ENO fell back to plain TCP on a connection (RFC 8547 §4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnoFallback {
    /// Passive: the SYN carried no ENO option (plain TCP peer). Nothing was written.
    SynWithoutEno,
    /// Active: the SYN-ACK carried no ENO option (peer without ENO, or option stripped).
    SynAckWithoutEno,
    /// Passive: the first ACK (A's third segment) carried no ENO option (§4.6 rule 1).
    AckWithoutEno,
    /// The peer's SYN-form option was ill-formed (§4.4); it is treated as absent.
    IllFormed,
    /// More than one ENO option in a SYN segment (§4.1).
    Duplicate,
    /// Both ends sent the same `b` bit (§4.3, §4.6 rule 3).
    RoleConflict,
    /// No TEP valid for both ends; at least one side sent a vacuous option (§4.6 rule 2).
    NoCommonTep,
    /// Our option did not fit into the TCP option space; the segment went out without it.
    NoSpace,
    /// Active: no TEP configured and no per-socket override; the SYN carried no ENO.
    NoConfig,
    /// Passive: the kernel did not save the SYN (a SYN cookie, or a listener created before
    /// the program was attached), so the transcript is unknown. If the ACK carried ENO the
    /// peer enabled encryption: the daemon resets such a connection.
    SynNotSaved,
    /// A value this version does not know.
    Other(u8),
}

impl EnoFallback {
    fn from_raw(v: u8) -> Option<EnoFallback> {
        Some(match v {
            0 => return None,
            1 => EnoFallback::SynWithoutEno,
            2 => EnoFallback::SynAckWithoutEno,
            3 => EnoFallback::AckWithoutEno,
            4 => EnoFallback::IllFormed,
            5 => EnoFallback::Duplicate,
            6 => EnoFallback::RoleConflict,
            7 => EnoFallback::NoCommonTep,
            8 => EnoFallback::NoSpace,
            9 => EnoFallback::NoConfig,
            10 => EnoFallback::SynNotSaved,
            x => EnoFallback::Other(x),
        })
    }
}

/// What the program saw and sent on one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnoRecord {
    /// true: this host was the passive opener (host B); false: active opener (host A).
    pub passive: bool,
    /// The ENO option of the SYN (host A's SYN-form option), exactly as on the wire,
    /// kind and length bytes included; empty if the SYN had none.
    pub syn_option: Vec<u8>,
    /// The ENO option of the SYN-ACK (host B's SYN-form option), kind and length included;
    /// empty if the SYN-ACK had none.
    pub synack_option: Vec<u8>,
    /// Whether the first ACK segment this host *received* carried an ENO option (§4.6 rule 1):
    /// for the passive opener A's third segment, for the active opener the SYN-ACK.
    pub ack_had_eno: bool,
    /// Why ENO fell back to plain TCP, if it did. `None` on the passive side before the ACK
    /// arrived means "not decided yet"; see [`EnoRecord::complete`].
    pub fallback: Option<EnoFallback>,
    /// Negotiated TEP id (§4.5: the last TEP in B's option that A also sent), as computed by
    /// the program; `None` if there is none. The daemon still has to check TEP-specific
    /// validity of suboption data (§4.5 item 2).
    pub tep: Option<u8>,
    /// The handshake is over for ENO (both SYN-form options exchanged and the first ACK
    /// seen, or fallback decided).
    pub complete: bool,
    /// Active: the SYN option came from [`EnoBpf::set_syn_option`].
    pub overridden: bool,
}

impl EnoRecord {
    /// ENO succeeded: a TEP was negotiated and nothing forced a fallback. The connection
    /// MUST then run the TEP (§4.6: encryption is enabled once both hosts sent and received
    /// an ACK with ENO).
    pub fn encrypted(&self) -> bool {
        self.fallback.is_none() && self.tep.is_some() && self.ack_had_eno
    }

    /// The negotiation transcript of RFC 8547 §4.8: host A's SYN-form ENO option followed
    /// by host B's, kind and length bytes included. Host A is the active opener (this crate
    /// does not do simultaneous open), so this is `syn_option || synack_option` on both ends.
    pub fn transcript(&self) -> Vec<u8> {
        let mut t = self.syn_option.clone();
        t.extend_from_slice(&self.synack_option);
        t
    }
}

// ---- shared layouts with bpf/eno.bpf.c -------------------------------------------------

const ROLE_PASSIVE: u8 = 2;
const ST_DONE: u8 = 4;
const F_ACK_HAD_ENO: u8 = 0x01;
const F_SYN_ENO: u8 = 0x02;
const F_SYNACK_ENO: u8 = 0x04;
const F_OVERRIDE: u8 = 0x08;

#[repr(C)]
#[derive(Clone, Copy)]
struct RawRec {
    role: u8,
    state: u8,
    flags: u8,
    fallback: u8,
    syn_len: u8,
    synack_len: u8,
    tep: u8,
    pad: u8,
    syn_opt: [u8; ENO_MAX],
    synack_opt: [u8; ENO_MAX],
}
const RAW_REC_LEN: usize = 8 + 2 * ENO_MAX;

impl RawRec {
    fn from_bytes(b: &[u8; RAW_REC_LEN]) -> RawRec {
        let mut syn_opt = [0u8; ENO_MAX];
        let mut synack_opt = [0u8; ENO_MAX];
        syn_opt.copy_from_slice(&b[8..8 + ENO_MAX]);
        synack_opt.copy_from_slice(&b[8 + ENO_MAX..]);
        RawRec {
            role: b[0],
            state: b[1],
            flags: b[2],
            fallback: b[3],
            syn_len: b[4],
            synack_len: b[5],
            tep: b[6],
            pad: b[7],
            syn_opt,
            synack_opt,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawCfg {
    n_teps: u8,
    flags: u8,
    teps: [u8; MAX_CFG_TEPS],
}
// SAFETY: RawCfg is #[repr(C)], Copy, made only of u8 fields and arrays (no padding, no
// pointers, every bit pattern valid), and has the layout of `struct eno_cfg` in eno.bpf.c:
// aya may copy it to and from the kernel as plain bytes.
#[allow(unsafe_code)]
unsafe impl Pod for RawCfg {}

impl From<RawRec> for EnoRecord {
    fn from(r: RawRec) -> EnoRecord {
        let opt = |flag: u8, len: u8, buf: &[u8; ENO_MAX]| {
            if r.flags & flag != 0 {
                buf[..(len as usize).min(ENO_MAX)].to_vec()
            } else {
                Vec::new()
            }
        };
        EnoRecord {
            passive: r.role == ROLE_PASSIVE,
            syn_option: opt(F_SYN_ENO, r.syn_len, &r.syn_opt),
            synack_option: opt(F_SYNACK_ENO, r.synack_len, &r.synack_opt),
            ack_had_eno: r.flags & F_ACK_HAD_ENO != 0,
            fallback: EnoFallback::from_raw(r.fallback),
            tep: (r.tep != 0).then_some(r.tep),
            complete: r.state == ST_DONE || r.state == 2, /* A: sending 69,2 after the SYN-ACK */
            overridden: r.flags & F_OVERRIDE != 0,
        }
    }
}

fn raw_cfg(cfg: &EnoConfig) -> Result<RawCfg> {
    if cfg.teps.len() > MAX_CFG_TEPS {
        bail!("at most {MAX_CFG_TEPS} TEPs");
    }
    if let Some(t) = cfg.teps.iter().find(|&&t| !(0x20..=0x7f).contains(&t)) {
        bail!("TEP id {t:#04x} outside 0x20..=0x7f (give the 7-bit id, without the v bit)");
    }
    let mut raw = RawCfg { n_teps: cfg.teps.len() as u8, flags: 0, teps: [0; MAX_CFG_TEPS] };
    raw.teps[..cfg.teps.len()].copy_from_slice(&cfg.teps);
    Ok(raw)
}

/// The loaded and attached program. Dropping it detaches the program.
pub struct EnoBpf {
    sk_rec: MapData,
    cfg: Mutex<Array<MapData, RawCfg>>,
    sk_syn: Option<MapData>,
    resume: Mutex<HashMap<MapData, [u8; 1 + RESUME_HALF_LEN], [u8; RESUME_HALF_LEN]>>,
    // Owns the program and its link; must outlive nothing else, dropped last.
    _ebpf: Ebpf,
}

impl EnoBpf {
    /// Loads the embedded program, writes `cfg`, and attaches it to the cgroup v2 directory
    /// `cgroup_dir` (e.g. `/sys/fs/cgroup/unified/tcpcryptd`) with a `bpf_link`. Sockets
    /// created by processes in that cgroup (and connections accepted from their listeners)
    /// get TCP-ENO. Needs CAP_BPF + CAP_NET_ADMIN (root).
    pub fn attach(cgroup_dir: &Path, cfg: &EnoConfig) -> Result<EnoBpf> {
        let raw = raw_cfg(cfg)?;
        let mut ebpf = EbpfLoader::new()
            .allow_unsupported_maps() // eno_sk_syn is BPF_MAP_TYPE_SK_STORAGE
            .load(ENO_BPF_OBJECT)
            .context("loading the eno sock_ops object")?;
        let mut cfg_map: Array<MapData, RawCfg> =
            Array::try_from(ebpf.take_map("eno_cfg").ok_or_else(|| anyhow!("no eno_cfg map"))?)?;
        cfg_map.set(0, raw, 0).context("writing eno_cfg")?;
        let sk_rec = match ebpf.take_map("eno_sk_rec") {
            Some(Map::Unsupported(m)) => m,
            _ => bail!("no eno_sk_rec socket-storage map"),
        };
        let sk_syn = match ebpf.take_map("eno_sk_syn") {
            Some(Map::Unsupported(m)) => Some(m),
            _ => None,
        };

        let resume = HashMap::try_from(ebpf.take_map("eno_resume").ok_or_else(|| anyhow!("no eno_resume map"))?)?;

        let cgroup = File::open(cgroup_dir)
            .with_context(|| format!("opening cgroup directory {}", cgroup_dir.display()))?;
        let prog: &mut SockOps = ebpf
            .program_mut("eno_sockops")
            .ok_or_else(|| anyhow!("no eno_sockops program"))?
            .try_into()?;
        prog.load().context("loading eno_sockops (verifier)")?;
        prog.attach(&cgroup, CgroupAttachMode::Single)
            .with_context(|| format!("attaching eno_sockops to {}", cgroup_dir.display()))?;

        Ok(EnoBpf { sk_rec, cfg: Mutex::new(cfg_map), sk_syn, resume: Mutex::new(resume), _ebpf: ebpf })
    }

    /// Replaces the TEP configuration; affects connections opened from now on.
    pub fn set_config(&self, cfg: &EnoConfig) -> Result<()> {
        let raw = raw_cfg(cfg)?;
        self.cfg.lock().unwrap().set(0, raw, 0)?;
        Ok(())
    }

    /// What the program recorded for the connection of the TCP socket `sock` (one created in
    /// the cgroup, or accepted from a listener created there after [`EnoBpf::attach`]).
    /// `Ok(None)`: no record (not one of our sockets, IPv6, loopback, or deleted with
    /// [`EnoBpf::forget`]).
    ///
    /// Call it after `connect()` / `accept()` returned: by then the active side has parsed
    /// the SYN-ACK and the passive side has seen the first ACK (the kernel runs the
    /// ESTABLISHED callbacks before either returns).
    pub fn record(&self, sock: BorrowedFd<'_>) -> Result<Option<EnoRecord>> {
        let mut v = [0u8; RAW_REC_LEN];
        let key: i32 = sock.as_raw_fd();
        match bpf_map_elem(BPF_MAP_LOOKUP_ELEM, self.sk_rec.fd().as_fd(), &key, &mut v) {
            Ok(()) => Ok(Some(RawRec::from_bytes(&v).into())),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context("reading eno_sk_rec for the socket")),
        }
    }

    /// Deletes the record of a connection. Not needed for clean-up (the record is freed
    /// with its socket); tests use it to delete a record mid-handshake.
    pub fn forget(&self, sock: BorrowedFd<'_>) -> Result<()> {
        let key: i32 = sock.as_raw_fd();
        match bpf_map_elem(BPF_MAP_DELETE_ELEM, self.sk_rec.fd().as_fd(), &key, &mut []) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context("deleting eno_sk_rec for the socket")),
        }
    }

    /// RFC 8548 §3.5, passive side: from now on a SYN whose last suboption is a resumption
    /// suboption for `tep` naming `peer_half` gets a SYN-ACK that agrees to resume with
    /// `my_half` (and a zero-byte nonce_b), until [`EnoBpf::unaccept_resume`] or until a
    /// connection established with it (the program deletes the entry then: single use).
    /// At most 4,096 entries (the map's size).
    pub fn accept_resume(&self, tep: u8, peer_half: &[u8; RESUME_HALF_LEN], my_half: &[u8; RESUME_HALF_LEN]) -> Result<()> {
        let mut k = [0u8; 1 + RESUME_HALF_LEN];
        k[0] = tep & 0x7f;
        k[1..].copy_from_slice(peer_half);
        self.resume.lock().unwrap_or_else(|p| p.into_inner()).insert(k, *my_half, 0).context("updating eno_resume")
    }

    /// Stop accepting the resumption named by (`tep`, `peer_half`) (the ticket was used,
    /// replaced or expired). No error if it was not there.
    pub fn unaccept_resume(&self, tep: u8, peer_half: &[u8; RESUME_HALF_LEN]) {
        let mut k = [0u8; 1 + RESUME_HALF_LEN];
        k[0] = tep & 0x7f;
        k[1..].copy_from_slice(peer_half);
        let _ = self.resume.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
    }

    /// Overrides, for one not-yet-connected socket, the complete SYN-form ENO option of its
    /// SYN: `opt` is the whole option including kind (69) and length bytes, 2..=40 bytes
    /// (in practice at most 20 fit next to MSS/SACK/TS/WS, 16 next to MPTCP's MP_CAPABLE; if it
    /// does not fit, the SYN carries the configured TEPs instead - a fresh key exchange - and
    /// the record's `syn_option` says so; only if that does not fit either does the SYN go
    /// out without ENO, with [`EnoFallback::NoSpace`]). Use it for RFC 8548
    /// session resumption suboptions or to set b=1 for a simultaneous open. Call before
    /// `connect()`; the socket must have been created inside the cgroup.
    pub fn set_syn_option(&self, sock: BorrowedFd<'_>, opt: &[u8]) -> Result<()> {
        if opt.len() < 2 || opt.len() > ENO_MAX || opt[0] != ENO_KIND || opt[1] as usize != opt.len() {
            bail!("SYN option must be 69, len, contents with len == total length <= {ENO_MAX}");
        }
        let map = self.sk_syn.as_ref().ok_or_else(|| anyhow!("sk_storage map not available"))?;
        // struct eno_sk_syn { __u8 len; __u8 opt[ENO_MAX]; }
        let mut v = [0u8; 1 + ENO_MAX];
        v[0] = opt.len() as u8;
        v[1..1 + opt.len()].copy_from_slice(opt);
        let key: i32 = sock.as_raw_fd();
        bpf_map_elem(BPF_MAP_UPDATE_ELEM, map.fd().as_fd(), &key, &mut v).context("updating eno_sk_syn for the socket")
    }
}

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;

/// bpf(BPF_MAP_{LOOKUP,UPDATE,DELETE}_ELEM) on a socket-storage map (aya has no type for
/// them): the key is a socket fd, `value` the value's bytes (read for UPDATE, written by
/// LOOKUP, unused by DELETE) and must be exactly the map's value size for LOOKUP/UPDATE.
fn bpf_map_elem(cmd: libc::c_long, map_fd: BorrowedFd<'_>, key: &i32, value: &mut [u8]) -> std::io::Result<()> {
    #[repr(C)]
    struct Attr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let value_ptr = if cmd == BPF_MAP_DELETE_ELEM { 0 } else { value.as_mut_ptr() as u64 };
    let attr = Attr { map_fd: map_fd.as_raw_fd() as u32, _pad: 0, key: key as *const i32 as u64, value: value_ptr, flags: 0 };
    // SAFETY: `attr` is the BPF_MAP_*_ELEM layout of `union bpf_attr` (map_fd, key, value,
    // flags), valid for the duration of the call; `key` points to a live i32 (the socket fd)
    // and `value` to a live, exclusively borrowed buffer. The caller passes a buffer of the
    // map's value size (RAW_REC_LEN for eno_sk_rec, 1 + ENO_MAX for eno_sk_syn), so the
    // kernel writes (LOOKUP) or reads (UPDATE) only inside it; DELETE passes no value.
    // `map_fd` is a borrowed, open fd. The kernel touches no other memory of ours.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, &attr as *const Attr, std::mem::size_of::<Attr>() as u32)
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_decoding() {
        let mut r = RawRec {
            role: ROLE_PASSIVE,
            state: ST_DONE,
            flags: F_SYN_ENO | F_SYNACK_ENO | F_ACK_HAD_ENO,
            fallback: 0,
            syn_len: 4,
            synack_len: 4,
            tep: 0x22,
            pad: 0,
            syn_opt: [0; ENO_MAX],
            synack_opt: [0; ENO_MAX],
        };
        r.syn_opt[..4].copy_from_slice(&[69, 4, 0x21, 0x22]);
        r.synack_opt[..4].copy_from_slice(&[69, 4, 0x01, 0x22]);
        let e: EnoRecord = r.into();
        assert!(e.passive && e.encrypted() && e.complete);
        assert_eq!(e.transcript(), vec![69, 4, 0x21, 0x22, 69, 4, 0x01, 0x22]);
        r.fallback = 7;
        assert_eq!(EnoRecord::from(r).fallback, Some(EnoFallback::NoCommonTep));
    }

    #[test]
    fn config_validation() {
        assert!(raw_cfg(&EnoConfig { teps: vec![0x21, 0x24] }).is_ok());
        assert!(raw_cfg(&EnoConfig { teps: vec![0xa1] }).is_err());
        assert!(raw_cfg(&EnoConfig { teps: vec![0x10] }).is_err());
    }
}
