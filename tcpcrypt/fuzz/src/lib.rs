//! The bodies of tcpcrypt's AFL++ targets, shared by the `afl::fuzz!` binaries
//! (fuzz_targets/) and by the corpus regression (`cargo test --lib`, src/regress.rs).
//!
//! Every target is `Target::new()` (setup, run once per process: deterministic key exchanges,
//! ticket pools) and `Target::run(&mut self, data)` (one execution; panics = findings).
//! Nothing on a run's path draws from the OS RNG: sessions get [`DetRng`] seeded with
//! constants, so an input always takes the same path (AFL stability) and reproduces.

pub mod crypto;
pub mod eno_diff;
pub mod established;
pub mod legacy;
pub mod resume;
pub mod session;
pub mod successors;

#[cfg(test)]
mod regress;

use rand_core::{CryptoRng, RngCore};

/// A deterministic RNG (SplitMix64) for the targets' sessions. It claims `CryptoRng` only so
/// that tcpcrypt-proto accepts it: fuzzing needs reproducible keys, not secret ones.
#[derive(Clone, Debug)]
pub struct DetRng(u64);

impl DetRng {
    pub fn new(seed: u64) -> Self {
        DetRng(seed)
    }
}

impl RngCore for DetRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for DetRng {}

/// A cursor over the fuzzer's bytes: reads past the end give zeros (and short slices), so
/// every input decodes to some program.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.pos = self.pos.saturating_add(n);
        &self.data[start..end]
    }
    /// Exactly `N` bytes, zero-padded.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let s = self.take(N);
        a[..s.len()].copy_from_slice(s);
        a
    }
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[start..]
    }
}
