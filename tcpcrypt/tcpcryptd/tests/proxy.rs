//! The daemon over loopback: a client-side daemon (outbound) and a server-side daemon
//! (inbound) with the in-process fake ENO source, between a test application and a test
//! service.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tcpcrypt_proto::Tep;
use tcpcryptd::{Daemon, DaemonConfig, Destination, FakeEnoNet, ListenerPolicy, Registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

struct Setup {
    app_to: SocketAddr,
    client: Arc<Daemon>,
    server: Arc<Daemon>,
    client_stats: PathBuf,
    server_stats: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> TempDir {
    let p = std::env::temp_dir().join(format!("tcpcryptd-test-{}-{}", std::process::id(), rand_u64()));
    std::fs::create_dir_all(&p).unwrap();
    TempDir(p)
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
    u64::from_le_bytes(b)
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

/// `mitm`: put a byte-flipping relay between the two daemons (flip the client->server byte
/// at this stream offset).
async fn setup(client_teps: Option<Vec<Tep>>, server_teps: Option<Vec<Tep>>, cfg: DaemonConfig, service: SocketAddr, mitm: Option<usize>) -> Setup {
    let dir = tempdir();
    let net = FakeEnoNet::new();
    let (client_stats, server_stats) = (dir.0.join("client.jsonl"), dir.0.join("server.jsonl"));
    let server = Daemon::new(cfg.clone(), Arc::new(net.host(server_teps.clone())), Arc::new(Registry::new(Some(server_stats.clone())).unwrap()));
    let in_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let in_addr = in_l.local_addr().unwrap();
    let policy = ListenerPolicy { teps: server_teps, cache: Some(server.cache.clone()) };
    net.listen(in_addr, policy.clone());
    tokio::spawn(server.clone().serve_inbound(in_l, Destination::Fixed(service)));
    let mut target = in_addr;
    if let Some(flip_at) = mitm {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mitm_addr = l.local_addr().unwrap();
        net.listen(mitm_addr, policy);
        tokio::spawn(mitm_relay(l, in_addr, flip_at, net.clone()));
        target = mitm_addr;
    }
    let client = Daemon::new(cfg, Arc::new(net.host(client_teps)), Arc::new(Registry::new(Some(client_stats.clone())).unwrap()));
    let out_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app_to = out_l.local_addr().unwrap();
    tokio::spawn(client.clone().serve_outbound(out_l, Destination::Fixed(target)));
    Setup { app_to, client, server, client_stats, server_stats, _dir: dir }
}

/// A relay that flips one bit of the client->server stream at `flip_at`, passing resets on.
async fn mitm_relay(l: TcpListener, to: SocketAddr, flip_at: usize, net: FakeEnoNet) {
    loop {
        let (a, peer) = l.accept().await.unwrap();
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let out_port = sock.local_addr().unwrap().port();
        net.relay(peer.port(), l.local_addr().unwrap(), out_port, to);
        let b = sock.connect(to).await.unwrap();
        tokio::spawn(async move {
            let (mut ar, mut aw) = a.into_split();
            let (mut br, mut bw) = b.into_split();
            let up = async {
                let mut off = 0usize;
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = ar.read(&mut buf).await?;
                    if n == 0 {
                        return bw.shutdown().await;
                    }
                    if (off..off + n).contains(&flip_at) {
                        buf[flip_at - off] ^= 0x40;
                    }
                    off += n;
                    bw.write_all(&buf[..n]).await?;
                }
            };
            let down = async {
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = br.read(&mut buf).await?;
                    if n == 0 {
                        return aw.shutdown().await;
                    }
                    aw.write_all(&buf[..n]).await?;
                }
            };
            if tokio::try_join!(up, down).is_err() {
                let _ = socket2::SockRef::from(ar.as_ref()).set_linger(Some(Duration::ZERO));
                let _ = socket2::SockRef::from(br.as_ref()).set_linger(Some(Duration::ZERO));
                aw.forget();
                bw.forget();
            }
        });
    }
}

/// Echo service: echoes until EOF, then half-closes.
async fn echo_service() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    a
}

/// Service that records what it got and how the stream ended (true = clean EOF).
async fn recording_service(greeting: Option<Vec<u8>>) -> (SocketAddr, tokio::sync::mpsc::Receiver<(Vec<u8>, bool)>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let tx = tx.clone();
            let greeting = greeting.clone();
            tokio::spawn(async move {
                // Send the greeting and half-close first (if any), then read until EOF.
                if let Some(g) = greeting {
                    s.write_all(&g).await.ok();
                    s.shutdown().await.ok();
                }
                let mut got = Vec::new();
                let clean = s.read_to_end(&mut got).await.is_ok();
                let _ = tx.send((got, clean)).await;
            });
        }
    });
    (a, rx)
}

async fn exchange(to: SocketAddr, payload: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let s = TcpStream::connect(to).await?;
    let (mut r, mut w) = s.into_split();
    let writer: JoinHandle<std::io::Result<()>> = tokio::spawn(async move {
        w.write_all(&payload).await?;
        w.shutdown().await
    });
    let mut got = Vec::new();
    r.read_to_end(&mut got).await?;
    writer.await.unwrap()?;
    Ok(got)
}

async fn records(path: &PathBuf, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let v: Vec<Value> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if v.len() >= n {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no {n} records in {}", path.display());
}

fn all() -> Option<Vec<Tep>> {
    Some(Tep::ALL.to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_and_megabytes_both_ways_byte_exact() {
    let svc = echo_service().await;
    let s = setup(all(), all(), DaemonConfig::default(), svc, None).await;
    let payload = data(8 << 20, 3);
    let got = exchange(s.app_to, payload.clone()).await.unwrap();
    assert!(got == payload, "echo differs ({} vs {} bytes)", got.len(), payload.len());
    let c = &records(&s.client_stats, 1).await[0];
    let v = &records(&s.server_stats, 1).await[0];
    assert_eq!(c["mode"], "tcpcrypt");
    assert_eq!(c["state"], "closed");
    assert_eq!(c["role"], "A");
    assert_eq!(v["role"], "B");
    assert_eq!(c["tep"], "TCPCRYPT_ECDHE_Curve25519");
    assert_eq!(c["cipher"], "AEAD_AES_128_GCM");
    assert_eq!(c["session_id"], v["session_id"]);
    assert_eq!(c["session_id"].as_str().unwrap().len(), 66);
    assert_eq!(c["counters"]["plaintext_sent"], 8 << 20);
    assert_eq!(c["counters"]["plaintext_received"], 8 << 20);
    assert_eq!(c["counters"]["handshake_bytes_sent"], 79); // Init1: 9 + 3 ciphers * 2 + N_A 32 + Pub_A 32
    assert_eq!(c["counters"]["handshake_bytes_received"], 74); // Init2: 10 + 32 + 32
    assert_eq!(c["counters"]["ciphertext_sent"], v["counters"]["ciphertext_received"]);
    assert!(c["handshake_ms"].as_f64().unwrap() > 0.0);
    let overhead = c["counters"]["ciphertext_sent"].as_f64().unwrap() / (8u64 << 20) as f64 - 1.0;
    assert!(overhead < 0.002, "overhead {overhead}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_both_ways() {
    let greeting = data(1 << 20, 9);
    let (svc, mut rx) = recording_service(Some(greeting.clone())).await;
    let s = setup(all(), all(), DaemonConfig::default(), svc, None).await;
    let mut c = TcpStream::connect(s.app_to).await.unwrap();
    // The service half-closed after its greeting: we read it to EOF while our side is open.
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert!(got == greeting);
    // Our direction still works after the peer's FIN.
    let up = data(300_000, 4);
    c.write_all(&up).await.unwrap();
    c.shutdown().await.unwrap();
    let (recv, clean) = rx.recv().await.unwrap();
    assert!(clean);
    assert!(recv == up);
    let r = &records(&s.client_stats, 1).await[0];
    assert_eq!(r["mode"], "tcpcrypt");
    assert_eq!(r["state"], "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_when_the_peer_offers_no_eno() {
    let svc = echo_service().await;
    // Server host without TCP-ENO.
    let s = setup(all(), None, DaemonConfig::default(), svc, None).await;
    let payload = data(500_000, 1);
    assert!(exchange(s.app_to, payload.clone()).await.unwrap() == payload);
    let c = &records(&s.client_stats, 1).await[0];
    assert_eq!(c["mode"], "plain");
    assert_eq!(c["reason"], "peer sent no ENO option");
    // Client host without TCP-ENO.
    let s = setup(None, all(), DaemonConfig::default(), svc, None).await;
    assert!(exchange(s.app_to, payload.clone()).await.unwrap() == payload);
    assert_eq!(records(&s.server_stats, 1).await[0]["mode"], "plain");
    // No common TEP.
    let s = setup(Some(vec![Tep::P256]), Some(vec![Tep::Curve25519]), DaemonConfig::default(), svc, None).await;
    assert!(exchange(s.app_to, payload.clone()).await.unwrap() == payload);
    assert_eq!(records(&s.client_stats, 1).await[0]["reason"], "no valid common TEP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_when_there_is_no_daemon_at_the_peer() {
    let svc = echo_service().await;
    let net = FakeEnoNet::new();
    let client = Daemon::new(DaemonConfig::default(), Arc::new(net.host(all())), Arc::new(Registry::new(None).unwrap()));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let to = l.local_addr().unwrap();
    tokio::spawn(client.serve_outbound(l, Destination::Fixed(svc)));
    let payload = data(100_000, 2);
    assert!(exchange(to, payload.clone()).await.unwrap() == payload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_frame_resets_and_never_delivers_plaintext() {
    let (svc, mut rx) = recording_service(None).await;
    // Init1 is 79 bytes; flip a byte inside the third 16 KiB frame.
    let s = setup(all(), all(), DaemonConfig::default(), svc, Some(79 + 2 * 16404 + 100)).await;
    let payload = data(200_000, 5);
    let r = exchange(s.app_to, payload.clone()).await;
    assert!(r.is_err(), "application must see a reset, got {:?}", r.map(|v| v.len()));
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionReset);
    let (recv, clean) = rx.recv().await.unwrap();
    assert!(!clean, "the service must see a reset, not EOF");
    assert!(recv.len() <= 2 * 16384 && payload.starts_with(&recv), "only authentic frames delivered");
    let v = &records(&s.server_stats, 1).await[0];
    assert_eq!(v["state"], "aborted");
    assert!(v["reason"].as_str().unwrap().contains("authentication"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_reset_is_passed_on() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let svc = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut b = [0u8; 10];
        s.read_exact(&mut b).await.unwrap();
        socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
        drop(s);
    });
    let s = setup(all(), all(), DaemonConfig::default(), svc, None).await;
    let mut c = TcpStream::connect(s.app_to).await.unwrap();
    c.write_all(b"0123456789").await.unwrap();
    let mut buf = Vec::new();
    let r = c.read_to_end(&mut buf).await;
    assert_eq!(r.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rekey_during_a_transfer() {
    let svc = echo_service().await;
    let mut cfg = DaemonConfig::default();
    cfg.proto.rekey_after_bytes = Some(256 * 1024);
    let s = setup(all(), all(), cfg, svc, None).await;
    let payload = data(4 << 20, 7);
    assert!(exchange(s.app_to, payload.clone()).await.unwrap() == payload);
    let c = &records(&s.client_stats, 1).await[0];
    assert!(c["counters"]["rekeys_sent"].as_u64().unwrap() >= 15, "{c}");
    assert!(c["counters"]["rekeys_received"].as_u64().unwrap() >= 15, "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumption_on_the_next_connection() {
    let svc = echo_service().await;
    let s = setup(all(), all(), DaemonConfig::default(), svc, None).await;
    let mut sids = Vec::new();
    for i in 0..3 {
        let payload = data(50_000, i);
        assert!(exchange(s.app_to, payload.clone()).await.unwrap() == payload);
        let c = records(&s.client_stats, i as usize + 1).await;
        let v = records(&s.server_stats, i as usize + 1).await;
        let (c, v) = (&c[i as usize], &v[i as usize]);
        assert_eq!(c["resumed"], i > 0, "{c}");
        assert_eq!(c["session_id"], v["session_id"]);
        if i > 0 {
            assert_eq!(c["counters"]["handshake_bytes_sent"], 0);
            assert!(c["session_id"].as_str().unwrap().starts_with("a3"));
        }
        sids.push(c["session_id"].clone());
    }
    sids.dedup();
    assert_eq!(sids.len(), 3);
    let _ = (&s.client, &s.server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_live_connections() {
    let svc = echo_service().await;
    let s = setup(all(), all(), DaemonConfig::default(), svc, None).await;
    let mut c = TcpStream::connect(s.app_to).await.unwrap();
    c.write_all(b"ping").await.unwrap();
    let mut b = [0u8; 4];
    c.read_exact(&mut b).await.unwrap();
    let snap = s.client.registry.snapshot();
    assert_eq!(snap.len(), 1);
    assert_eq!(snap[0]["state"], "established");
    assert_eq!(snap[0]["cipher"], "AEAD_AES_128_GCM");
    let table = tcpcryptd::control::format_table(&serde_json::json!({"connections": snap}));
    assert!(table.contains("TCPCRYPT_ECDHE_Curve25519"), "{table}");
    assert!(table.contains(snap[0]["session_id"].as_str().unwrap()));
    // Over the control socket.
    let dir = tempdir();
    let path = dir.0.join("ctl.sock");
    tokio::spawn(tcpcryptd::control::serve(path.clone(), s.server.registry.clone(), serde_json::json!({"pid": 1})));
    let mut v = None;
    for _ in 0..100 {
        if let Ok(x) = tcpcryptd::control::query(&path).await {
            v = Some(x);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let v = v.unwrap();
    assert_eq!(v["connections"][0]["role"], "B");
    assert_eq!(v["connections"][0]["session_id"], snap[0]["session_id"]);
}
