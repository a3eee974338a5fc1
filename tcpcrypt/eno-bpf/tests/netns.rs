//! End-to-end tests of the sock_ops program over a veth pair between two network namespaces
//! this test creates (enotest-a 10.99.0.1/24, enotest-b 10.99.0.2/24) and deletes again.
//! They need root (CAP_SYS_ADMIN + CAP_BPF + CAP_NET_ADMIN) and a cgroup v2 hierarchy; they
//! print a reason and pass vacuously otherwise.
//!
//! The test process itself plays both ends: it moves itself into cgroup enotest-a / enotest-b
//! before creating each socket (a socket belongs to the cgroup of its creator, and accepted
//! sockets to the listener's), and setns()es the creating thread into the namespace. Tests
//! are serialized by a mutex because cgroup membership is per process.

use std::{
    ffi::CString,
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream},
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use tcpcrypt_eno_bpf::{EnoBpf, EnoConfig, EnoFallback, EnoRecord};

static SERIAL: Mutex<()> = Mutex::new(());

const NS_A: &str = "enotest-a";
const NS_B: &str = "enotest-b";
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

fn sh(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).status().map(|s| s.success()).unwrap_or(false)
}

fn skip_reason() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if cgroup2_root().is_none() {
        return Some("no cgroup v2 hierarchy mounted".into());
    }
    if !sh("command -v ip >/dev/null") {
        return Some("iproute2 `ip` missing".into());
    }
    None
}

macro_rules! require_root {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

fn cgroup2_root() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

/// Two namespaces, a veth pair, one cgroup v2 directory per side; all removed on drop and
/// the test process moved back to its original cgroup.
struct Lab {
    cg_root: PathBuf,
    orig_cg: PathBuf,
    cg_a: PathBuf,
    cg_b: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        Lab::cleanup_net();
        let ok = sh(&format!(
            "set -e; ip netns add {NS_A}; ip netns add {NS_B}; \
             ip link add eno-va netns {NS_A} type veth peer name eno-vb netns {NS_B}; \
             ip -n {NS_A} addr add {IP_A}/24 dev eno-va; ip -n {NS_B} addr add {IP_B}/24 dev eno-vb; \
             ip -n {NS_A} link set eno-va up; ip -n {NS_B} link set eno-vb up; \
             ip -n {NS_A} link set lo up; ip -n {NS_B} link set lo up"
        ));
        let cg_root = cgroup2_root().unwrap();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let rel = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/").trim();
        let orig_cg = cg_root.join(rel.trim_start_matches('/'));
        let cg_a = cg_root.join("enotest-a");
        let cg_b = cg_root.join("enotest-b");
        let lab = Lab { cg_root, orig_cg, cg_a, cg_b };
        assert!(ok, "setting up namespaces/veth failed");
        for d in [&lab.cg_a, &lab.cg_b] {
            let _ = fs::create_dir(d);
        }
        lab
    }

    fn cleanup_net() {
        sh(&format!("ip netns del {NS_A} 2>/dev/null; ip netns del {NS_B} 2>/dev/null; true"));
    }

    fn join(&self, cg: &Path) {
        fs::write(cg.join("cgroup.procs"), std::process::id().to_string())
            .unwrap_or_else(|e| panic!("joining {}: {e}", cg.display()));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let back = if self.orig_cg.join("cgroup.procs").exists() { &self.orig_cg } else { &self.cg_root };
        let _ = fs::write(back.join("cgroup.procs"), std::process::id().to_string());
        for d in [&self.cg_a, &self.cg_b] {
            for _ in 0..50 {
                if fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Lab::cleanup_net();
    }
}

/// Runs f with the calling thread in network namespace `ns`.
fn in_ns<T>(ns: &str, f: impl FnOnce() -> T) -> T {
    let own = fs::File::open("/proc/thread-self/ns/net").unwrap();
    let target = fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    assert_eq!(unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {ns}");
    let r = f();
    assert_eq!(unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns back");
    r
}

// ---- packet capture (AF_PACKET in namespace B, on eno-vb) -----------------------------

struct Capture(OwnedFd);

#[derive(Debug, Clone)]
struct Seg {
    from_a: bool,
    flags: u8,
    payload: usize,
    opts: Vec<Vec<u8>>, // every TCP option (kind, len, data...), NOP/EOL left out
}

impl Seg {
    fn eno(&self) -> Vec<&Vec<u8>> {
        self.opts.iter().filter(|o| o[0] == 69).collect()
    }
    fn syn(&self) -> bool {
        self.flags & 0x02 != 0
    }
    fn ack(&self) -> bool {
        self.flags & 0x10 != 0
    }
}

impl Capture {
    fn start() -> Capture {
        in_ns(NS_B, || unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32);
            assert!(fd >= 0, "AF_PACKET socket");
            let name = CString::new("eno-vb").unwrap();
            let ifindex = libc::if_nametoindex(name.as_ptr());
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = ifindex as i32;
            assert_eq!(
                libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32),
                0
            );
            let big: libc::c_int = 8 << 20;
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &big as *const _ as *const _, 4);
            Capture(OwnedFd::from_raw_fd(fd))
        })
    }

    /// All TCP segments on port `port` captured so far, in order.
    fn segments(&self, port: u16) -> Vec<Seg> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = unsafe {
                libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr() as *mut _, buf.len(), libc::MSG_DONTWAIT)
            };
            if n <= 0 {
                break;
            }
            if let Some(s) = parse_frame(&buf[..n as usize], port) {
                out.push(s);
            }
        }
        out
    }
}

fn parse_frame(f: &[u8], port: u16) -> Option<Seg> {
    if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &f[14..];
    let ihl = ((ip[0] & 0xf) as usize) * 4;
    let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if ip[9] != 6 || ip.len() < ihl + 20 {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let tcp = &ip[ihl..];
    let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
    let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
    if sport != port && dport != port {
        return None;
    }
    let doff = ((tcp[12] >> 4) as usize) * 4;
    let mut opts = Vec::new();
    let mut i = 20;
    while i < doff {
        match tcp[i] {
            0 => break,
            1 => i += 1,
            _ => {
                let l = tcp[i + 1] as usize;
                opts.push(tcp[i..i + l].to_vec());
                i += l.max(2);
            }
        }
    }
    Some(Seg { from_a: src == IP_A, flags: tcp[13], payload: tot.saturating_sub(ihl + doff), opts })
}

// ---- connection helpers --------------------------------------------------------------------

struct Conn {
    client: TcpStream,
    server: TcpStream,
    _a_local: SocketAddrV4,
    _b_local: SocketAddrV4,
}

fn v4(a: std::net::SocketAddr) -> SocketAddrV4 {
    match a {
        std::net::SocketAddr::V4(a) => a,
        _ => panic!("not v4"),
    }
}

/// Listener in (ns B, cgroup B); client socket in (ns A, cgroup A). `before_connect` gets the
/// raw client socket (created in cgroup A) before connect().
fn connect(lab: &Lab, port: u16, before_connect: impl FnOnce(&OwnedFd)) -> (Conn, TcpListener) {
    lab.join(&lab.cg_b);
    let listener = in_ns(NS_B, || TcpListener::bind((IP_B, port)).expect("bind"));
    lab.join(&lab.cg_a);
    let client = in_ns(NS_A, || unsafe {
        let fd = OwnedFd::from_raw_fd(libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0));
        before_connect(&fd);
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as u16;
        sin.sin_port = port.to_be();
        sin.sin_addr.s_addr = u32::from_ne_bytes(IP_B.octets());
        let r = libc::connect(fd.as_raw_fd(), &sin as *const _ as *const _, std::mem::size_of::<libc::sockaddr_in>() as u32);
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from(fd)
    });
    lab.join(&lab.orig_cg_or_root());
    let (server, _) = listener.accept().unwrap();
    let a_local = v4(client.local_addr().unwrap());
    let b_local = v4(server.local_addr().unwrap());
    (Conn { client, server, _a_local: a_local, _b_local: b_local }, listener)
}

impl Lab {
    fn orig_cg_or_root(&self) -> PathBuf {
        if self.orig_cg.join("cgroup.procs").exists() {
            self.orig_cg.clone()
        } else {
            self.cg_root.clone()
        }
    }
}

/// ping / pong / more, then close: the data exchange the segment assertions rely on.
fn exchange(c: &mut Conn) {
    c.client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 4];
    c.client.write_all(b"ping").unwrap();
    c.server.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
    c.server.write_all(b"pong").unwrap();
    c.client.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"pong");
    c.client.write_all(b"more").unwrap();
    c.server.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"more");
    c.client.shutdown(std::net::Shutdown::Both).unwrap();
    assert_eq!(c.server.read(&mut b).unwrap(), 0);
    c.server.shutdown(std::net::Shutdown::Both).unwrap();
    std::thread::sleep(Duration::from_millis(100));
}

fn records(a: &EnoBpf, b: Option<&EnoBpf>, c: &Conn) -> (EnoRecord, Option<EnoRecord>) {
    let ra = a.record(c.client.as_fd()).unwrap().expect("A has a record");
    let rb = b.map(|b| b.record(c.server.as_fd()).unwrap().expect("B has a record"));
    (ra, rb)
}

fn dump(segs: &[Seg]) -> String {
    segs.iter()
        .map(|s| format!("{} flags={:#04x} len={} opts={:?}", if s.from_a { "A>B" } else { "B>A" }, s.flags, s.payload, s.opts))
        .collect::<Vec<_>>()
        .join("\n")
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- tests -------------------------------------------------------------------------------

/// ENO succeeds: SYN lists A's TEPs, SYN-ACK has b=1 + B's pick, third segment carries the
/// 2-byte non-SYN form, A stops once it received a non-SYN segment, B never sends ENO after
/// the SYN-ACK; both records hold the same transcript, equal to the bytes on the wire.
#[test]
fn eno_negotiates() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x21, 0x22, 0x23] }).unwrap();
    let b = EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x24, 0x22, 0x21] }).unwrap();
    let cap = Capture::start();
    let (mut c, _l) = connect(&lab, 7001, |_| {});
    exchange(&mut c);
    let segs = cap.segments(7001);
    let d = dump(&segs);
    eprintln!("{d}");

    let syn = &segs[0];
    assert!(syn.syn() && !syn.ack() && syn.from_a, "{d}");
    assert_eq!(syn.eno(), vec![&vec![69, 5, 0x21, 0x22, 0x23]], "{d}");
    let synack = &segs[1];
    assert!(synack.syn() && synack.ack() && !synack.from_a, "{d}");
    assert_eq!(synack.eno(), vec![&vec![69, 4, 0x01, 0x22]], "B picks its most preferred TEP A offered\n{d}");
    let third = &segs[2];
    assert!(third.from_a && !third.syn() && third.ack(), "{d}");
    assert_eq!(third.eno(), vec![&vec![69, 2]], "third segment: non-SYN form\n{d}");

    // B: no ENO on anything after its SYN-ACK.
    assert!(segs[2..].iter().filter(|s| !s.from_a).all(|s| s.eno().is_empty()), "{d}");
    // A: ENO only until its first received non-SYN segment; it is monotone, and everything A
    // sends after having read "pong" (the "more" segment, FIN) is plain.
    // "more" is written after A read "pong", i.e. after A received non-SYN segments from B.
    let pong = segs.iter().position(|s| !s.from_a && s.payload == 4).expect("pong");
    let more = segs[pong..].iter().find(|s| s.from_a && s.payload == 4).expect("more");
    assert!(more.eno().is_empty(), "A's data after receiving B's segments carries no ENO\n{d}");
    let a_segs: Vec<&Seg> = segs.iter().filter(|s| s.from_a && !s.syn()).collect();
    let first_plain = a_segs.iter().position(|s| s.eno().is_empty()).expect("A stops sending ENO");
    assert!(a_segs[first_plain..].iter().all(|s| s.eno().is_empty()), "{d}");
    assert!(segs.iter().filter(|s| s.from_a && s.flags & 0x01 != 0).all(|s| s.eno().is_empty()), "FIN plain\n{d}");

    let (ra, rb) = records(&a, Some(&b), &c);
    let rb = rb.unwrap();
    eprintln!("A: {ra:?}\nB: {rb:?}");
    assert!(!ra.passive && rb.passive);
    assert_eq!(ra.syn_option, vec![69, 5, 0x21, 0x22, 0x23]);
    assert_eq!(ra.synack_option, vec![69, 4, 0x01, 0x22]);
    assert_eq!(ra.syn_option, rb.syn_option);
    assert_eq!(ra.synack_option, rb.synack_option);
    assert_eq!(ra.transcript(), rb.transcript());
    assert_eq!(&ra.syn_option, syn.eno()[0]);
    assert_eq!(&rb.synack_option, synack.eno()[0]);
    assert!(ra.ack_had_eno && rb.ack_had_eno);
    assert_eq!((ra.fallback, rb.fallback), (None, None));
    assert_eq!((ra.tep, rb.tep), (Some(0x22), Some(0x22)));
    assert!(ra.encrypted() && rb.encrypted() && ra.complete && rb.complete);

    a.forget(c.client.as_fd()).unwrap();
    b.forget(c.server.as_fd()).unwrap();
    assert!(a.record(c.client.as_fd()).unwrap().is_none());
    assert!(b.record(c.server.as_fd()).unwrap().is_none());
}

/// B without the program: the SYN-ACK has no ENO, A sends no ENO in its ACK, records say
/// SynAckWithoutEno, and the connection works as plain TCP.
#[test]
fn fallback_peer_without_eno() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x21, 0x22] }).unwrap();
    let cap = Capture::start();
    let (mut c, _l) = connect(&lab, 7002, |_| {});
    exchange(&mut c);
    let segs = cap.segments(7002);
    let d = dump(&segs);
    assert_eq!(segs[0].eno(), vec![&vec![69, 4, 0x21, 0x22]], "{d}");
    assert!(segs[1].syn() && segs[1].eno().is_empty(), "{d}");
    assert!(segs[2..].iter().all(|s| s.eno().is_empty()), "no ENO after a plain SYN-ACK\n{d}");
    let (ra, _) = records(&a, None, &c);
    eprintln!("A: {ra:?}");
    assert!(!ra.passive && !ra.ack_had_eno && ra.synack_option.is_empty());
    assert_eq!(ra.syn_option, vec![69, 4, 0x21, 0x22]);
    assert_eq!(ra.fallback, Some(EnoFallback::SynAckWithoutEno));
    assert!(!ra.encrypted() && ra.complete);
}

/// A without the program, B with it: the SYN has no ENO, B writes nothing (plain TCP),
/// B's record says SynWithoutEno.
#[test]
fn fallback_plain_client() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let b = EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x21] }).unwrap();
    let cap = Capture::start();
    let (mut c, _l) = connect(&lab, 7003, |_| {});
    exchange(&mut c);
    let segs = cap.segments(7003);
    let d = dump(&segs);
    assert!(segs.iter().all(|s| s.eno().is_empty()), "{d}");
    let rb = b.record(c.server.as_fd()).unwrap().expect("B record");
    eprintln!("B: {rb:?}");
    assert!(rb.passive && rb.syn_option.is_empty() && rb.synack_option.is_empty());
    assert_eq!(rb.fallback, Some(EnoFallback::SynWithoutEno));
}

/// B supports none of the offered TEPs: vacuous option (b=1 only) in the SYN-ACK, A falls
/// back and sends no ENO in the ACK, both records say NoCommonTep with the same transcript.
#[test]
fn fallback_no_common_tep_vacuous() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x21, 0x22] }).unwrap();
    let b = EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x24] }).unwrap();
    let cap = Capture::start();
    let (mut c, _l) = connect(&lab, 7004, |_| {});
    exchange(&mut c);
    let segs = cap.segments(7004);
    let d = dump(&segs);
    assert_eq!(segs[1].eno(), vec![&vec![69, 3, 0x01]], "vacuous SYN-ACK option\n{d}");
    assert!(segs[2..].iter().all(|s| s.eno().is_empty()), "{d}");
    let (ra, rb) = records(&a, Some(&b), &c);
    let rb = rb.unwrap();
    eprintln!("A: {ra:?}\nB: {rb:?}");
    assert_eq!(ra.transcript(), rb.transcript());
    assert_eq!(ra.synack_option, vec![69, 3, 0x01]);
    assert_eq!(ra.fallback, Some(EnoFallback::NoCommonTep));
    assert_eq!(rb.fallback, Some(EnoFallback::NoCommonTep));
    assert!(ra.ack_had_eno && !rb.ack_had_eno);
    assert!(!ra.encrypted() && !rb.encrypted());
}

/// Per-socket SYN option override through the sk_storage map (e.g. RFC 8548 resumption):
/// the SYN carries exactly the given bytes, B picks among them, records carry them.
#[test]
fn per_socket_syn_override() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x21] }).unwrap();
    let b = EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x23, 0x21] }).unwrap();
    let cap = Capture::start();
    // TEP 0x21, then 0x23 with 9 bytes of suboption data (v=1, to the end of the option).
    let opt = vec![69, 13, 0x21, 0xa3, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    let (mut c, _l) = connect(&lab, 7005, |fd| a.set_syn_option(fd.as_fd(), &opt).unwrap());
    exchange(&mut c);
    let segs = cap.segments(7005);
    let d = dump(&segs);
    assert_eq!(segs[0].eno(), vec![&opt], "{d}");
    assert_eq!(segs[1].eno(), vec![&vec![69, 4, 0x01, 0x23]], "{d}");
    assert_eq!(segs[2].eno(), vec![&vec![69, 2]], "{d}");
    let (ra, rb) = records(&a, Some(&b), &c);
    let rb = rb.unwrap();
    assert!(ra.overridden);
    assert_eq!(ra.syn_option, opt);
    assert_eq!(ra.transcript(), rb.transcript());
    assert_eq!((ra.tep, rb.tep), (Some(0x23), Some(0x23)));
    assert!(ra.encrypted() && rb.encrypted());
}

fn bpftool_cgroup(dir: &Path) -> String {
    let o = Command::new("bpftool").arg("cgroup").arg("show").arg(dir).output().expect("bpftool");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// kill -9 of the process holding the link leaves no program attached (nothing is pinned).
#[test]
fn kill_9_detaches() {
    require_root!();
    if !sh("command -v bpftool >/dev/null") {
        eprintln!("SKIPPED: bpftool missing");
        return;
    }
    let _g = lock();
    let dir = cgroup2_root().unwrap().join("enotest-k");
    let _ = fs::create_dir(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_eno-attach"))
        .arg(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "attached");
    let before = bpftool_cgroup(&dir);
    eprintln!("before kill -9:\n{before}");
    assert!(before.contains("eno_sockops"), "{before}");
    let id: u32 = before
        .lines()
        .find(|l| l.contains("eno_sockops"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let t0 = Instant::now();
    let mut after = bpftool_cgroup(&dir);
    while after.contains("eno_sockops") && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        after = bpftool_cgroup(&dir);
    }
    eprintln!("after kill -9 ({:?}):\n{after}", t0.elapsed());
    assert!(!after.contains("eno_sockops"), "{after}");
    // the program itself is gone too (no pin, no other reference)
    let mut gone = false;
    while t0.elapsed() < Duration::from_secs(5) {
        if !sh(&format!("bpftool prog show id {id} >/dev/null 2>&1")) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gone, "prog {id} still loaded");
    let _ = fs::remove_dir(&dir);
}

/// A listener created before the program was attached never had TCP_SAVE_SYN set nor the
/// SYN-ACK callback enabled: its SYN-ACKs carry no ENO, and the new socket's record says the
/// SYN is unknown (`SynNotSaved`) without ENO in the ACK - a legitimate plain fallback (the
/// daemon resets only when the ACK carried ENO). Records are per socket: deleting one leaves
/// another connection's record alone.
#[test]
fn listener_before_attach_and_per_socket_records() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x23] }).unwrap();
    let mut b = None;
    let (mut c, _l) = connect(&lab, 7006, |_| {
        b = Some(EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x23] }).unwrap());
    });
    let b = b.unwrap();
    exchange(&mut c);
    let (ra, rb) = records(&a, Some(&b), &c);
    let rb = rb.unwrap();
    eprintln!("A: {ra:?}\nB: {rb:?}");
    assert_eq!(ra.fallback, Some(EnoFallback::SynAckWithoutEno));
    assert!(rb.passive && !rb.ack_had_eno && rb.complete);
    assert_eq!(rb.fallback, Some(EnoFallback::SynNotSaved));
    // A second connection through a listener created after attach negotiates; deleting the
    // first connection's records does not touch the second's.
    let (mut c2, _l2) = connect(&lab, 7007, |_| {});
    exchange(&mut c2);
    a.forget(c.client.as_fd()).unwrap();
    b.forget(c.server.as_fd()).unwrap();
    assert!(a.record(c.client.as_fd()).unwrap().is_none() && b.record(c.server.as_fd()).unwrap().is_none());
    let (ra2, rb2) = records(&a, Some(&b), &c2);
    assert!(ra2.encrypted() && rb2.unwrap().encrypted());
}

/// RFC 8548 §3.5 through the program: a SYN whose resumption suboption names a half in B's
/// `eno_resume` map gets a SYN-ACK that resumes (B's half, empty nonce_b), and only once (the
/// entry is deleted when the connection is established: the same SYN again gets a fresh TEP);
/// an override that does not fit in the SYN's 20 free bytes gives the configured TEPs (a fresh
/// key exchange), not a SYN without ENO.
#[test]
fn resumption_from_the_map_single_use_and_oversized_override_falls_back() {
    require_root!();
    let _g = lock();
    let lab = Lab::new();
    let a = EnoBpf::attach(&lab.cg_a, &EnoConfig { teps: vec![0x21] }).unwrap();
    let b = EnoBpf::attach(&lab.cg_b, &EnoConfig { teps: vec![0x23, 0x21] }).unwrap();
    let (half_a, half_b) = ([1u8, 2, 3, 4, 5, 6, 7, 8, 9], [0x91u8, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99]);
    b.accept_resume(0x23, &half_a, &half_b).unwrap();
    let mut opt = vec![69, 20, 0xa3];
    opt.extend_from_slice(&half_a);
    opt.extend_from_slice(&[0xee; 8]); // nonce_a
    let mut resumed = vec![69, 13, 0x01, 0xa3];
    resumed.extend_from_slice(&half_b);
    let cap = Capture::start();

    let (mut c, _l) = connect(&lab, 7010, |fd| a.set_syn_option(fd.as_fd(), &opt).unwrap());
    exchange(&mut c);
    let segs = cap.segments(7010);
    let d = dump(&segs);
    assert_eq!(segs[0].eno(), vec![&opt], "{d}");
    assert_eq!(segs[1].eno(), vec![&resumed], "{d}");
    assert_eq!(segs[2].eno(), vec![&vec![69, 2]], "{d}");
    let (ra, rb) = records(&a, Some(&b), &c);
    let rb = rb.unwrap();
    assert_eq!((&ra.syn_option, &ra.synack_option), (&opt, &resumed));
    assert_eq!(ra.transcript(), rb.transcript());
    assert!(ra.encrypted() && rb.encrypted());

    // single use: the same offer again gets a fresh key exchange's TEP
    let (mut c, _l) = connect(&lab, 7011, |fd| a.set_syn_option(fd.as_fd(), &opt).unwrap());
    exchange(&mut c);
    let segs = cap.segments(7011);
    let d = dump(&segs);
    assert_eq!(segs[1].eno(), vec![&vec![69, 4, 0x01, 0x23]], "{d}");
    let (_, rb) = records(&a, Some(&b), &c);
    assert_eq!(rb.unwrap().synack_option, vec![69, 4, 0x01, 0x23]);

    // 24 bytes do not fit next to MSS/SACK/TS/WS (20): the configured TEPs go out instead
    let mut big = vec![69, 24, 0xa3];
    big.extend_from_slice(&[7u8; 21]);
    let (mut c, _l) = connect(&lab, 7012, |fd| a.set_syn_option(fd.as_fd(), &big).unwrap());
    exchange(&mut c);
    let segs = cap.segments(7012);
    let d = dump(&segs);
    assert_eq!(segs[0].eno(), vec![&vec![69, 3, 0x21]], "{d}");
    assert_eq!(segs[1].eno(), vec![&vec![69, 4, 0x01, 0x21]], "{d}");
    let (ra, rb) = records(&a, Some(&b), &c);
    assert!(!ra.overridden && ra.fallback.is_none(), "{ra:?}");
    assert_eq!(ra.syn_option, vec![69, 3, 0x21]);
    assert_eq!(ra.transcript(), rb.unwrap().transcript());
    assert!(ra.encrypted());
}
