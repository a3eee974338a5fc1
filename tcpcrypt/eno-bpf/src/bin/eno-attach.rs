//! `eno-attach <cgroup-v2-dir> [tep ...]`: attach the TCP-ENO sock_ops program to a cgroup
//! and hold the link until killed (for tests, benchmarks and manual experiments; the daemon
//! uses the library directly). TEPs are hex or decimal ids, default 0x21 0x22 0x23 0x24.
//! Prints `attached` on stdout once the program is live.
#![deny(unsafe_code)]
use std::{io::Write, path::PathBuf};

use tcpcrypt_eno_bpf::{EnoBpf, EnoConfig};

fn parse_tep(s: &str) -> anyhow::Result<u8> {
    Ok(match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16)?,
        None => s.parse()?,
    })
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or_else(|| {
        anyhow::anyhow!("usage: eno-attach <cgroup-v2-dir> [tep ...]")
    })?);
    let mut teps = args.map(|a| parse_tep(&a)).collect::<anyhow::Result<Vec<u8>>>()?;
    if teps.is_empty() {
        teps = vec![0x21, 0x22, 0x23, 0x24];
    }
    let _eno = EnoBpf::attach(&dir, &EnoConfig { teps })?;
    println!("attached");
    std::io::stdout().flush()?;
    loop {
        std::thread::park();
    }
}
