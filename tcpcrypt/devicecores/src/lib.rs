//! A node's device cores, as wearlab's devicecpu library claims them (src/devicecpu/
//! wearlab_devicecpu.c, `struct cores_file`; wearlab.nodes.devicecpu.NodeCpu makes the file, one
//! per node): per core, until when it is busy, in nanoseconds on the node's clock - the TSC times
//! 1e9 / the node's TSC rate, which the file holds (CLOCK_MONOTONIC where it holds none). Every
//! process of the node with the library and the node's tcpcryptd (`--device-cores`) map the one
//! file and claim the device's time on it with a compare-and-swap, so their work queues onto the
//! device's cores.
//!
//! This crate holds the unsafe code that needs - mapping the file, atomics on the mapping,
//! reading the TSC, reading CLOCK_MONOTONIC - behind a safe API, so tcpcryptd keeps
//! `#![forbid(unsafe_code)]`.
//!
//! Layout (little-endian, C's natural alignment): magic `WLCORE1\0` (8 bytes), cores (u32),
//! reserved (u32), TSC rate in Hz (f64), then 64 x busy-until (i64 ns).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};

/// The file's first 8 bytes.
pub const MAGIC: &[u8; 8] = b"WLCORE1\0";
/// Cores a file holds at most.
pub const MAX_CORES: usize = 64;
const HEADER: usize = 24;
/// The file's size.
pub const SIZE: usize = HEADER + MAX_CORES * 8;

/// A node's cores file, mapped.
pub struct NodeCores {
    map: NonNull<u8>,
    cores: usize,
    ns_per_tick: f64,
}

// SAFETY: the mapping is shared memory that this type only touches through atomics (the busy-until
// slots); the header is read once, from the file, before mapping. Nothing in it is tied to a thread.
unsafe impl Send for NodeCores {}
// SAFETY: as for Send: every access through a shared reference is atomic.
unsafe impl Sync for NodeCores {}

impl NodeCores {
    /// Map the cores file at `path` (made by wearlab; this never creates one).
    pub fn open(path: &Path) -> io::Result<NodeCores> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        let mut file = OpenOptions::new().read(true).write(true).open(path)?;
        let mut header = [0u8; HEADER];
        file.read_exact(&mut header).map_err(|_| bad("shorter than a node's cores file"))?;
        if &header[..8] != MAGIC {
            return Err(bad("not a node's cores file (wearlab.nodes.devicecpu.NodeCpu makes them)"));
        }
        let cores = u32::from_le_bytes(header[8..12].try_into().unwrap()) as usize;
        let hz = f64::from_le_bytes(header[16..24].try_into().unwrap());
        if !(1..=MAX_CORES).contains(&cores) {
            return Err(bad(&format!("{cores} cores (1 to {MAX_CORES})")));
        }
        if file.metadata()?.len() < SIZE as u64 {
            return Err(bad("shorter than a node's cores file"));
        }
        // SAFETY: a fresh shared read-write mapping of SIZE bytes of a file at least that long; the
        // fd may be closed afterwards (the mapping keeps the file). Checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), SIZE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED,
                       file.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(p.cast::<u8>()).ok_or_else(|| bad("mapped at null"))?;
        let ns_per_tick = if hz > 1e8 && tsc_available() { 1e9 / hz } else { 0.0 };
        Ok(NodeCores { map, cores, ns_per_tick })
    }

    /// The device's cores.
    pub fn cores(&self) -> usize {
        self.cores
    }

    fn slot(&self, i: usize) -> &AtomicI64 {
        assert!(i < self.cores);
        // SAFETY: i < cores <= MAX_CORES, so the 8 bytes at HEADER + 8 i lie inside the SIZE-byte
        // mapping, which is page-aligned, so they are 8-aligned; the mapping lives as long as
        // self, and every process touches these bytes only atomically (C11 atomics in the library).
        unsafe { AtomicI64::from_ptr(self.map.as_ptr().add(HEADER + 8 * i).cast::<i64>()) }
    }

    /// Now, on the node's clock (ns): what the library computes from the same TSC and rate.
    pub fn now_ns(&self) -> i64 {
        if self.ns_per_tick > 0.0 {
            (rdtsc() as f64 * self.ns_per_tick) as i64
        } else {
            monotonic_ns()
        }
    }

    /// Work of `device` ns that its thread is ready to start at `ready` (node clock): claimed on
    /// the core that suits it best - the one that became free last before `ready`, else the one
    /// that frees up first - as the library does. Returns (when it ends, how long it waited).
    pub fn claim(&self, ready: i64, device: i64) -> (i64, i64) {
        loop {
            let (mut fit, mut fit_b, mut first, mut first_b) = (None, 0i64, 0usize, i64::MAX);
            for i in 0..self.cores {
                let b = self.slot(i).load(Ordering::Acquire);
                if b <= ready {
                    if fit.is_none() || b > fit_b {
                        fit = Some(i);
                        fit_b = b;
                    }
                } else if b < first_b {
                    first = i;
                    first_b = b;
                }
            }
            let (i, b) = match fit {
                Some(i) => (i, fit_b),
                None => (first, first_b),
            };
            let start = b.max(ready);
            if self.slot(i).compare_exchange(b, start + device, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return (start + device, start - ready);
            }
        }
    }
}

impl Drop for NodeCores {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open(), SIZE bytes, unmapped once; no reference into it
        // outlives self (slot() borrows self).
        unsafe {
            libc::munmap(self.map.as_ptr().cast(), SIZE);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn tsc_available() -> bool {
    true
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_available() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads a counter; every x86-64 CPU has it and it has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0
}

/// CLOCK_MONOTONIC in ns (std's Instant hides its epoch; the library compares absolute values).
#[allow(clippy::unnecessary_cast)] // time_t and c_long are i32 on 32-bit targets
fn monotonic_ns() -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `t`.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
    }
    t.tv_sec as i64 * 1_000_000_000 + t.tv_nsec as i64
}

/// Write a cores file as wearlab does (for tests: wearlab.nodes.devicecpu.NodeCpu makes the real ones).
pub fn create(path: &Path, cores: u32, tsc_hz: f64) -> io::Result<()> {
    let mut data = vec![0u8; SIZE];
    data[..8].copy_from_slice(MAGIC);
    data[8..12].copy_from_slice(&cores.to_le_bytes());
    data[16..24].copy_from_slice(&tsc_hz.to_le_bytes());
    std::fs::write(path, data)
}

/// A cores file of this process in the temporary directory, removed when dropped, whether the
/// test that made it passed or not (for tests: `create` at `wearlab-devicecores-<pid>-<name>`).
pub struct TempCores(PathBuf);

impl TempCores {
    /// Make it (`create`'s fields).
    pub fn create(name: &str, cores: u32, tsc_hz: f64) -> io::Result<TempCores> {
        let t = TempCores(std::env::temp_dir().join(format!("wearlab-devicecores-{}-{name}", std::process::id())));
        create(&t.0, cores, tsc_hz)?;
        Ok(t)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempCores {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, cores: u32) -> TempCores {
        TempCores::create(name, cores, 0.0).unwrap()
    }

    #[test]
    fn one_core_queues_what_two_claim_at_once() {
        let c = NodeCores::open(file("one", 1).path()).unwrap();
        assert_eq!(c.claim(1000, 500), (1500, 0));
        // ready at 1200, the core is busy until 1500: it waits 300
        assert_eq!(c.claim(1200, 500), (2000, 300));
    }

    #[test]
    fn four_cores_take_four_at_once_and_queue_the_fifth() {
        let c = NodeCores::open(file("four", 4).path()).unwrap();
        for _ in 0..4 {
            assert_eq!(c.claim(0, 100), (100, 0));
        }
        assert_eq!(c.claim(0, 100), (200, 100));
        // ready later than every core frees up: no wait, on the core free last
        assert_eq!(c.claim(500, 10), (510, 0));
    }

    #[test]
    fn two_mappings_share_the_cores() {
        let p = file("shared", 1);
        let (a, b) = (NodeCores::open(p.path()).unwrap(), NodeCores::open(p.path()).unwrap());
        assert_eq!(a.claim(0, 100), (100, 0));
        assert_eq!(b.claim(0, 100), (200, 100));
    }

    #[test]
    fn refuses_what_is_not_a_cores_file() {
        let t = file("bad", 1);
        let p = t.path();
        std::fs::write(p, vec![0u8; SIZE]).unwrap();
        assert!(NodeCores::open(p).is_err());
        create(p, 65, 0.0).unwrap();
        assert!(NodeCores::open(p).is_err());
    }

    #[test]
    fn the_tsc_clock_is_the_librarys() {
        let t = TempCores::create("tsc", 2, 2.0e9).unwrap();
        let c = NodeCores::open(t.path()).unwrap();
        let (t0, t1) = (c.now_ns(), c.now_ns());
        assert!(t1 >= t0);
        if tsc_available() {
            assert!(((rdtsc() as f64 * 0.5) as i64 - c.now_ns()).abs() < 1_000_000);
        }
    }
}
