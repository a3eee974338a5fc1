//! tcpcryptd command line. See `tcpcryptd help`.
#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use serde_json::json;
use tcpcrypt_proto::{Aead, Config, Tep};
use tcpcryptd::iptables::{self, Rules};
use tcpcryptd::{control, Daemon, DaemonConfig, Destination, EnoSource, NoEno, Registry};

const HELP: &str = "\
tcpcryptd - wearlab's tcpcrypt (RFC 8548 over TCP-ENO, RFC 8547) transparent proxy

USAGE:
  tcpcryptd run [OPTIONS]        run the daemon (foreground; SIGTERM/SIGINT remove its rules)
  tcpcryptd status [--json]      print the running daemon's connections
  tcpcryptd sessions [--json]    same as status
  tcpcryptd session ADDR         the connection(s) with this address (IP:PORT; an application's own
                                 socket address finds its connection): session ID, mode, reason (JSON)
  tcpcryptd cleanup              remove what a killed daemon left (iptables chains, socket, cgroup)
  tcpcryptd decrypt --key-log FILE --pcap FILE [--out DIR] [--port P]
                                 decrypt a capture's tcpcrypt connections with a key log (see below)
  tcpcryptd help

RUN OPTIONS:
  --out-port N            outbound redirect port (default 7001; 0 = no outbound interception)
  --in-port N             inbound redirect port (default 7002; 0 = no inbound interception)
  --service-port P[,P]    service ports whose inbound connections are intercepted (repeatable)
  --out-dport P[,P]       only intercept outbound connections to these ports (default: all TCP)
  --listen-addr IP        address the redirect listeners bind (default 0.0.0.0)
  --iptables CMD          iptables binary (default iptables; the UML guest needs iptables-legacy)
  --no-iptables           install no rules (use with --forward-to/--service-addr)
  --chain-prefix P        nat chain prefix (default TCPCRYPTD -> TCPCRYPTD_OUT, TCPCRYPTD_IN)
  --mark M                SO_MARK of the daemon's own sockets (default 0x7463)
  --eno bpf|none          ENO source (default bpf: the eno-bpf sock_ops program)
  --cgroup DIR            cgroup v2 the daemon moves into and attaches BPF to (default
                          /sys/fs/cgroup/tcpcryptd, or /sys/fs/cgroup/unified/tcpcryptd on hybrid hosts)
  --teps LIST             TEPs, most preferred first (default 0x23,0x21,0x22)
  --ciphers LIST          AEADs, most preferred first: aes128gcm,aes256gcm,chacha20poly1305
  --frame-size N          application bytes per frame (default 16384)
  --rekey-after-bytes N   rekey after N bytes under one key (default 2^36 = 68719476736, AES-GCM's
                          per-key data limit with margin; 0 = never)
  --require-encryption R  reset a connection that would fall back to plain TCP instead of relaying it,
                          for the destinations R (repeatable, comma-separated): all, PORT, IP, IP/PREFIX,
                          IP:PORT or IP/PREFIX:PORT (inbound: the peer's address and the service port)
  --handshake-timeout S   reset a tcpcrypt connection whose keys are not set S seconds after the TCP
                          connection opened (default 10; fractions allowed)
  --key-log FILE          append every session's secrets to FILE (debugging/teaching only, like
                          SSLKEYLOGFILE; never on by default; format in tcpcrypt/README.md)
  --no-resume             no session caching/resumption
  --resume-lifetime S     a cached session (RFC 8548 3.5 ticket) may be resumed for S seconds after
                          the peer's first authenticated frame of the session that made it (default 600)
  --stats-file PATH       append one JSON line per closed connection
  --control PATH          control socket (default /run/tcpcryptd/control.sock)
  --device-profile FILE   compute in a device's time: pad key pairs, key agreement, the key
                          schedule and every frame's seal/open to the profile's times (wearlab
                          writes it from its device, `wearlab devices`)
  --device-cores FILE     with --device-profile: the node's cores file (wearlab makes one per node),
                          shared with the node's processes that run wearlab's devicecpu library:
                          the daemon's computation queues onto the device's cores with theirs
  --forward-to ADDR       outbound destination instead of SO_ORIGINAL_DST
  --service-addr ADDR     inbound service instead of SO_ORIGINAL_DST

TESTING ONLY:
  --test-drop-eno-record out|in|both
                          delete the ENO record of outbound/inbound connections right after
                          connect()/accept() (as an eviction would): such connections must be reset

CLEANUP/STATUS OPTIONS: --iptables CMD, --chain-prefix P, --control PATH, --cgroup DIR, --json

DECRYPT (teaching and debugging; the capture from tcpdump -w, pcap or pcapng, from the SYNs on):
  --key-log FILE          a key log a daemon wrote with --key-log (both daemons' are the same)
  --pcap FILE             the capture
  --out DIR               write each connection's application bytes to DIR/conn<N>-a2b.bin and
                          DIR/conn<N>-b2a.bin (A: the connection's active opener) instead of
                          printing them (escaped) after the connection's line
  --port P                only connections with port P at either end
  Exit status 0 when every tcpcrypt connection decrypted, 1 when one did not (no key or a key
  that does not authenticate its frames: `wrong key`), 2 on an unreadable capture or key log.
";

struct Opts {
    args: Vec<String>,
}

impl Opts {
    fn flag(&mut self, name: &str) -> bool {
        if let Some(i) = self.args.iter().position(|a| a == name) {
            self.args.remove(i);
            true
        } else {
            false
        }
    }
    fn values(&mut self, name: &str) -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        while let Some(i) = self.args.iter().position(|a| a == name || a.starts_with(&format!("{name}="))) {
            let a = self.args.remove(i);
            if let Some(v) = a.strip_prefix(&format!("{name}=")) {
                out.push(v.to_string());
            } else if i < self.args.len() {
                out.push(self.args.remove(i));
            } else {
                bail!("{name} needs a value");
            }
        }
        Ok(out)
    }
    fn value(&mut self, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.values(name)?.pop())
    }
    fn list(&mut self, name: &str) -> anyhow::Result<Vec<String>> {
        Ok(self.values(name)?.iter().flat_map(|v| v.split(',')).filter(|s| !s.is_empty()).map(String::from).collect())
    }
    fn done(&self) -> anyhow::Result<()> {
        if let Some(a) = self.args.first() {
            bail!("unknown argument {a:?} (see tcpcryptd help)");
        }
        Ok(())
    }
}

fn parse_num(s: &str) -> anyhow::Result<u64> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.with_context(|| format!("not a number: {s}"))
}

fn parse_tep(s: &str) -> anyhow::Result<Tep> {
    let id = match s.to_ascii_lowercase().as_str() {
        "curve25519" | "x25519" => 0x23,
        "p256" | "p-256" => 0x21,
        "p521" | "p-521" => 0x22,
        other => parse_num(other)? as u8,
    };
    Tep::from_id(id).ok_or_else(|| anyhow!("unsupported TEP {s}"))
}

fn parse_aead(s: &str) -> anyhow::Result<Aead> {
    Ok(match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
        "aes128gcm" | "aeadaes128gcm" | "1" | "0x0001" => Aead::Aes128Gcm,
        "aes256gcm" | "aeadaes256gcm" | "2" | "0x0002" => Aead::Aes256Gcm,
        "chacha20poly1305" | "aeadchacha20poly1305" | "16" | "0x0010" => Aead::ChaCha20Poly1305,
        _ => bail!("unsupported cipher {s}"),
    })
}

const DEFAULT_CONTROL: &str = "/run/tcpcryptd/control.sock";
/// cgroup v2 mount: /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid hosts).
fn default_cgroup() -> String {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() || !Path::new("/sys/fs/cgroup/unified").exists() {
        "/sys/fs/cgroup/tcpcryptd".into()
    } else {
        "/sys/fs/cgroup/unified/tcpcryptd".into()
    }
}
const DEFAULT_PREFIX: &str = "TCPCRYPTD";

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = if args.is_empty() { "help".to_string() } else { args.remove(0) };
    let opts = Opts { args };
    let r = match cmd.as_str() {
        "run" => run(opts),
        "status" | "sessions" => status(opts),
        "session" => session(opts),
        "cleanup" | "--cleanup" => cleanup(opts),
        "decrypt" => match decrypt(opts) {
            Ok(all) => std::process::exit(if all { 0 } else { 1 }),
            Err(e) => {
                eprintln!("tcpcryptd decrypt: {e:#}");
                std::process::exit(2);
            }
        },
        "help" | "--help" | "-h" => {
            print!("{HELP}");
            Ok(())
        }
        other => Err(anyhow!("unknown command {other:?}\n\n{HELP}")),
    };
    if let Err(e) = r {
        eprintln!("tcpcryptd: {e:#}");
        std::process::exit(1);
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn status(mut o: Opts) -> anyhow::Result<()> {
    let json_out = o.flag("--json");
    let path = PathBuf::from(o.value("--control")?.unwrap_or(DEFAULT_CONTROL.into()));
    o.done()?;
    let v = runtime()?.block_on(control::query(&path))?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", control::format_table(&v));
    }
    Ok(())
}

fn session(mut o: Opts) -> anyhow::Result<()> {
    let path = PathBuf::from(o.value("--control")?.unwrap_or(DEFAULT_CONTROL.into()));
    let _ = o.flag("--json");
    let addr = if o.args.is_empty() { bail!("session needs an address (IP:PORT)") } else { o.args.remove(0) };
    o.done()?;
    let v = runtime()?.block_on(control::request(&path, &format!("session {addr}")))?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

fn cleanup(mut o: Opts) -> anyhow::Result<()> {
    let ipt = o.value("--iptables")?.unwrap_or("iptables".into());
    let prefix = o.value("--chain-prefix")?.unwrap_or(DEFAULT_PREFIX.into());
    let control = PathBuf::from(o.value("--control")?.unwrap_or(DEFAULT_CONTROL.into()));
    let cgroup = PathBuf::from(o.value("--cgroup")?.unwrap_or_else(default_cgroup));
    o.done()?;
    match iptables::cleanup(&ipt, &prefix) {
        Ok(removed) => {
            for r in removed {
                println!("removed iptables: {r}");
            }
        }
        Err(e) => eprintln!("tcpcryptd: iptables cleanup: {e:#}"),
    }
    if std::fs::remove_file(&control).is_ok() {
        println!("removed {}", control.display());
    }
    remove_cgroup(&cgroup);
    Ok(())
}

/// Remove the daemon's cgroup if it exists and is empty (processes still in it keep it).
fn remove_cgroup(dir: &Path) {
    if dir.exists() {
        match std::fs::remove_dir(dir) {
            Ok(()) => println!("removed {}", dir.display()),
            Err(e) => eprintln!("tcpcryptd: cgroup {}: {e} (processes still in it?)", dir.display()),
        }
    }
}

/// Move this process into a cgroup v2 (created if missing) so that its sockets run the
/// sock_ops program attached there.
fn join_cgroup(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create cgroup {}", dir.display()))?;
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
        .with_context(|| format!("join cgroup {}", dir.display()))?;
    Ok(())
}

fn run(mut o: Opts) -> anyhow::Result<()> {
    let out_port = parse_num(&o.value("--out-port")?.unwrap_or("7001".into()))? as u16;
    let in_port = parse_num(&o.value("--in-port")?.unwrap_or("7002".into()))? as u16;
    let service_ports: Vec<u16> = o.list("--service-port")?.iter().map(|p| parse_num(p).map(|n| n as u16)).collect::<Result<_, _>>()?;
    let out_dports: Vec<u16> = o.list("--out-dport")?.iter().map(|p| parse_num(p).map(|n| n as u16)).collect::<Result<_, _>>()?;
    let listen: IpAddr = o.value("--listen-addr")?.unwrap_or("0.0.0.0".into()).parse()?;
    let ipt = o.value("--iptables")?.unwrap_or("iptables".into());
    let no_ipt = o.flag("--no-iptables");
    let prefix = o.value("--chain-prefix")?.unwrap_or(DEFAULT_PREFIX.into());
    let mark = parse_num(&o.value("--mark")?.unwrap_or("0x7463".into()))? as u32;
    let eno_kind = o.value("--eno")?.unwrap_or("bpf".into());
    let cgroup = PathBuf::from(o.value("--cgroup")?.unwrap_or_else(default_cgroup));
    let teps: Vec<Tep> = match o.list("--teps")? {
        v if v.is_empty() => Tep::ALL.to_vec(),
        v => v.iter().map(|s| parse_tep(s)).collect::<Result<_, _>>()?,
    };
    let aeads: Vec<Aead> = match o.list("--ciphers")? {
        v if v.is_empty() => Aead::ALL.to_vec(),
        v => v.iter().map(|s| parse_aead(s)).collect::<Result<_, _>>()?,
    };
    let frame = parse_num(&o.value("--frame-size")?.unwrap_or("16384".into()))? as usize;
    let rekey = match o.value("--rekey-after-bytes")? {
        None => Some(tcpcrypt_proto::DEFAULT_REKEY_AFTER_BYTES),
        Some(v) => Some(parse_num(&v)?).filter(|&n| n != 0),
    };
    let mut require = tcpcryptd::RequirePolicy::default();
    for r in o.list("--require-encryption")? {
        require.add(&r)?;
    }
    let handshake_timeout = match o.value("--handshake-timeout")? {
        None => tcpcryptd::proxy::DEFAULT_HANDSHAKE_TIMEOUT,
        Some(v) => {
            let secs: f64 = v.parse().with_context(|| format!("--handshake-timeout {v}"))?;
            if !(secs > 0.0 && secs.is_finite()) {
                bail!("--handshake-timeout must be positive");
            }
            std::time::Duration::from_secs_f64(secs)
        }
    };
    let resume_lifetime = match o.value("--resume-lifetime")? {
        None => tcpcryptd::proxy::DEFAULT_RESUME_LIFETIME,
        Some(v) => {
            let secs: f64 = v.parse().with_context(|| format!("--resume-lifetime {v}"))?;
            if !(secs > 0.0 && secs.is_finite()) {
                bail!("--resume-lifetime must be positive");
            }
            std::time::Duration::from_secs_f64(secs)
        }
    };
    let key_log = o
        .value("--key-log")?
        .map(|p| {
            std::fs::OpenOptions::new().create(true).append(true).open(&p).with_context(|| format!("--key-log {p}"))
        })
        .transpose()?;
    let key_log_on = key_log.is_some();
    if key_log_on {
        eprintln!("tcpcryptd: WARNING: --key-log writes every session's secrets to a file (debugging only)");
    }
    let drop_eno_record = match o.value("--test-drop-eno-record")?.as_deref() {
        None => tcpcryptd::DropEnoRecord::default(),
        Some("out") => tcpcryptd::DropEnoRecord { outbound: true, inbound: false },
        Some("in") => tcpcryptd::DropEnoRecord { outbound: false, inbound: true },
        Some("both") => tcpcryptd::DropEnoRecord { outbound: true, inbound: true },
        Some(x) => bail!("--test-drop-eno-record {x}: out, in or both"),
    };
    let no_resume = o.flag("--no-resume");
    let stats_file = o.value("--stats-file")?.map(PathBuf::from);
    let control_path = PathBuf::from(o.value("--control")?.unwrap_or(DEFAULT_CONTROL.into()));
    let device = o.value("--device-profile")?.map(|p| tcpcryptd::device::Profile::load(Path::new(&p))).transpose()?;
    let device_cores = o
        .value("--device-cores")?
        .map(|p| wearlab_devicecores::NodeCores::open(Path::new(&p)).with_context(|| format!("--device-cores {p}")))
        .transpose()?;
    let forward_to: Option<SocketAddr> = o.value("--forward-to")?.map(|v| v.parse()).transpose()?;
    let service_addr: Option<SocketAddr> = o.value("--service-addr")?.map(|v| v.parse()).transpose()?;
    o.done()?;
    if frame == 0 || frame > tcpcrypt_proto::MAX_FRAME_DATA {
        bail!("--frame-size must be 1..={}", tcpcrypt_proto::MAX_FRAME_DATA);
    }

    let cfg = DaemonConfig {
        proto: Config { teps: teps.clone(), aeads: aeads.clone(), max_frame_data: frame, rekey_after_bytes: rekey, cache_sessions: !no_resume, key_log: key_log_on, ..Config::default() },
        mark,
        resumption: !no_resume,
        resume_lifetime,
        require: require.clone(),
        handshake_timeout,
        key_log: key_log.map(|f| Arc::new(std::sync::Mutex::new(f))),
        drop_eno_record,
        device: match (device, device_cores) {
            (Some(p), Some(c)) => Some(Arc::new(tcpcryptd::device::Pacer::on_cores(p, c))),
            (Some(p), None) => Some(Arc::new(tcpcryptd::device::Pacer::new(p))),
            (None, Some(_)) => bail!("--device-cores goes with --device-profile"),
            (None, None) => None,
        },
        ..DaemonConfig::default()
    };
    // The ENO source; sockets must be created after joining the cgroup.
    let eno: Arc<dyn EnoSource> = match eno_kind.as_str() {
        "none" => Arc::new(NoEno),
        "bpf" => {
            join_cgroup(&cgroup)?;
            tcpcryptd::bpf::attach(&cgroup, &teps)?
        }
        other => bail!("unknown --eno {other} (bpf|none)"),
    };
    let rules = Rules {
        iptables: ipt,
        prefix,
        mark,
        out_port: (out_port != 0 && forward_to.is_none()).then_some(out_port),
        out_dports,
        in_port: (in_port != 0 && service_addr.is_none() && !service_ports.is_empty()).then_some(in_port),
        service_ports: service_ports.clone(),
    };
    let device_name = cfg.device.as_ref().map(|d| d.profile().name.clone());
    let rt = runtime()?;
    let r = rt.block_on(async {
        let registry = Arc::new(Registry::new(stats_file)?);
        let daemon = Daemon::new(cfg, eno.clone(), registry.clone());
        let mut tasks = Vec::new();
        if out_port != 0 {
            let l = tokio::net::TcpListener::bind(SocketAddr::new(listen, out_port)).await.context("outbound listener")?;
            let dest = forward_to.map(Destination::Fixed).unwrap_or(Destination::OriginalDst);
            tasks.push(tokio::spawn(daemon.clone().serve_outbound(l, dest)));
        }
        if in_port != 0 {
            let l = tokio::net::TcpListener::bind(SocketAddr::new(listen, in_port)).await.context("inbound listener")?;
            let dest = service_addr.map(Destination::Fixed).unwrap_or(Destination::OriginalDst);
            tasks.push(tokio::spawn(daemon.clone().serve_inbound(l, dest)));
        }
        let info = json!({
            "pid": std::process::id(), "eno": eno.name(), "out_port": out_port, "in_port": in_port,
            "service_ports": service_ports, "teps": teps.iter().map(|t| t.name()).collect::<Vec<_>>(),
            "ciphers": aeads.iter().map(|a| a.name()).collect::<Vec<_>>(),
            "stats_file": registry.stats_path.as_ref().map(|p| p.display().to_string()),
            "device": device_name,
            "require_encryption": !require.is_empty(),
            "handshake_timeout_s": handshake_timeout.as_secs_f64(),
            "rekey_after_bytes": rekey,
        });
        // Rules first: wearlab (nodes/tcpcrypt.py) takes a served control socket to mean that the
        // node's connections go through this daemon (a restarted daemon's first connection went
        // around it while the rules were going in).
        if !no_ipt {
            rules.install().context("installing iptables rules")?;
        }
        let ctl = tokio::spawn(control::serve(control_path.clone(), registry.clone(), info));
        eprintln!("tcpcryptd: running (eno={}, out={out_port}, in={in_port})", eno.name());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            r = ctl => { eprintln!("tcpcryptd: control socket ended: {r:?}"); }
        }
        anyhow::Ok(())
    });
    // Cleanup on every exit path.
    if !no_ipt {
        if let Err(e) = iptables::cleanup(&rules.iptables, &rules.prefix) {
            eprintln!("tcpcryptd: iptables cleanup: {e:#}");
        }
    }
    let _ = std::fs::remove_file(&control_path);
    drop(eno);
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    r
}

/// `tcpcryptd decrypt`: the capture's connections, each tcpcrypt one decrypted with the key
/// log (tcpcrypt_proto::observe: the session's own frame code). Ok(false): some connection
/// that ran tcpcrypt could not be decrypted.
fn decrypt(mut o: Opts) -> anyhow::Result<bool> {
    use std::io::Write;
    use tcpcrypt_proto::observe::{self, Captured, KeyLog, ObserveError};
    let keys = o.value("--key-log")?.ok_or_else(|| anyhow!("--key-log FILE is required"))?;
    let pcap = o.value("--pcap")?.ok_or_else(|| anyhow!("--pcap FILE is required"))?;
    let out = o.value("--out")?.map(PathBuf::from);
    let port = o.value("--port")?.map(|p| p.parse::<u16>().with_context(|| format!("--port {p}"))).transpose()?;
    o.done()?;
    let text = std::fs::read_to_string(&keys).with_context(|| keys.clone())?;
    let log = KeyLog::parse(&text).map_err(|e| anyhow!("{keys}: {e}"))?;
    if log.is_empty() {
        bail!("{keys}: no TCPCRYPT_ES or TCPCRYPT_SS line");
    }
    let conns = tcpcryptd::capture::read(Path::new(&pcap))?;
    if let Some(d) = &out {
        std::fs::create_dir_all(d).with_context(|| d.display().to_string())?;
    }
    let mut all = true;
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    for (n, c) in conns.iter().enumerate().map(|(i, c)| (i + 1, c)) {
        if port.is_some_and(|p| c.a.port() != p && c.b.port() != p) {
            continue;
        }
        write!(w, "connection {n}: {} -> {}: ", c.a, c.b)?;
        let holes = [("A->B", &c.a_to_b), ("B->A", &c.b_to_a)]
            .iter()
            .filter_map(|(d, s)| s.hole_at.map(|h| format!("{d} has a hole at byte {h} (lost from the capture)")))
            .collect::<Vec<_>>();
        let cap = Captured { syn_option: &c.syn_option, synack_option: &c.synack_option, a_to_b: &c.a_to_b.bytes, b_to_a: &c.b_to_a.bytes };
        match observe::decrypt(&log, &cap) {
            Ok(x) => {
                writeln!(
                    w,
                    "tcpcrypt, {}, TEP {:#04x}, {}, session {}{}",
                    if x.resumed { "resumed" } else { "fresh key exchange" },
                    x.tep.id(),
                    x.aead,
                    tcpcrypt_proto::hex(&x.session_id),
                    if x.verified { "" } else { " (no frame to check the key with)" }
                )?;
                for (name, file, d) in [("A->B", "a2b", &x.a_to_b), ("B->A", "b2a", &x.b_to_a)] {
                    let mut notes = vec![format!("{} bytes in {} frames", d.plaintext.len(), d.frames)];
                    if d.rekeys > 0 {
                        notes.push(format!("{} rekeys", d.rekeys));
                    }
                    notes.push(if d.fin { "FINp".into() } else { "no FINp".into() });
                    if d.trailing > 0 {
                        notes.push(format!("{} bytes of an incomplete frame at the end", d.trailing));
                    }
                    if let Some(e) = &d.error {
                        notes.push(format!("stopped: {e}"));
                    }
                    writeln!(w, "  {name}: {}", notes.join(", "))?;
                    match &out {
                        Some(dir) => {
                            let f = dir.join(format!("conn{n}-{file}.bin"));
                            std::fs::write(&f, &d.plaintext).with_context(|| f.display().to_string())?;
                        }
                        None => writeln!(w, "  {}", d.plaintext.escape_ascii())?,
                    }
                }
                for h in &holes {
                    writeln!(w, "  {h}")?;
                }
            }
            Err(ObserveError::NotTcpcrypt(why)) => writeln!(w, "plain TCP ({why})")?,
            Err(e) => {
                all = false;
                writeln!(w, "tcpcrypt, not decrypted: {e}")?;
                for h in &holes {
                    writeln!(w, "  {h}")?;
                }
            }
        }
    }
    Ok(all)
}
