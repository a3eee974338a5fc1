//! The table of live connections (for `tcpcryptd status`) and the JSON-lines record written
//! when a connection closes.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tcpcrypt_proto::{hex, Session};

/// Mutable part of a connection's entry.
#[derive(Default)]
pub struct ConnState {
    /// handshaking | established | plain | closing | closed | aborted
    pub state: &'static str,
    /// Why ENO fell back, or why the connection was aborted.
    pub reason: Option<String>,
    /// The tcpcrypt session, once there is one.
    pub session: Option<Arc<Mutex<Session>>>,
    /// Plain relay byte counters (up = app->net, down = net->app).
    pub plain_up: u64,
    /// See `plain_up`.
    pub plain_down: u64,
    /// TCP connect (outbound) / accept (inbound) to keys ready.
    pub handshake_ms: Option<f64>,
    /// Whether the options carried ENO, for the record.
    pub eno: Option<Value>,
    /// With a device profile: the device's time for this connection's cryptography (ns).
    pub device_ns: Option<u64>,
    /// ... of which its key exchange (the ephemeral key pair, the agreement and the key
    /// schedule of a fresh session; 0 for a resumed one, RFC 8548 3.5: no public-key operation).
    pub kx_device_ns: Option<u64>,
    /// Why the connection did not (or would not) run tcpcrypt: ENO's fallback reason.
    pub fallback: Option<String>,
    /// `--require-encryption` covers the connection.
    pub required: bool,
    /// Plain bytes were relayed (a fallback that went ahead).
    pub relayed_plain: bool,
    /// The daemon's own end of the plaintext (application/service) connection.
    pub app_local: Option<SocketAddr>,
}

/// One proxied connection.
pub struct Conn {
    /// Daemon-unique id.
    pub id: u64,
    /// "out" (from a local application) or "in" (from the network).
    pub direction: &'static str,
    /// Our end of the encrypted (network) connection.
    pub local: SocketAddr,
    /// The peer of the network connection.
    pub remote: SocketAddr,
    /// The plaintext side's peer (application, or local service).
    pub app: SocketAddr,
    /// When the connection started.
    pub started: Instant,
    /// Wall-clock start.
    pub started_unix: f64,
    /// Mutable fields.
    pub st: Mutex<ConnState>,
}

impl Conn {
    /// Lock the mutable state.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ConnState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// JSON summary (status output and the close record).
    pub fn to_json(&self) -> Value {
        let st = self.lock();
        let mut v = json!({
            "id": self.id,
            "direction": self.direction,
            "local": self.local.to_string(),
            "remote": self.remote.to_string(),
            "app": self.app.to_string(),
            "state": st.state,
            "reason": st.reason,
            "started_unix": self.started_unix,
            "duration_ms": self.started.elapsed().as_secs_f64() * 1e3,
            "handshake_ms": st.handshake_ms,
            "eno": st.eno,
            "fallback": st.fallback,
            "require_encryption": st.required,
            "app_local": st.app_local.map(|a| a.to_string()),
        });
        if let Some(ns) = st.device_ns {
            v["device_ms"] = json!(ns as f64 / 1e6);
            v["kx_device_ms"] = json!(st.kx_device_ns.unwrap_or(0) as f64 / 1e6);
        }
        if let Some(s) = &st.session {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            let x = s.stats();
            let (lg, rg) = s.generations();
            v["mode"] = json!("tcpcrypt");
            v["role"] = json!(s.role().to_string());
            v["tep"] = json!(s.tep().name());
            v["tep_id"] = json!(s.tep().id());
            v["cipher"] = json!(s.aead().map(|a| a.name()));
            v["session_id"] = json!(s.session_id().map(hex));
            v["resumed"] = json!(s.resumed());
            v["generations"] = json!([lg, rg]);
            v["pending_bytes"] = json!(s.pending_len());
            v["counters"] = json!({
                "plaintext_sent": x.plaintext_sent,
                "plaintext_received": x.plaintext_received,
                "ciphertext_sent": x.wire_bytes_sent,
                "ciphertext_received": x.wire_bytes_received,
                "handshake_bytes_sent": x.handshake_bytes_sent,
                "handshake_bytes_received": x.handshake_bytes_received,
                "frames_sent": x.frames_sent,
                "frames_received": x.frames_received,
                "rekeys_sent": x.rekeys_sent,
                "rekeys_received": x.rekeys_received,
            });
        } else {
            // "none": reset before any byte was relayed (fail closed, or encryption required).
            v["mode"] = json!(if st.relayed_plain { "plain" } else { "none" });
            v["counters"] = json!({"plaintext_sent": st.plain_up, "plaintext_received": st.plain_down});
        }
        v
    }
}

/// Close records kept for `session` queries.
const RECENT: usize = 1024;

/// All live connections and the close-record file.
pub struct Registry {
    next: AtomicU64,
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    /// The last RECENT close records, for `session` queries after a connection closed.
    recent: Mutex<std::collections::VecDeque<Value>>,
    stats_file: Option<Mutex<std::fs::File>>,
    /// Path of the stats file.
    pub stats_path: Option<PathBuf>,
}

impl Registry {
    /// A registry appending close records to `stats_file` (JSON lines) if given.
    pub fn new(stats_file: Option<PathBuf>) -> anyhow::Result<Registry> {
        let f = match &stats_file {
            Some(p) => Some(Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(p)?)),
            None => None,
        };
        Ok(Registry {
            next: AtomicU64::new(1),
            conns: Mutex::new(BTreeMap::new()),
            recent: Mutex::new(std::collections::VecDeque::new()),
            stats_file: f,
            stats_path: stats_file,
        })
    }

    /// Add a connection.
    pub fn add(&self, direction: &'static str, local: SocketAddr, remote: SocketAddr, app: SocketAddr) -> Arc<Conn> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let c = Arc::new(Conn {
            id,
            direction,
            local,
            remote,
            app,
            started: Instant::now(),
            started_unix,
            st: Mutex::new(ConnState { state: "handshaking", ..Default::default() }),
        });
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).insert(id, c.clone());
        c
    }

    /// Remove a connection and write its close record.
    pub fn close(&self, c: &Conn) {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).remove(&c.id);
        let v = c.to_json();
        {
            let mut r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if r.len() >= RECENT {
                r.pop_front();
            }
            r.push_back(v.clone());
        }
        if let Some(f) = &self.stats_file {
            let mut line = v.to_string();
            line.push('\n');
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            let _ = f.write_all(line.as_bytes());
            let _ = f.flush();
        }
    }

    /// The connections (live, then recently closed, newest first) one of whose addresses is
    /// `addr`: an application finds its connection by its own socket's address (a client:
    /// its local address = our `app`; a service: its peer address = our `app_local`) or by
    /// the network connection's addresses (`local`, `remote`).
    pub fn find(&self, addr: &str) -> Vec<Value> {
        let hit = |v: &Value| ["app", "app_local", "local", "remote"].iter().any(|k| v.get(*k).and_then(|x| x.as_str()) == Some(addr));
        let mut out: Vec<Value> = self.snapshot().into_iter().filter(|v| hit(v)).collect();
        let r = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(r.iter().rev().filter(|v| hit(v)).cloned());
        out
    }

    /// Snapshot of live connections.
    pub fn snapshot(&self) -> Vec<Value> {
        let conns: Vec<Arc<Conn>> = self.conns.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        conns.iter().map(|c| c.to_json()).collect()
    }
}
