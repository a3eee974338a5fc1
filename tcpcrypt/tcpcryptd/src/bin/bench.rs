//! tcpcrypt-bench: encrypted goodput over loopback through two in-process daemons (fake ENO
//! source), against the same transfer through the plain relay, plus framing overhead and
//! handshake sizes. Everything (application, both daemons, sink) runs in this process, so
//! "per CPU-second" charges the application, the sink, encryption AND decryption to the
//! daemon: a conservative number for one daemon's per-core capacity.
//!
//! usage: tcpcrypt-bench [--mb N] [--frame-size N] [--cipher aes128gcm|aes256gcm|chacha20poly1305] [--json]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tcpcrypt_proto::{Aead, Tep};
use tcpcryptd::{Daemon, DaemonConfig, Destination, FakeEnoNet, ListenerPolicy, Registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn cpu_seconds() -> f64 {
    // utime + stime of the whole process from /proc (clock ticks, USER_HZ = 100).
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

async fn sink() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let mut n = 0u64;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                let _ = s.write_all(&n.to_be_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    a
}

struct Run {
    secs: f64,
    cpu: f64,
    client: serde_json::Value,
}

async fn run(mb: usize, cfg: DaemonConfig, teps: Option<Vec<Tep>>) -> Run {
    let svc = sink().await;
    let net = FakeEnoNet::new();
    let dir = std::env::temp_dir().join(format!("tcpcrypt-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stats = dir.join("client.jsonl");
    let _ = std::fs::remove_file(&stats);
    let server = Daemon::new(cfg.clone(), Arc::new(net.host(teps.clone())), Arc::new(Registry::new(None).unwrap()));
    let in_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    net.listen(in_l.local_addr().unwrap(), ListenerPolicy { teps: teps.clone(), cache: None });
    let in_addr = in_l.local_addr().unwrap();
    tokio::spawn(server.serve_inbound(in_l, Destination::Fixed(svc)));
    let client = Daemon::new(cfg, Arc::new(net.host(teps)), Arc::new(Registry::new(Some(stats.clone())).unwrap()));
    let out_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app_to = out_l.local_addr().unwrap();
    tokio::spawn(client.serve_outbound(out_l, Destination::Fixed(in_addr)));

    let chunk = vec![0xa5u8; 256 * 1024];
    let total = (mb as u64) << 20;
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let mut s = TcpStream::connect(app_to).await.unwrap();
    let mut sent = 0u64;
    while sent < total {
        s.write_all(&chunk).await.unwrap();
        sent += chunk.len() as u64;
    }
    s.shutdown().await.unwrap();
    let mut n = [0u8; 8];
    s.read_exact(&mut n).await.unwrap();
    assert_eq!(u64::from_be_bytes(n), total, "sink got a different byte count");
    let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    drop(s);
    let mut client = serde_json::Value::Null;
    for _ in 0..200 {
        if let Some(l) = std::fs::read_to_string(&stats).ok().and_then(|s| s.lines().next().map(String::from)) {
            client = serde_json::from_str(&l).unwrap();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Run { secs, cpu, client }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let mb: usize = get("--mb").and_then(|v| v.parse().ok()).unwrap_or(1024);
    let frame: usize = get("--frame-size").and_then(|v| v.parse().ok()).unwrap_or(16384);
    let aead = match get("--cipher").as_deref() {
        Some("aes256gcm") => Aead::Aes256Gcm,
        Some("chacha20poly1305") => Aead::ChaCha20Poly1305,
        _ => Aead::Aes128Gcm,
    };
    let json_out = args.iter().any(|a| a == "--json");
    let mut cfg = DaemonConfig::default();
    cfg.proto.aeads = vec![aead];
    cfg.proto.max_frame_data = frame;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (enc, plain) = rt.block_on(async {
        let enc = run(mb, cfg.clone(), Some(Tep::ALL.to_vec())).await;
        let plain = run(mb, cfg, None).await;
        (enc, plain)
    });
    let bits = (mb as f64) * 8.0 * 1048576.0;
    let c = &enc.client["counters"];
    let ct = c["ciphertext_sent"].as_f64().unwrap_or(0.0) - c["handshake_bytes_sent"].as_f64().unwrap_or(0.0);
    let pt = c["plaintext_sent"].as_f64().unwrap_or(1.0);
    let report = serde_json::json!({
        "mb": mb, "frame_size": frame, "cipher": aead.name(), "tep": enc.client["tep"],
        "encrypted": {"goodput_gbit_s": bits / enc.secs / 1e9, "cpu_seconds": enc.cpu,
                      "goodput_gbit_per_cpu_second": bits / enc.cpu.max(1e-9) / 1e9},
        "plain_relay": {"goodput_gbit_s": bits / plain.secs / 1e9, "cpu_seconds": plain.cpu,
                        "goodput_gbit_per_cpu_second": bits / plain.cpu.max(1e-9) / 1e9},
        "framing_overhead_percent": (ct - pt) / pt * 100.0,
        "frames_sent": c["frames_sent"],
        "handshake_bytes": {"init1": c["handshake_bytes_sent"], "init2": c["handshake_bytes_received"]},
        "handshake_ms": enc.client["handshake_ms"],
    });
    if json_out {
        println!("{report}");
    } else {
        println!("tcpcrypt-bench: {mb} MiB, {} , frames of {frame} bytes", aead.name());
        println!("  encrypted : {:6.2} Gbit/s wall, {:5.2} CPU-s, {:6.2} Gbit per CPU-second (both daemons + app + sink)",
            bits / enc.secs / 1e9, enc.cpu, bits / enc.cpu.max(1e-9) / 1e9);
        println!("  plain     : {:6.2} Gbit/s wall, {:5.2} CPU-s, {:6.2} Gbit per CPU-second",
            bits / plain.secs / 1e9, plain.cpu, bits / plain.cpu.max(1e-9) / 1e9);
        println!("  framing overhead {:.3} % ({} frames); Init1 {} bytes, Init2 {} bytes; handshake {:.2} ms",
            (ct - pt) / pt * 100.0, c["frames_sent"], c["handshake_bytes_sent"], c["handshake_bytes_received"],
            enc.client["handshake_ms"].as_f64().unwrap_or(0.0));
    }
}
