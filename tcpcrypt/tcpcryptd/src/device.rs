//! A device's time for the daemon's cryptography (`tcpcryptd run --device-profile FILE`).
//!
//! wearlab gives a node a device (its `device:` in the topology) and writes the device's profile
//! (wearlab.model.devices.Device.profile_text: one line per operation, nanoseconds); its
//! OpenSSL users get the time through an LD_PRELOAD library, and this daemon - pure Rust, no
//! OpenSSL - pads its own operations from the same profile: the ephemeral key pair and the key
//! agreement of its TEP (`keygen:x25519`, `derive:p256`, ...), the key schedule's HMAC-SHA256
//! (`digest:sha256`) and every frame's AEAD seal and open per byte (`cipher:aes-128-gcm`, ...).
//!
//! How, as the library does: each operation is timed on the wall clock, the device's time minus
//! what it took here is owed, and the debt is paid by sleeping the calling thread before what was
//! computed leaves (a late wake-up is credited to what follows, at most 50 ms). The pacer is one
//! for the daemon - one thread of computation for all its connections: while it "computes"
//! nothing else of the daemon runs (the guest gives tokio one worker). With the node's cores file
//! (`--device-cores`, wearlab.nodes.devicecpu.NodeCpu; the wearlab-devicecores crate) that
//! computation also queues onto the device's cores with the node's other processes, as the
//! library's do: the daemon's work starts when a core is free. An operation the profile lacks
//! costs its time here times the device's CPU factor.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tcpcrypt_proto::{Aead, Stats, Tep};
use wearlab_devicecores::NodeCores;

/// What a key exchange's key schedule hashes, in SHA-256 input bytes: the HKDF-Extract of
/// RFC 8548 section 3.4 over the transcript and both Init messages (~300 bytes) and about ten
/// HMAC-SHA256 expansions for the master key, session ID, resumption secret and the two traffic
/// keys, each two 64-byte key blocks and one of input. An estimate (RFC 8548's messages, counted
/// by hand), ~0.25 % of a watch's key agreement.
pub const KEY_SCHEDULE_SHA256_BYTES: u64 = 300 + 10 * 3 * 64;

/// One operation's device time: a fixed time (size 0) or a table of (bytes, ns).
#[derive(Debug, Clone)]
struct Cost {
    points: Vec<(f64, f64)>,
}

impl Cost {
    fn ns(&self, bytes: f64) -> f64 {
        let p = &self.points;
        if p.len() == 1 && p[0].0 == 0.0 {
            return p[0].1;
        }
        if p.len() == 1 || bytes <= p[0].0 {
            return p[0].1 * bytes / p[0].0;
        }
        for w in p.windows(2) {
            let ((s0, t0), (s1, t1)) = (w[0], w[1]);
            if bytes <= s1 {
                return t0 + (t1 - t0) * (bytes - s0) / (s1 - s0);
            }
        }
        let ((s0, t0), (s1, t1)) = (p[p.len() - 2], p[p.len() - 1]);
        t1 + (t1 - t0) * (bytes - s1) / (s1 - s0)
    }
}

/// A device profile as wearlab writes it.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The device's name.
    pub name: String,
    costs: HashMap<String, Cost>,
    cpu_factor: f64,
}

impl Profile {
    /// Parse a profile file (`device`, `cpu_factor`, `op KEY NS`, `bytes KEY SIZE:NS ...`).
    pub fn load(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read_to_string(path).with_context(|| format!("device profile {}", path.display()))?;
        Profile::parse(&text).with_context(|| format!("device profile {}", path.display()))
    }

    /// Parse a profile's text.
    pub fn parse(text: &str) -> anyhow::Result<Profile> {
        let mut p = Profile { name: String::new(), costs: HashMap::new(), cpu_factor: 1.0 };
        for (i, line) in text.lines().enumerate() {
            let w: Vec<&str> = line.split_whitespace().collect();
            let n = i + 1;
            match w.as_slice() {
                [] => {}
                [c, ..] if c.starts_with('#') => {}
                ["device", name] => p.name = name.to_string(),
                ["cpu_factor", v] => p.cpu_factor = v.parse().with_context(|| format!("line {n}: cpu_factor"))?,
                // a TLS stack's platform costs: not tcpcrypt's
                ["handshake_ns", _] | ["resumed_handshake_ns", _] | ["abbreviated_handshake_ns", _] => {}
                ["op", key, ns] => {
                    let ns: f64 = ns.parse().with_context(|| format!("line {n}: {key}"))?;
                    p.costs.insert(key.to_string(), Cost { points: vec![(0.0, ns)] });
                }
                ["bytes", key, pts @ ..] if !pts.is_empty() => {
                    let mut points = Vec::new();
                    for pt in pts {
                        let (s, t) = pt.split_once(':').with_context(|| format!("line {n}: {pt} is not SIZE:NS"))?;
                        points.push((s.parse().with_context(|| format!("line {n}: {pt}"))?,
                                     t.parse().with_context(|| format!("line {n}: {pt}"))?));
                    }
                    p.costs.insert(key.to_string(), Cost { points });
                }
                _ => bail!("line {n}: not a profile line: {line:?}"),
            }
        }
        if p.cpu_factor < 1.0 {
            bail!("cpu_factor {} is below 1", p.cpu_factor);
        }
        Ok(p)
    }

    /// The device's time for `key` on `bytes` (0 for a key operation), if the profile has it.
    pub fn ns(&self, key: &str, bytes: u64) -> Option<f64> {
        self.costs.get(key).map(|c| c.ns(bytes as f64))
    }
}

/// The profile's name of a TEP's key type.
pub fn tep_key(tep: Tep) -> &'static str {
    match tep.id() {
        0x21 => "p256",
        0x22 => "p521",
        0x23 => "x25519",
        _ => "x448",
    }
}

/// The profile's name of an AEAD.
pub fn aead_key(aead: Aead) -> &'static str {
    match aead {
        Aead::Aes128Gcm => "cipher:aes-128-gcm",
        Aead::Aes256Gcm => "cipher:aes-256-gcm",
        Aead::ChaCha20Poly1305 => "cipher:chacha20-poly1305",
    }
}

const CREDIT_MAX_NS: i64 = 50_000_000;
const IDLE_MIN_NS: i64 = 1_000_000;

/// What the device computed, for the daemon's stats (device nanoseconds per operation key).
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// key -> (calls, bytes, device ns)
    pub ops: HashMap<String, (u64, u64, u64)>,
}

/// The daemon's one pacer: device time owed, paid by sleeping.
pub struct Pacer {
    profile: Profile,
    cores: Option<NodeCores>,
    state: Mutex<(i64, Totals, Option<Instant>)>,
}

impl Pacer {
    /// A pacer for `profile`, the daemon computing on a core of its own.
    pub fn new(profile: Profile) -> Pacer {
        Pacer { profile, cores: None, state: Mutex::new((0, Totals::default(), None)) }
    }

    /// A pacer for `profile` on the node's cores (the cores file every process of the node shares).
    pub fn on_cores(profile: Profile, cores: NodeCores) -> Pacer {
        Pacer { profile, cores: Some(cores), state: Mutex::new((0, Totals::default(), None)) }
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Operations done here since `started`, whose device time is `ops` (key, bytes, calls):
    /// owe the difference and pay it once it is worth a sleep.
    pub fn charge(&self, started: Instant, ops: &[(String, u64, u64)]) -> u64 {
        let spent = started.elapsed().as_nanos() as i64;
        let mut device = 0.0;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for (key, bytes, calls) in ops {
            if *calls == 0 {
                continue;
            }
            let per_call = *bytes / *calls;
            let ns = match self.profile.ns(key, per_call) {
                Some(t) => t * *calls as f64,
                None => spent as f64 * self.profile.cpu_factor / ops.len() as f64,
            };
            device += ns;
            let e = st.1.ops.entry(key.clone()).or_default();
            e.0 += calls;
            e.1 += bytes;
            e.2 += ns as u64;
        }
        // Credit is lateness (a late wake-up, a preemption): waiting for the network absorbs it,
        // as the device would have waited too, so a pause of a millisecond or more since the last
        // charge takes it away and it never carries into a later connection.
        if let (true, Some(idle_from)) = (st.0 < 0, st.2) {
            let idle = started.saturating_duration_since(idle_from).as_nanos() as i64;
            if idle >= IDLE_MIN_NS {
                st.0 = (st.0 + idle).min(0);
            }
        }
        match &self.cores {
            // The daemon was ready for this work `spent` ago plus what it still owed; it runs
            // when one of the device's cores is free, and what is owed runs to its end there.
            Some(cores) if device >= 1.0 => {
                let now = cores.now_ns();
                let (end, queued) = cores.claim(now - spent + st.0, device as i64);
                st.0 = (end - now).max(-CREDIT_MAX_NS);
                if queued > 0 {
                    let e = st.1.ops.entry("cores:queued".to_string()).or_default();
                    e.0 += 1;
                    e.2 += queued as u64;
                }
            }
            _ => st.0 = (st.0 + device as i64 - spent).max(-CREDIT_MAX_NS),
        }
        // Every charge precedes what the daemon sends or delivers: pay all that is owed.
        if st.0 > 0 {
            let want = st.0;
            let t0 = Instant::now();
            std::thread::sleep(Duration::from_nanos(want as u64));
            st.0 = (st.0 - t0.elapsed().as_nanos() as i64).max(-CREDIT_MAX_NS);
        }
        st.2 = Some(Instant::now());
        device as u64
    }

    /// What the device computed so far.
    pub fn totals(&self) -> Totals {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1.clone()
    }
}

/// The operations a session did between two snapshots of its counters: frames sealed and opened
/// (per-byte AEAD at the frames' mean size), and - when it became established by a fresh key
/// exchange - the agreement and the key schedule.
pub fn session_ops(before: &Stats, after: &Stats, aead: Option<Aead>, tep: Tep, agreed: bool) -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    if agreed {
        out.push((format!("derive:{}", tep_key(tep)), 0, 1));
        out.push(("digest:sha256".to_string(), KEY_SCHEDULE_SHA256_BYTES, 1));
    }
    if let Some(a) = aead {
        let sealed = (after.frames_sent - before.frames_sent, after.plaintext_sent - before.plaintext_sent);
        let opened = (after.frames_received - before.frames_received, after.plaintext_received - before.plaintext_received);
        for (frames, bytes) in [sealed, opened] {
            if frames > 0 {
                out.push((aead_key(a).to_string(), bytes, frames));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How late a sleeping thread may wake on a busy 2-core machine: cargo runs these tests in
    /// parallel threads, so up to four pacer threads and the other tests share two cores, and a
    /// woken thread can wait a scheduler slice (CFS: 3-6 ms on 2 cores) before it runs. CI saw
    /// 4.7 ms. Still far from the next-wrong answer in each test (half or double the device time).
    const WAKE_SLACK: f64 = 0.008;

    const PROFILE: &str = "# test\ndevice w\ncpu_factor 4\nhandshake_ns 1000\nop derive:x25519 3860000\n\
                           bytes cipher:aes-128-gcm 16:758 64:3274 256:12117 1024:40499 8192:411219\n";

    #[test]
    fn parses_and_interpolates_as_wearlab_does() {
        let p = Profile::parse(PROFILE).unwrap();
        assert_eq!(p.name, "w");
        assert_eq!(p.ns("derive:x25519", 0), Some(3_860_000.0));
        assert_eq!(p.ns("cipher:aes-128-gcm", 8192), Some(411_219.0));
        // between points, and beyond the last at its slope
        let mid = p.ns("cipher:aes-128-gcm", 4608).unwrap();
        assert!((mid - (40499.0 + (411219.0 - 40499.0) * (4608.0 - 1024.0) / 7168.0)).abs() < 1e-6);
        let big = p.ns("cipher:aes-128-gcm", 16384).unwrap();
        assert!((big - (411219.0 + (411219.0 - 40499.0) * 8192.0 / 7168.0)).abs() < 1e-6);
        assert_eq!(p.ns("cipher:aes-256-gcm", 10), None);
    }

    #[test]
    fn rejects_a_bad_line() {
        assert!(Profile::parse("bytes cipher:x 16-758\n").is_err());
        assert!(Profile::parse("cpu_factor 0.5\n").is_err());
    }

    #[test]
    fn pads_to_the_device_time() {
        let pacer = Pacer::new(Profile::parse(PROFILE).unwrap());
        let t0 = Instant::now();
        for _ in 0..10 {
            pacer.charge(Instant::now(), &[("derive:x25519".into(), 0, 1)]);
        }
        let took = t0.elapsed().as_secs_f64();
        // 10 x 3.86 ms, paid by sleeping; a late wake-up is credited to the next one
        assert!((0.0386..0.0386 * 1.15 + WAKE_SLACK).contains(&took), "{took}");
        assert_eq!(pacer.totals().ops["derive:x25519"].0, 10);
    }

    #[test]
    fn reads_the_resumed_handshake_line() {
        assert!(Profile::parse("handshake_ns 1000\nresumed_handshake_ns 500\nabbreviated_handshake_ns 0\n").is_ok());
    }

    fn cores_file(name: &str, cores: u32) -> wearlab_devicecores::TempCores {
        wearlab_devicecores::TempCores::create(&format!("tcpcryptd-{name}"), cores, 0.0).unwrap()
    }

    /// Two daemons' pacers (two processes of one node, say) on a one-core device: each charging
    /// 5 x 3.86 ms at once, they take the device's time for all ten, 38.6 ms, not 19.3.
    #[test]
    fn one_core_queues_two_pacers() {
        let p = cores_file("one", 1);
        let pacers: Vec<_> = (0..2)
            .map(|_| std::sync::Arc::new(Pacer::on_cores(Profile::parse(PROFILE).unwrap(), NodeCores::open(p.path()).unwrap())))
            .collect();
        let t0 = Instant::now();
        let threads: Vec<_> = pacers
            .iter()
            .cloned()
            .map(|pacer| {
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        pacer.charge(Instant::now(), &[("derive:x25519".into(), 0, 1)]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let took = t0.elapsed().as_secs_f64();
        assert!((0.0386 * 0.9..0.0386 * 1.1 + WAKE_SLACK).contains(&took), "{took}");
        let queued: u64 = pacers.iter().map(|p| p.totals().ops.get("cores:queued").map_or(0, |e| e.2)).sum();
        assert!(queued > 0);
    }

    /// On four cores the same two take the time of one pacer's work: 19.3 ms.
    #[test]
    fn four_cores_run_two_pacers_at_once() {
        let p = cores_file("four", 4);
        let t0 = Instant::now();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let pacer = Pacer::on_cores(Profile::parse(PROFILE).unwrap(), NodeCores::open(p.path()).unwrap());
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        pacer.charge(Instant::now(), &[("derive:x25519".into(), 0, 1)]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let took = t0.elapsed().as_secs_f64();
        assert!((0.0193 * 0.9..0.0193 * 1.1 + WAKE_SLACK).contains(&took), "{took}");
    }
}
