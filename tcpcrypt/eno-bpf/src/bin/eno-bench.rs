//! `eno-bench [connections] [rounds]`: connection rate over a veth pair between two network
//! namespaces it creates (enobench-a 10.98.0.1, enobench-b 10.98.0.2; deleted at the end),
//! with and without the TCP-ENO program attached to both sides' cgroups. Each connection is
//! connect + accept + 1 byte each way + close. Needs root and cgroup v2.
#![deny(unsafe_code)]
use std::{
    fs,
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, TcpStream},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use tcpcrypt_eno_bpf::{EnoBpf, EnoConfig};

const IP_B: Ipv4Addr = Ipv4Addr::new(10, 98, 0, 2);

fn sh(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).status().map(|s| s.success()).unwrap_or(false)
}

fn setns(ns: &str) {
    let f = fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    // SAFETY: setns(2) on an fd that `f` keeps open for the call; it changes only this
    // thread's network namespace and touches no memory of ours.
    #[allow(unsafe_code)]
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0);
}

fn join(cg: &Path) {
    fs::write(cg.join("cgroup.procs"), std::process::id().to_string()).unwrap();
}

fn cg_root() -> PathBuf {
    let m = fs::read_to_string("/proc/mounts").unwrap();
    m.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
        .expect("cgroup2 mount")
}

fn run(n: usize, port: u16, cg_a: &Path, cg_b: &Path, home: &Path) -> f64 {
    join(cg_b);
    let l = std::thread::scope(|_| {
        let h = std::thread::spawn(move || {
            setns("enobench-b");
            TcpListener::bind((IP_B, port)).unwrap()
        });
        h.join().unwrap()
    });
    let server = std::thread::spawn(move || {
        for _ in 0..n {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    join(cg_a);
    let cg_home = home.to_path_buf();
    let client = std::thread::spawn(move || {
        setns("enobench-a");
        let t0 = Instant::now();
        for _ in 0..n {
            let mut c = TcpStream::connect((IP_B, port)).unwrap();
            c.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
        }
        let dt = t0.elapsed().as_secs_f64();
        join(&cg_home);
        dt
    });
    let dt = client.join().unwrap();
    server.join().unwrap();
    n as f64 / dt
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3000);
    let rounds: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    sh("ip netns del enobench-a 2>/dev/null; ip netns del enobench-b 2>/dev/null; true");
    assert!(sh("set -e; ip netns add enobench-a; ip netns add enobench-b; \
        ip link add enb-va netns enobench-a type veth peer name enb-vb netns enobench-b; \
        ip -n enobench-a addr add 10.98.0.1/24 dev enb-va; ip -n enobench-b addr add 10.98.0.2/24 dev enb-vb; \
        ip -n enobench-a link set enb-va up; ip -n enobench-b link set enb-vb up; \
        ip netns exec enobench-a sysctl -qw net.ipv4.tcp_tw_reuse=1 net.ipv4.ip_local_port_range='10000 65001'"));
    let root = cg_root();
    let own = fs::read_to_string("/proc/self/cgroup")?;
    let home = root.join(own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/").trim().trim_start_matches('/'));
    let (cg_a, cg_b) = (root.join("enobench-a"), root.join("enobench-b"));
    let _ = fs::create_dir(&cg_a);
    let _ = fs::create_dir(&cg_b);
    let cfg = EnoConfig { teps: vec![0x21, 0x22, 0x23, 0x24] };
    let mut port = 9000;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        port += 1;
        let x = run(n, port, &cg_a, &cg_b, &home);
        off.push(x);
        let a = EnoBpf::attach(&cg_a, &cfg)?;
        let b = EnoBpf::attach(&cg_b, &cfg)?;
        port += 1;
        let y = run(n, port, &cg_a, &cg_b, &home);
        on.push(y);
        // with `sysctl kernel.bpf_stats_enabled=1`: invocations and ns spent in the program
        sh("command -v bpftool >/dev/null && bpftool prog show name eno_sockops | grep -o 'run_time_ns [0-9]* run_cnt [0-9]*'");
        drop((a, b));
        println!("round {r}: without {x:.0} conn/s, with ENO {y:.0} conn/s");
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (mo, mn) = (med(&mut off), med(&mut on));
    println!("median over {rounds} rounds of {n} connections: without {mo:.0} conn/s, with ENO {mn:.0} conn/s ({:+.1}%)", (mn / mo - 1.0) * 100.0);
    join(&home);
    let _ = fs::remove_dir(&cg_a);
    let _ = fs::remove_dir(&cg_b);
    sh("ip netns del enobench-a; ip netns del enobench-b");
    Ok(())
}
