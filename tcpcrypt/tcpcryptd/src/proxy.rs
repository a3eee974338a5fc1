//! The proxy: outbound (local application -> network, we are the active opener, normally
//! host A) and inbound (network -> local service, we are the passive opener, host B). Each
//! connection either runs tcpcrypt (ENO negotiated a tcpcrypt TEP) or relays plain bytes
//! (ENO fell back). Once ENO succeeded there is no way back to plaintext: any error resets.
//!
//! Fail closed: plain relaying needs positive knowledge that the peer did not enable
//! encryption (the ENO record says ENO fell back, or ENO does not run on the connection by
//! design). A record that is missing or incomplete resets the connection, as does a fallback
//! where `--require-encryption` covers the destination.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::json;
use socket2::SockRef;
use tcpcrypt_proto::successors::{Changes, DEFAULT_AHEAD};
use tcpcrypt_proto::{resume, Acceptor, Config, Proposer, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;

use crate::device::{session_ops, tep_key, Pacer};
use crate::eno_source::{EnoLookup, EnoSource};
use crate::registry::{Conn, Registry};

/// Daemon settings.
#[derive(Clone)]
pub struct DaemonConfig {
    /// Protocol settings (TEPs, AEADs, frame size, rekeying).
    pub proto: Config,
    /// SO_MARK on the daemon's own outgoing sockets (0: none), so that the nat OUTPUT rule
    /// does not redirect them back to us.
    pub mark: u32,
    /// Cache session secrets and resume when the ENO source can.
    pub resumption: bool,
    /// How long a cached ticket may be used (`--resume-lifetime`).
    pub resume_lifetime: Duration,
    /// Relay buffer size.
    pub buf_size: usize,
    /// A device's time for the cryptography (`--device-profile`; crate::device): None, this
    /// machine's.
    pub device: Option<Arc<Pacer>>,
    /// Destinations that must be encrypted: a connection to them that would fall back to
    /// plain TCP is reset instead (`--require-encryption`).
    pub require: RequirePolicy,
    /// A tcpcrypt connection whose keys are not set this long after the TCP connection was
    /// established (no Init1/Init2 from the peer) is reset (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// Opt-in key log (`--key-log FILE`): never set by default.
    pub key_log: Option<Arc<Mutex<std::fs::File>>>,
    /// Test hook (`--test-drop-eno-record`): delete the ENO record of these connections right
    /// after connect()/accept(), as an eviction would.
    pub drop_eno_record: DropEnoRecord,
}

/// Default `--handshake-timeout`: 10 s (a few RTTs of the slowest wearable link plus a
/// device's key agreement are well under a second; the rest is slack for loss).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `--resume-lifetime`: 10 minutes. RFC 8548 sets none. Every resumed session's keys
/// descend from the last key exchange's ECDHE, and a cached ss[i] in either daemon's memory
/// decrypts the sessions resumed from it: the lifetime bounds how long one key exchange covers
/// and how long a stolen cache is worth. The connections that gain (a page load's fetches to
/// one origin, a wearable's sync burst) come seconds apart; 10 minutes keeps a periodic sync
/// (every few minutes) resuming, far under TLS's 7-day ticket cap (RFC 8446 §4.6.1).
pub const DEFAULT_RESUME_LIFETIME: Duration = Duration::from_secs(600);

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            proto: Config::default(),
            mark: 0,
            resumption: true,
            resume_lifetime: DEFAULT_RESUME_LIFETIME,
            buf_size: 64 * 1024,
            device: None,
            require: RequirePolicy::default(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            key_log: None,
            drop_eno_record: DropEnoRecord::default(),
        }
    }
}

/// Which connections' ENO records the test hook deletes.
#[derive(Clone, Copy, Debug, Default)]
pub struct DropEnoRecord {
    /// Outbound connections (we are host A).
    pub outbound: bool,
    /// Inbound connections (we are host B).
    pub inbound: bool,
}

/// `--require-encryption`: where a fallback to plain TCP is not acceptable.
#[derive(Clone, Debug, Default)]
pub struct RequirePolicy {
    rules: Vec<RequireRule>,
}

#[derive(Clone, Debug)]
enum RequireRule {
    All,
    /// Peer address prefix (None: any) and port (None: any).
    Dest { net: Option<(IpAddr, u8)>, port: Option<u16> },
}

impl RequirePolicy {
    /// Every connection must be encrypted.
    pub fn all() -> Self {
        RequirePolicy { rules: vec![RequireRule::All] }
    }
    /// Parse one rule: `all`, `PORT`, `IP`, `IP/PREFIX`, `IP:PORT` or `IP/PREFIX:PORT` (IPv6
    /// addresses in brackets with a port: `[::1]:80`).
    pub fn add(&mut self, spec: &str) -> anyhow::Result<()> {
        let spec = spec.trim();
        if spec.eq_ignore_ascii_case("all") || spec == "*" {
            self.rules.push(RequireRule::All);
            return Ok(());
        }
        if let Ok(p) = spec.parse::<u16>() {
            self.rules.push(RequireRule::Dest { net: None, port: Some(p) });
            return Ok(());
        }
        let (addr, port) = if let Some(rest) = spec.strip_prefix('[') {
            let (a, p) = rest.split_once(']').ok_or_else(|| anyhow!("bad --require-encryption {spec}"))?;
            (a.to_string(), p.strip_prefix(':').map(|p| p.parse::<u16>()).transpose()?)
        } else if spec.matches(':').count() == 1 {
            let (a, p) = spec.split_once(':').unwrap_or((spec, ""));
            (a.to_string(), Some(p.parse::<u16>().with_context(|| format!("bad port in --require-encryption {spec}"))?))
        } else {
            (spec.to_string(), None)
        };
        let (ip, prefix) = match addr.split_once('/') {
            Some((ip, pl)) => (ip.parse::<IpAddr>()?, pl.parse::<u8>()?),
            None => {
                let ip = addr.parse::<IpAddr>().with_context(|| format!("bad --require-encryption {spec}"))?;
                (ip, if ip.is_ipv4() { 32 } else { 128 })
            }
        };
        if prefix > if ip.is_ipv4() { 32 } else { 128 } {
            bail!("bad prefix length in --require-encryption {spec}");
        }
        self.rules.push(RequireRule::Dest { net: Some((ip, prefix)), port });
        Ok(())
    }
    /// Whether a connection with this peer address and service port (outbound: the
    /// destination port; inbound: the intercepted service port) must be encrypted.
    pub fn requires(&self, peer: IpAddr, port: u16) -> bool {
        self.rules.iter().any(|r| match r {
            RequireRule::All => true,
            RequireRule::Dest { net, port: p } => {
                p.is_none_or(|p| p == port) && net.is_none_or(|(ip, len)| in_prefix(peer, ip, len))
            }
        })
    }
    /// No rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

fn in_prefix(a: IpAddr, net: IpAddr, len: u8) -> bool {
    let a = match a {
        IpAddr::V6(v) => v.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v)),
        v => v,
    };
    match (a, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len as u32) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - len as u32) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Run `f` on the session and, with a device, owe the device's time for what it did (frames
/// sealed and opened, a key agreement that completed), paid before the session's lock is let go:
/// the writer cannot send what the device has not finished computing.
fn on_session<T>(device: &Option<Arc<Pacer>>, conn: &Conn, s: &mut Session, f: impl FnOnce(&mut Session) -> T) -> T {
    let Some(pacer) = device else { return f(s) };
    let (before, was_established, t0) = (s.stats(), s.is_established(), Instant::now());
    let r = f(s);
    let agreed = !was_established && s.is_established() && !s.resumed();
    let ops = session_ops(&before, &s.stats(), s.aead(), s.tep(), agreed);
    if !ops.is_empty() {
        // The key agreement's share is charged on its own, so the close record can say what
        // the key exchange cost the device apart from the frames sealed in the same call.
        let (kx, frames): (Vec<_>, Vec<_>) = ops.into_iter().partition(|(k, _, _)| agreed && !k.starts_with("cipher:"));
        let kx_ns = if kx.is_empty() { 0 } else { pacer.charge(t0, &kx) };
        let ns = kx_ns + if frames.is_empty() { 0 } else { pacer.charge(Instant::now(), &frames) };
        let mut st = conn.lock();
        *st.device_ns.get_or_insert(0) += ns;
        *st.kx_device_ns.get_or_insert(0) += kx_ns;
    }
    r
}

/// The daemon's shared state.
pub struct Daemon {
    /// Settings.
    pub cfg: DaemonConfig,
    /// ENO records.
    pub eno: Arc<dyn EnoSource>,
    /// Active opens: per peer IP, the lowest unused session secret of its chain (RFC 8548 §3.5).
    pub proposer: Mutex<Proposer>,
    /// Passive opens: per chain, the next secrets accepted ahead (published to the ENO source).
    pub acceptor: Arc<Mutex<Acceptor>>,
    /// Live connections and close records.
    pub registry: Arc<Registry>,
}

fn ip_key(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

/// How to find an accepted outbound connection's real destination.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// SO_ORIGINAL_DST (iptables REDIRECT).
    OriginalDst,
    /// A fixed address (tests, or a plain forwarder).
    Fixed(SocketAddr),
}

/// Abort: RST instead of FIN (SO_LINGER 0, then close).
fn reset(s: &TcpStream) {
    let _ = SockRef::from(s).set_linger(Some(Duration::ZERO));
}

fn original_dst(s: &TcpStream) -> anyhow::Result<SocketAddr> {
    let a = SockRef::from(s).original_dst().context("SO_ORIGINAL_DST")?;
    a.as_socket().ok_or_else(|| anyhow!("original destination is not an inet address"))
}

/// Close both connections with RST: SO_LINGER 0, and the write halves are forgotten so that
/// dropping them sends no FIN first (a peer must never mistake an abort for end of file).
fn abort(app_r: OwnedReadHalf, app_w: OwnedWriteHalf, net_r: OwnedReadHalf, net_w: OwnedWriteHalf) {
    let _ = SockRef::from(app_r.as_ref()).set_linger(Some(Duration::ZERO));
    let _ = SockRef::from(net_r.as_ref()).set_linger(Some(Duration::ZERO));
    app_w.forget();
    net_w.forget();
}

/// Abort before any byte was relayed: both connections reset, the reason recorded.
fn abort_early(conn: &Conn, app: &TcpStream, net: &TcpStream, reason: String) -> anyhow::Error {
    {
        let mut st = conn.lock();
        st.state = "aborted";
        st.reason = Some(reason.clone());
    }
    reset(app);
    reset(net);
    anyhow!(reason)
}

/// Whatever way a connection's run failed, its record ends "aborted" with the reason (a record
/// left "handshaking" would read as a connection still in progress).
fn settle(conn: &Conn, r: anyhow::Result<()>) -> anyhow::Result<()> {
    if let Err(e) = &r {
        let mut st = conn.lock();
        if st.state != "aborted" {
            st.state = "aborted";
            st.reason.get_or_insert_with(|| format!("{e:#}"));
        }
    }
    r
}

fn lock(s: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}


impl Daemon {
    /// A daemon.
    pub fn new(cfg: DaemonConfig, eno: Arc<dyn EnoSource>, registry: Arc<Registry>) -> Arc<Daemon> {
        let mut proposer = Proposer::new(4096);
        proposer.lifetime = Some(cfg.resume_lifetime);
        // eno-bpf's `eno_resume` map holds 4,096 entries: a chain publishes DEFAULT_AHEAD, and
        // up to as many more below a used one during their grace period.
        let mut acceptor = Acceptor::new(4096 / (2 * DEFAULT_AHEAD as usize));
        acceptor.lifetime = Some(cfg.resume_lifetime);
        Arc::new(Daemon { cfg, eno, proposer: Mutex::new(proposer), acceptor: Arc::new(Mutex::new(acceptor)), registry })
    }

    /// Tell the ENO source (eno-bpf's `eno_resume` map) which secrets it now accepts and
    /// which no longer. Called with the acceptor's lock held, so that the map follows the
    /// acceptor's changes in their order.
    fn publish(&self, ch: Changes) {
        for n in &ch.withdrawn {
            self.eno.unaccept_resume(n);
        }
        for n in &ch.published {
            self.eno.accept_resume(n);
        }
    }

    /// Drop expired chains and the secrets past their grace period, and tell the ENO source.
    pub fn purge_tickets(&self) {
        self.proposer.lock().unwrap_or_else(|p| p.into_inner()).purge_expired();
        let mut acc = self.acceptor.lock().unwrap_or_else(|p| p.into_inner());
        let ch = acc.purge_expired();
        self.publish(ch);
    }

    /// Cache a session's next secret (ss[i+1]) for `peer`: as the proposer of its chain when we
    /// opened the connection, as its acceptor when the peer did (RFC 8548 §3.5 lets a host keep
    /// a chain for one kind of open; then the two hosts never propose one ss[i] to each other).
    fn cache_ticket(&self, peer: &[u8], t: tcpcrypt_proto::ResumeTicket, outbound: bool) {
        self.purge_tickets();
        if outbound {
            self.proposer.lock().unwrap_or_else(|p| p.into_inner()).insert(peer, t);
        } else {
            let mut acc = self.acceptor.lock().unwrap_or_else(|p| p.into_inner());
            let ch = acc.insert(peer, t);
            self.publish(ch);
        }
    }

    /// Expire tickets once a second while `self` lives (started by the accept loops).
    fn spawn_purger(self: &Arc<Self>) {
        if !(self.cfg.resumption && self.eno.supports_resumption()) {
            return;
        }
        let w = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                match w.upgrade() {
                    Some(d) => d.purge_tickets(),
                    None => return,
                }
            }
        });
    }

    fn marked_socket(&self, dst: SocketAddr) -> anyhow::Result<TcpSocket> {
        let s = if dst.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        if self.cfg.mark != 0 {
            SockRef::from(&s).set_mark(self.cfg.mark).context("SO_MARK (needs CAP_NET_ADMIN)")?;
        }
        s.set_nodelay(true)?;
        Ok(s)
    }

    /// Accept loop for outbound connections (applications' connections redirected to us).
    pub async fn serve_outbound(self: Arc<Self>, listener: TcpListener, dest: Destination) {
        self.spawn_purger();
        loop {
            let Ok((app, peer)) = listener.accept().await else { continue };
            let d = self.clone();
            tokio::spawn(async move {
                let dst = match dest {
                    Destination::Fixed(a) => a,
                    Destination::OriginalDst => match original_dst(&app) {
                        Ok(a) => a,
                        Err(e) => {
                            eprintln!("tcpcryptd: outbound from {peer}: {e:#}");
                            return;
                        }
                    },
                };
                if let Err(e) = d.outbound(app, dst).await {
                    eprintln!("tcpcryptd: outbound {peer} -> {dst}: {e:#}");
                }
            });
        }
    }

    /// Accept loop for inbound connections (SYNs to a service port redirected to us).
    pub async fn serve_inbound(self: Arc<Self>, listener: TcpListener, service: Destination) {
        self.spawn_purger();
        loop {
            let Ok((net, peer)) = listener.accept().await else { continue };
            let d = self.clone();
            tokio::spawn(async move {
                let svc = match service {
                    Destination::Fixed(a) => a,
                    Destination::OriginalDst => match original_dst(&net) {
                        Ok(a) => a,
                        Err(e) => {
                            eprintln!("tcpcryptd: inbound from {peer}: {e:#}");
                            return;
                        }
                    },
                };
                if let Err(e) = d.inbound(net, svc).await {
                    eprintln!("tcpcryptd: inbound {peer} -> {svc}: {e:#}");
                }
            });
        }
    }

    /// One outbound connection: connect to `dst` with ENO, then tcpcrypt or plain relay.
    pub async fn outbound(self: Arc<Self>, app: TcpStream, dst: SocketAddr) -> anyhow::Result<()> {
        let app_peer = app.peer_addr()?;
        let sock = self.marked_socket(dst)?;
        sock.bind(if dst.is_ipv4() { "0.0.0.0:0".parse()? } else { "[::]:0".parse()? })?;
        let bound = sock.local_addr()?;
        let mut ticket = None;
        if self.cfg.resumption && self.eno.supports_resumption() {
            // The chain's lowest unused ss[i], counted as used whatever happens (refused, lost).
            ticket = self.proposer.lock().unwrap_or_else(|p| p.into_inner()).propose(&ip_key(dst.ip()));
        }
        let resume_sub = ticket.as_ref().map(|t| {
            let mut nonce = vec![0u8; self.cfg.proto.resume_nonce_len.min(8)];
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut nonce);
            t.suboption(&nonce)
        });
        let offered = self.eno.prepare_connect(sock.as_fd(), bound, dst, resume_sub.as_ref());
        if !offered {
            ticket = None;
        }
        let net = match sock.connect(dst).await {
            Ok(s) => s,
            Err(e) => {
                // Pass the refusal on as a reset.
                reset(&app);
                return Err(e).context("connect");
            }
        };
        net.set_nodelay(true)?;
        let local = net.local_addr()?;
        let conn = self.registry.add("out", local, dst, app_peer);
        conn.lock().app_local = app.local_addr().ok();
        if self.cfg.drop_eno_record.outbound {
            self.eno.forget(net.as_fd(), local, dst, false);
        }
        let rec = self.eno.record(net.as_fd(), local, dst, false);
        let port = dst.port();
        let r = settle(&conn, self.clone().run(&conn, app, net, rec, ticket, port).await);
        self.eno.done(local, dst, false);
        self.registry.close(&conn);
        r
    }

    /// One inbound connection: connect to the local service in plaintext, then tcpcrypt or
    /// plain relay.
    pub async fn inbound(self: Arc<Self>, net: TcpStream, service: SocketAddr) -> anyhow::Result<()> {
        net.set_nodelay(true)?;
        let (local, remote) = (net.local_addr()?, net.peer_addr()?);
        if self.cfg.drop_eno_record.inbound {
            self.eno.forget(net.as_fd(), local, remote, true);
        }
        let mut rec = self.eno.record(net.as_fd(), local, remote, true);
        let ticket = match rec.as_mut() {
            Ok(EnoLookup::Record(r)) => match r.resume_ticket.take() {
                Some(t) => Some(t),
                // The kernel's SYN-ACK agreed to resume (eno-bpf): the ticket it named.
                None => self.resumed_ticket(r),
            },
            _ => None,
        };
        let sock = self.marked_socket(service)?;
        let app = match sock.connect(service).await {
            Ok(s) => s,
            Err(e) => {
                reset(&net);
                self.eno.done(local, remote, true);
                return Err(e).context("connect to service");
            }
        };
        app.set_nodelay(true)?;
        let conn = self.registry.add("in", local, remote, service);
        conn.lock().app_local = app.local_addr().ok();
        // The intercepted service port (with REDIRECT `service` is the original destination).
        let port = service.port();
        let r = settle(&conn, self.clone().run(&conn, app, net, rec, ticket, port).await);
        self.eno.done(local, remote, true);
        self.registry.close(&conn);
        r
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        self: Arc<Self>,
        conn: &Conn,
        app: TcpStream,
        net: TcpStream,
        rec: anyhow::Result<EnoLookup>,
        ticket: Option<tcpcrypt_proto::ResumeTicket>,
        port: u16,
    ) -> anyhow::Result<()> {
        let required = self.cfg.require.requires(conn.remote.ip(), port);
        conn.lock().required = required;
        let rec = match rec {
            Ok(EnoLookup::Record(r)) => Some(r),
            Ok(EnoLookup::NotApplicable(why)) => {
                conn.lock().fallback = Some(why.clone());
                if required {
                    return Err(abort_early(conn, &app, &net, format!("encryption required, but {why}")));
                }
                None
            }
            // We cannot know whether the peer enabled encryption: never guess plaintext.
            Ok(EnoLookup::Missing(why)) => return Err(abort_early(conn, &app, &net, format!("fail closed: {why}"))),
            Err(e) => return Err(abort_early(conn, &app, &net, format!("fail closed: ENO record: {e:#}"))),
        };
        let plan = match &rec {
            None => Err(tcpcrypt_proto::Fallback::NoLocalOption),
            Some(r) => {
                conn.lock().eno = Some(json!({
                    "syn": tcpcrypt_proto::hex(&r.syn_option),
                    "synack": tcpcrypt_proto::hex(&r.synack_option),
                    "ack_had_eno": r.ack_had_eno,
                }));
                let tickets: Vec<&tcpcrypt_proto::ResumeTicket> = ticket.iter().collect();
                resume::negotiate(&r.syn_option, &r.synack_option, r.passive, r.ack_had_eno, &self.cfg.proto.teps, &tickets)
            }
        };
        let hint = rec.as_ref().and_then(|r| r.encrypted_hint);
        let plan = match (plan, hint, rec.as_ref().and_then(|r| r.fallback.clone())) {
            // The kernel side fell back (e.g. it decided before we could): plain TCP.
            (_, Some(false), Some(reason)) => Err(reason),
            (Ok(_), Some(false), None) => Err("ENO source did not enable encryption".to_string()),
            (Err(f), Some(true), _) => {
                // The peer has encryption enabled and we cannot run it: never downgrade.
                conn.lock().state = "aborted";
                conn.lock().reason = Some(format!("ENO enabled but tcpcrypt cannot run: {f}"));
                reset(&app);
                reset(&net);
                return Err(anyhow!("ENO enabled but tcpcrypt cannot run: {f}"));
            }
            (r, _, _) => r.map_err(|f| f.to_string()),
        };
        let plan = match plan {
            Ok(p) => p,
            Err(fallback) => {
                let fallback = conn.lock().fallback.clone().unwrap_or(fallback);
                if required {
                    // RFC 8547 §4.6 lets a host that requires encryption abort instead of
                    // falling back.
                    conn.lock().fallback = Some(fallback.clone());
                    return Err(abort_early(conn, &app, &net, format!("encryption required, but ENO fell back: {fallback}")));
                }
                {
                    let mut st = conn.lock();
                    st.state = "plain";
                    st.reason = Some(fallback.clone());
                    st.fallback = Some(fallback);
                    st.handshake_ms = None;
                }
                return relay_plain(conn, app, net, self.cfg.buf_size).await;
            }
        };
        let t0 = Instant::now();
        let fresh = matches!(plan.mode, tcpcrypt_proto::KeyMode::Fresh);
        let session = Session::new(&plan, self.cfg.proto.clone(), ticket, &mut rand_core::OsRng);
        if let (Some(pacer), true, Ok(_)) = (&self.cfg.device, fresh, &session) {
            // A fresh session begins with its ephemeral key pair.
            let ns = pacer.charge(t0, &[(format!("keygen:{}", tep_key(plan.tep)), 0, 1)]);
            let mut st = conn.lock();
            *st.device_ns.get_or_insert(0) += ns;
            *st.kx_device_ns.get_or_insert(0) += ns;
        }
        let session = match session {
            Ok(mut s) => {
                self.write_key_log(&mut s);
                s
            }
            Err(e) => {
                conn.lock().state = "aborted";
                conn.lock().reason = Some(e.to_string());
                reset(&app);
                reset(&net);
                return Err(anyhow!("tcpcrypt: {e}"));
            }
        };
        // The registry's address, not getpeername(): a peer that reset meanwhile must end in
        // "aborted" below, not in an early return that leaves the record "handshaking".
        let peer = ip_key(conn.remote.ip());
        let session = Arc::new(Mutex::new(session));
        conn.lock().session = Some(session.clone());
        let r = self.relay_encrypted(conn, app, net, session.clone(), &peer).await;
        let mut st = conn.lock();
        match &r {
            Ok(()) => st.state = "closed",
            Err(e) => {
                st.state = "aborted";
                st.reason = Some(format!("{e:#}"));
            }
        }
        r
    }

    /// Append the session's key-log lines to `--key-log` (nothing without it).
    fn write_key_log(&self, s: &mut Session) {
        let lines = s.take_key_log();
        if let (Some(f), false) = (&self.cfg.key_log, lines.is_empty()) {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            for l in &lines {
                let _ = writeln!(f, "{}", l.as_str());
            }
            let _ = f.flush();
        }
    }

    /// Passive side: the ticket named by a SYN-ACK that agreed to resume (RFC 8548 §3.5: the
    /// SYN's resumption suboption for the SYN-ACK's TEP carries the peer's identifier half).
    /// Taken out of the cache (single use); None if we do not hold it (the connection then
    /// fails closed: the peer resumes, we cannot).
    fn resumed_ticket(&self, r: &crate::eno_source::EnoRecord) -> Option<tcpcrypt_proto::ResumeTicket> {
        use tcpcrypt_proto::eno::SynOption;
        let b = SynOption::parse(&r.synack_option).ok()?;
        let bsub = b.teps().find(|s| resume::resume_fields(s).ok().flatten().is_some())?;
        let tep = tcpcrypt_proto::Tep::from_id(bsub.tep)?;
        let a = SynOption::parse(&r.syn_option).ok()?;
        let (half, _) = a.teps().filter(|s| s.tep == bsub.tep).find_map(|s| resume::resume_fields(s).ok().flatten())?;
        let mut acc = self.acceptor.lock().unwrap_or_else(|p| p.into_inner());
        let (t, ch) = acc.take(&half, tep);
        self.publish(ch);
        t
    }

    fn established(&self, conn: &Conn, s: &mut Session, peer: &[u8]) {
        self.write_key_log(s);
        {
            let mut st = conn.lock();
            if st.state == "handshaking" && s.is_established() {
                st.state = "established";
                st.handshake_ms = Some(conn.started.elapsed().as_secs_f64() * 1e3);
            }
        }
        // The next session's secret is cached only where it can be used (an ENO source that
        // puts resumption in SYNs) and only once the peer's first frame authenticated: a
        // peer that merely completed Init1/Init2 has proven nothing about holding the keys.
        if self.cfg.resumption && self.eno.supports_resumption() && s.is_established() && s.stats().frames_received > 0 {
            if let Some(t) = s.take_ticket() {
                self.cache_ticket(peer, t, conn.direction == "out");
            }
        }
    }

    async fn relay_encrypted(
        &self,
        conn: &Conn,
        app: TcpStream,
        net: TcpStream,
        session: Arc<Mutex<Session>>,
        peer: &[u8],
    ) -> anyhow::Result<()> {
        let (mut app_r, mut app_w) = app.into_split();
        let (mut net_r, mut net_w) = net.into_split();
        // One writer drains the session's single outgoing buffer, so frames leave in the
        // order (and at the stream offsets) they were sealed, whichever path sealed them.
        let wake = Notify::new();
        let drained = Notify::new();
        self.established(conn, &mut lock(&session), peer);
        let buf_size = self.cfg.buf_size;
        let high_water = 4 * buf_size;
        let device = &self.cfg.device;
        let (wake, drained) = (&wake, &drained);
        let session_w = session.clone();
        let net_w_ref = &mut net_w;
        let writer = async move {
            let net_w = net_w_ref;
            loop {
                let (out, fin) = {
                    let mut s = lock(&session_w);
                    (s.take_outgoing(), s.fin_sent())
                };
                if !out.is_empty() {
                    net_w.write_all(&out).await.context("write to peer")?;
                    drained.notify_one();
                    continue;
                }
                if fin {
                    net_w.shutdown().await.context("shutdown to peer")?;
                    return anyhow::Ok(());
                }
                wake.notified().await;
            }
        };
        let hs_session = session.clone();
        let up_session = session.clone();
        let app_r_ref = &mut app_r;
        let upload = async move {
            let app_r = app_r_ref;
            let mut buf = vec![0u8; buf_size];
            loop {
                let n = app_r.read(&mut buf).await.context("read from application")?;
                {
                    let mut s = lock(&up_session);
                    on_session(device, conn, &mut s, |s| if n == 0 { s.send_fin() } else { s.send(&buf[..n]) })?;
                }
                wake.notify_one();
                if n == 0 {
                    return anyhow::Ok(());
                }
                // Back-pressure counts what waits for the key exchange too: a peer that never
                // sends Init1/Init2 makes us hold at most high_water + one read (buf_size).
                while {
                    let s = lock(&up_session);
                    s.outgoing_len() + s.pending_len() > high_water
                } {
                    drained.notified().await;
                }
            }
        };
        let (net_r_ref, app_w_ref) = (&mut net_r, &mut app_w);
        let download = async move {
            let (net_r, app_w) = (net_r_ref, app_w_ref);
            let mut buf = vec![0u8; buf_size];
            let mut plain = Vec::with_capacity(buf_size);
            loop {
                let n = net_r.read(&mut buf).await.context("read from peer")?;
                let (has_out, peer_fin) = {
                    let mut s = lock(&session);
                    on_session(device, conn, &mut s, |s| if n == 0 { s.receive_eof() } else { s.receive(&buf[..n]) })
                        .map_err(|e| anyhow!("tcpcrypt: {e}"))?;
                    self.established(conn, &mut s, peer);
                    s.read_plaintext(&mut plain);
                    (s.has_outgoing(), s.peer_fin())
                };
                if has_out {
                    // A rekey answer, or data/FIN queued before keys were set.
                    wake.notify_one();
                }
                if !plain.is_empty() {
                    app_w.write_all(&plain).await.context("write to application")?;
                    plain.clear();
                }
                if n == 0 {
                    app_w.shutdown().await.context("shutdown to application")?;
                    return anyhow::Ok(());
                }
                let _ = peer_fin;
            }
        };
        // Run all three; the first error aborts everything with RSTs.
        let mut upload = Box::pin(upload);
        let mut download = Box::pin(download);
        let mut writer = Box::pin(writer);
        let (mut up_done, mut down_done, mut w_done) = (false, false, false);
        // Handshake timeout, counted from the TCP connection's start.
        let timeout = self.cfg.handshake_timeout;
        let hs_deadline = tokio::time::Instant::from_std(conn.started) + timeout;
        let hs_timer = tokio::time::sleep_until(hs_deadline);
        tokio::pin!(hs_timer);
        let mut hs_armed = !lock(&hs_session).is_established();
        let res: anyhow::Result<()> = loop {
            tokio::select! {
                _ = &mut hs_timer, if hs_armed => {
                    if lock(&hs_session).is_established() {
                        hs_armed = false;
                    } else {
                        break Err(anyhow!("handshake timeout: keys not set {timeout:?} after the TCP connection opened"));
                    }
                }
                r = &mut upload, if !up_done => match r { Ok(()) => up_done = true, Err(e) => break Err(e) },
                r = &mut download, if !down_done => match r { Ok(()) => down_done = true, Err(e) => break Err(e) },
                r = &mut writer, if !w_done => match r { Ok(()) => w_done = true, Err(e) => break Err(e) },
            }
            if up_done && down_done && w_done {
                break Ok(());
            }
        };
        drop(upload);
        drop(download);
        drop(writer);
        if res.is_err() {
            abort(app_r, app_w, net_r, net_w);
        }
        res
    }
}

/// Plain relay with half-close both ways and reset propagation.
async fn relay_plain(conn: &Conn, app: TcpStream, net: TcpStream, buf_size: usize) -> anyhow::Result<()> {
    let (mut app_r, mut app_w) = app.into_split();
    let (mut net_r, mut net_w) = net.into_split();
    async fn pipe(
        r: &mut OwnedReadHalf,
        w: &mut OwnedWriteHalf,
        buf_size: usize,
        count: impl Fn(u64),
    ) -> std::io::Result<()> {
        let mut buf = vec![0u8; buf_size];
        loop {
            let n = r.read(&mut buf).await?;
            if n == 0 {
                return w.shutdown().await;
            }
            w.write_all(&buf[..n]).await?;
            count(n as u64);
        }
    }
    conn.lock().relayed_plain = true;
    let up = pipe(&mut app_r, &mut net_w, buf_size, |n| conn.lock().plain_up += n);
    let down = pipe(&mut net_r, &mut app_w, buf_size, |n| conn.lock().plain_down += n);
    let r = tokio::try_join!(up, down);
    if let Err(e) = r {
        abort(app_r, app_w, net_r, net_w);
        conn.lock().reason = Some(format!("reset: {e}"));
        conn.lock().state = "aborted";
        return Err(e.into());
    }
    conn.lock().state = "closed";
    Ok(())
}

/// For `Instant`-based handshake timing in tests.
pub fn elapsed_ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
