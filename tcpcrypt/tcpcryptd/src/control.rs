//! The control socket: a Unix stream socket; a client sends one line and reads one JSON
//! document back:
//!
//! * `sessions` (or `status`, or an empty line): `{"daemon": {...}, "connections": [...]}`,
//!   every live connection.
//! * `session ADDR`: `{"connections": [...]}`, the live or recently closed (last 1024)
//!   connections one of whose addresses is ADDR (`IP:PORT`): an application passes its own
//!   socket's local address (a client) or peer address (a service) and learns the session ID
//!   (RFC 8547 §5.1: the session ID MUST be available to the application), `mode`, `state`
//!   and, for a fallback, its `reason`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::registry::Registry;

/// Serve status queries until the task is dropped.
pub async fn serve(path: PathBuf, registry: Arc<Registry>, info: Value) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(&path);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    let listener = UnixListener::bind(&path).with_context(|| format!("bind {}", path.display()))?;
    loop {
        let (stream, _) = listener.accept().await?;
        let registry = registry.clone();
        let info = info.clone();
        tokio::spawn(async move {
            let (r, mut w) = stream.into_split();
            let mut line = String::new();
            let _ = BufReader::new(r).read_line(&mut line).await;
            let reply = match line.trim().split_once(' ') {
                Some(("session", addr)) => json!({"connections": registry.find(addr.trim())}),
                _ => match line.trim() {
                    "sessions" | "status" | "" => json!({"daemon": info, "connections": registry.snapshot()}),
                    other => json!({"error": format!("unknown request {other:?}")}),
                },
            };
            let _ = w.write_all(format!("{reply}\n").as_bytes()).await;
            let _ = w.shutdown().await;
        });
    }
}

/// Ask a running daemon for every live connection.
pub async fn query(path: &Path) -> anyhow::Result<Value> {
    request(path, "sessions").await
}

/// Send one request line to a running daemon.
pub async fn request(path: &Path, line: &str) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(path).await.with_context(|| format!("connect {} (is tcpcryptd running?)", path.display()))?;
    s.write_all(format!("{line}\n").as_bytes()).await?;
    let mut buf = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut buf).await?;
    Ok(serde_json::from_str(&buf)?)
}

/// The `status` table.
pub fn format_table(v: &Value) -> String {
    let mut out = String::new();
    if let Some(d) = v.get("daemon") {
        out.push_str(&format!("tcpcryptd {d}\n"));
    }
    out.push_str(&format!(
        "{:<5} {:<4} {:<22} {:<22} {:<12} {:<27} {:<24} {:>10} {:>10}  {}\n",
        "ID", "DIR", "LOCAL", "REMOTE", "STATE", "TEP", "CIPHER", "SENT", "RECV", "SESSION-ID"
    ));
    for c in v.get("connections").and_then(|c| c.as_array()).into_iter().flatten() {
        let g = |k: &str| c.get(k).and_then(|x| x.as_str()).unwrap_or("-").to_string();
        let n = |k: &str| c.get("counters").and_then(|x| x.get(k)).and_then(|x| x.as_u64()).unwrap_or(0);
        out.push_str(&format!(
            "{:<5} {:<4} {:<22} {:<22} {:<12} {:<27} {:<24} {:>10} {:>10}  {}\n",
            c.get("id").and_then(|x| x.as_u64()).unwrap_or(0),
            g("direction"),
            g("local"),
            g("remote"),
            g("state"),
            g("tep"),
            g("cipher"),
            n("plaintext_sent"),
            n("plaintext_received"),
            g("session_id"),
        ));
    }
    out
}
