//! The daemon's iptables rules: its own nat chains, named with a prefix so that cleanup
//! finds them even after a kill -9.
//!
//! ```text
//! nat OUTPUT     -> <P>_OUT: -m mark --mark M -j RETURN     (the daemon's own sockets)
//!                            -d 127.0.0.0/8 -j RETURN          (local traffic)
//!                            -p tcp [--dport D] -j REDIRECT --to-ports <out>
//! nat PREROUTING -> <P>_IN:  -p tcp --dport S -j REDIRECT --to-ports <in>   (per service port)
//! ```

use std::process::Command;

use anyhow::{bail, Context};

/// What to install.
#[derive(Debug, Clone)]
pub struct Rules {
    /// `iptables` or `iptables-legacy` (the UML guest needs legacy).
    pub iptables: String,
    /// Chain name prefix.
    pub prefix: String,
    /// SO_MARK of the daemon's sockets.
    pub mark: u32,
    /// Outbound redirect port (None: no outbound interception).
    pub out_port: Option<u16>,
    /// Only redirect outbound connections to these destination ports (empty: all TCP).
    pub out_dports: Vec<u16>,
    /// Inbound redirect port.
    pub in_port: Option<u16>,
    /// Service ports whose inbound connections go through the daemon.
    pub service_ports: Vec<u16>,
}

fn run(ipt: &str, args: &[String]) -> anyhow::Result<String> {
    let out = Command::new(ipt).args(args).output().with_context(|| format!("running {ipt}"))?;
    if !out.status.success() {
        bail!("{ipt} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

impl Rules {
    /// Chain for outbound interception.
    pub fn out_chain(&self) -> String {
        format!("{}_OUT", self.prefix)
    }
    /// Chain for inbound interception.
    pub fn in_chain(&self) -> String {
        format!("{}_IN", self.prefix)
    }

    /// Install (after removing leftovers of an earlier run with the same prefix).
    pub fn install(&self) -> anyhow::Result<()> {
        cleanup(&self.iptables, &self.prefix)?;
        let ipt = &self.iptables;
        if let Some(out) = self.out_port {
            let c = self.out_chain();
            run(ipt, &s(&["-t", "nat", "-N", &c]))?;
            run(ipt, &s(&["-t", "nat", "-A", &c, "-m", "mark", "--mark", &format!("{:#x}", self.mark), "-j", "RETURN"]))?;
            run(ipt, &s(&["-t", "nat", "-A", &c, "-d", "127.0.0.0/8", "-j", "RETURN"]))?;
            let to = out.to_string();
            if self.out_dports.is_empty() {
                run(ipt, &s(&["-t", "nat", "-A", &c, "-p", "tcp", "-j", "REDIRECT", "--to-ports", &to]))?;
            }
            for d in &self.out_dports {
                let d = d.to_string();
                run(ipt, &s(&["-t", "nat", "-A", &c, "-p", "tcp", "--dport", &d, "-j", "REDIRECT", "--to-ports", &to]))?;
            }
            run(ipt, &s(&["-t", "nat", "-I", "OUTPUT", "1", "-p", "tcp", "-j", &c]))?;
        }
        if let Some(inp) = self.in_port {
            let c = self.in_chain();
            run(ipt, &s(&["-t", "nat", "-N", &c]))?;
            for p in &self.service_ports {
                let p = p.to_string();
                run(ipt, &s(&["-t", "nat", "-A", &c, "-p", "tcp", "--dport", &p, "-j", "REDIRECT", "--to-ports", &inp.to_string()]))?;
            }
            run(ipt, &s(&["-t", "nat", "-I", "PREROUTING", "1", "-p", "tcp", "-j", &c]))?;
        }
        Ok(())
    }
}

/// Remove every nat chain whose name starts with `prefix`, and the rules jumping to them.
/// Returns what was removed.
pub fn cleanup(iptables: &str, prefix: &str) -> anyhow::Result<Vec<String>> {
    let listing = run(iptables, &s(&["-t", "nat", "-S"]))?;
    let mut removed = Vec::new();
    let ours = |name: &str| name.starts_with(prefix) && name.len() > prefix.len();
    // Jumps first.
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"-A") {
            if let Some(i) = words.iter().position(|w| *w == "-j") {
                if words.get(i + 1).is_some_and(|t| ours(t)) && !words.get(1).is_some_and(|c| ours(c)) {
                    let mut args = s(&["-t", "nat", "-D"]);
                    args.extend(words[1..].iter().map(|w| w.to_string()));
                    run(iptables, &args)?;
                    removed.push(line.to_string());
                }
            }
        }
    }
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"-N") && words.get(1).is_some_and(|c| ours(c)) {
            run(iptables, &s(&["-t", "nat", "-F", words[1]]))?;
            run(iptables, &s(&["-t", "nat", "-X", words[1]]))?;
            removed.push(line.to_string());
        }
    }
    Ok(removed)
}
