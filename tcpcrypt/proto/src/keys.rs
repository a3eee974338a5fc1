//! The key schedule (RFC 8548 §3.3-§3.5, §3.8): HKDF-SHA256 Extract/Expand as Extract and CPRF.
//!
//! HMAC-SHA256 and HKDF (RFC 2104, RFC 5869) are written out here over SHA-256's compression
//! function (`sha2::compress256`) instead of taken from the `hmac`/`hkdf` crates: their keyed
//! states (the ipad/opad-keyed SHA-256 chaining values, which are as good as the key) and
//! HKDF's T(i) blocks do not implement `Zeroize`, and this crate wipes every intermediate that
//! is derived from a secret (RFC 8548 §3.8: keys SHOULD be erased). The known-answer tests
//! (tests/rfc.rs: RFC 4231 HMAC, RFC 5869 HKDF) and a cross-check against the `hkdf` crate
//! keep it honest.

use sha2::digest::generic_array::GenericArray;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::consts::*;
use crate::error::Error;
use crate::suite::{Aead, AeadKey, AE_NONCE_LEN};

/// A 32-byte secret (PRK, ss[i], mk[j]); zeroed on drop. No `PartialEq`: compare with
/// [`subtle::ConstantTimeEq`].
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Secret(pub(crate) [u8; K_LEN]);

impl ConstantTimeEq for Secret {
    fn ct_eq(&self, other: &Self) -> subtle::Choice {
        self.0.ct_eq(&other.0)
    }
}

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Test-only access to a secret's bytes (cargo feature `test-support`: known-answer tests,
/// the fuzz targets, benches). Never enabled in the daemon.
#[cfg(any(test, feature = "test-support"))]
impl Secret {
    /// The bytes (tests and known-answer checks only).
    pub fn expose(&self) -> &[u8; K_LEN] {
        &self.0
    }
    /// A secret from bytes (tests and known-answer checks only).
    pub fn from_bytes(b: [u8; K_LEN]) -> Secret {
        Secret(b)
    }
}

/// The hex of a secret, for the opt-in key log only (`Config::key_log`).
pub(crate) fn secret_hex(s: &Secret) -> Zeroizing<String> {
    Zeroizing::new(crate::hex(&s.0))
}

// ---- SHA-256 / HMAC-SHA256 / HKDF with wiped state -------------------------------------

const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];
const BLOCK: usize = 64;

/// A SHA-256 computation whose chaining value and buffer are zeroed on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
struct Sha256State {
    h: [u32; 8],
    buf: [u8; BLOCK],
    buf_len: usize,
    total: u64,
}

impl Sha256State {
    fn new() -> Self {
        Sha256State { h: SHA256_IV, buf: [0; BLOCK], buf_len: 0, total: 0 }
    }
    fn compress(h: &mut [u32; 8], block: &[u8]) {
        sha2::compress256(h, core::slice::from_ref(GenericArray::from_slice(block)));
    }
    fn update(&mut self, mut data: &[u8]) {
        self.total = self.total.wrapping_add(data.len() as u64);
        if self.buf_len > 0 {
            let n = (BLOCK - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + n].copy_from_slice(&data[..n]);
            self.buf_len += n;
            data = &data[n..];
            if self.buf_len < BLOCK {
                return;
            }
            Self::compress(&mut self.h, &self.buf);
            self.buf_len = 0;
        }
        let mut chunks = data.chunks_exact(BLOCK);
        for block in &mut chunks {
            Self::compress(&mut self.h, block);
        }
        let rest = chunks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buf_len = rest.len();
    }
    fn finalize(mut self) -> Zeroizing<[u8; 32]> {
        let bits = self.total.wrapping_mul(8);
        self.update(&[0x80]);
        while self.buf_len != BLOCK - 8 {
            self.update(&[0]);
        }
        self.update(&bits.to_be_bytes());
        let mut out = Zeroizing::new([0u8; 32]);
        for (o, w) in out.chunks_exact_mut(4).zip(self.h.iter()) {
            o.copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

/// HMAC-SHA256 keyed once (the inner and outer states after the padded key block); both
/// states are zeroed on drop.
#[derive(Clone)]
struct Hmac {
    inner: Sha256State,
    outer: Sha256State,
}

impl Hmac {
    fn new(key: &[u8]) -> Hmac {
        let mut k0 = Zeroizing::new([0u8; BLOCK]);
        if key.len() > BLOCK {
            let mut h = Sha256State::new();
            h.update(key);
            k0[..32].copy_from_slice(&*h.finalize());
        } else {
            k0[..key.len()].copy_from_slice(key);
        }
        let mut pad = Zeroizing::new([0u8; BLOCK]);
        let (mut inner, mut outer) = (Sha256State::new(), Sha256State::new());
        for (p, k) in pad.iter_mut().zip(k0.iter()) {
            *p = k ^ 0x36;
        }
        inner.update(&*pad);
        for (p, k) in pad.iter_mut().zip(k0.iter()) {
            *p = k ^ 0x5c;
        }
        outer.update(&*pad);
        Hmac { inner, outer }
    }
    /// HMAC over the concatenation of `parts`.
    fn mac(&self, parts: &[&[u8]]) -> Zeroizing<[u8; 32]> {
        let mut inner = self.inner.clone();
        for p in parts {
            inner.update(p);
        }
        let ih = inner.finalize();
        let mut outer = self.outer.clone();
        outer.update(&*ih);
        outer.finalize()
    }
}

/// HMAC-SHA256(key, concatenation of `parts`) (RFC 2104), every intermediate wiped.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> Zeroizing<[u8; 32]> {
    Hmac::new(key).mac(parts)
}

/// Extract(salt, IKM) = HMAC-SHA256(salt, IKM).
pub fn extract(salt: &[u8], ikm: &[u8]) -> Secret {
    Secret(*hmac_sha256(salt, &[ikm]))
}

/// CPRF(K, CONST, L) = HKDF-Expand-SHA256(K, CONST, L) (RFC 5869 §2.3); `info` is
/// concatenated. T(i) blocks are wiped.
pub fn cprf(key: &Secret, info: &[&[u8]], out: &mut [u8]) -> Result<(), Error> {
    if out.len() > 255 * 32 {
        return Err(Error::Internal("OKM length"));
    }
    let h = Hmac::new(&key.0);
    let mut t: Zeroizing<[u8; 32]> = Zeroizing::new([0; 32]);
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let ctr = [(i + 1) as u8];
        let prev: &[u8] = if i == 0 { &[] } else { &t[..] };
        let mut parts: Vec<&[u8]> = Vec::with_capacity(info.len() + 2);
        parts.push(prev);
        parts.extend_from_slice(info);
        parts.push(&ctr);
        let next = h.mac(&parts);
        drop(parts);
        *t = *next;
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
    Ok(())
}

fn cprf32(key: &Secret, info: &[&[u8]]) -> Secret {
    let mut s = [0u8; K_LEN];
    // 32 <= 255*32 and the PRK has the hash length: cannot fail.
    let _ = cprf(key, info, &mut s);
    Secret(s)
}

/// PRK = Extract(N_A, eno_transcript | Init1 | Init2 | ES)  (§3.3).
pub fn prk(n_a: &[u8], transcript: &[u8], init1: &[u8], init2: &[u8], es: &[u8]) -> Secret {
    let mut ikm = Zeroizing::new(Vec::with_capacity(transcript.len() + init1.len() + init2.len() + es.len()));
    ikm.extend_from_slice(transcript);
    ikm.extend_from_slice(init1);
    ikm.extend_from_slice(init2);
    ikm.extend_from_slice(es);
    extract(n_a, &ikm)
}

/// ss[i] = CPRF(ss[i-1], CONST_NEXTK, K_LEN)  (§3.3).
pub fn next_session_secret(ss: &Secret) -> Secret {
    cprf32(ss, &[&[CONST_NEXTK]])
}

/// mk[0] = CPRF(ss[i], CONST_REKEY | sn[i], K_LEN)  (§3.3).
pub fn first_master_key(ss: &Secret, sn: &[u8]) -> Secret {
    cprf32(ss, &[&[CONST_REKEY], sn])
}

/// mk[j] = CPRF(mk[j-1], CONST_REKEY, K_LEN)  (§3.3, §3.8).
pub fn next_master_key(mk: &Secret) -> Secret {
    cprf32(mk, &[&[CONST_REKEY]])
}

/// session_id[i] = TEP-byte | CPRF(ss[i], CONST_SESSID | sn[i], K_LEN)  (§3.4).
pub fn session_id(tep_byte: u8, ss: &Secret, sn: &[u8]) -> Vec<u8> {
    let mut id = vec![0u8; 1 + K_LEN];
    id[0] = tep_byte;
    let _ = cprf(ss, &[&[CONST_SESSID], sn], &mut id[1..]);
    id
}

/// resume[i] = CPRF(ss[i], CONST_RESUME, 18)  (§3.5).
pub fn resume_id(ss: &Secret) -> [u8; RESUME_ID_LEN] {
    let mut r = [0u8; RESUME_ID_LEN];
    let _ = cprf(ss, &[&[CONST_RESUME]], &mut r);
    r
}

/// One direction's traffic key: AEAD key K and nonce randomizer NR (§3.6, Figure 4).
pub(crate) struct TrafficKey {
    pub(crate) aead: AeadKey,
    pub(crate) nr: [u8; AE_NONCE_LEN],
}

impl TrafficKey {
    /// k_ab[j] (`ab` = true) or k_ba[j] = CPRF(mk[j], CONST_KEY_A/B, ae_key_len + ae_nonce_len).
    pub(crate) fn derive(mk: &Secret, alg: Aead, ab: bool) -> Result<TrafficKey, Error> {
        let c = if ab { CONST_KEY_A } else { CONST_KEY_B };
        let mut okm = Zeroizing::new(vec![0u8; alg.key_len() + alg.nonce_len()]);
        cprf(mk, &[&[c]], &mut okm)?;
        let (k, nr_bytes) = okm.split_at(alg.key_len());
        let mut nr = [0u8; AE_NONCE_LEN];
        nr.copy_from_slice(nr_bytes);
        Ok(TrafficKey { aead: AeadKey::new(alg, k)?, nr })
    }

    /// N = frame_ID XOR NR, frame_ID = zero-padded 8-byte big-endian offset (§4.2.3).
    pub(crate) fn nonce(&self, offset: u64) -> [u8; AE_NONCE_LEN] {
        frame_nonce(&self.nr, offset)
    }
}

/// N = frame_ID XOR NR (§3.6, §4.2.3).
pub fn frame_nonce(nr: &[u8; AE_NONCE_LEN], offset: u64) -> [u8; AE_NONCE_LEN] {
    let mut n = *nr;
    for (d, s) in n[AE_NONCE_LEN - 8..].iter_mut().zip(offset.to_be_bytes()) {
        *d ^= s;
    }
    n
}

impl Drop for TrafficKey {
    fn drop(&mut self) {
        self.nr.zeroize();
    }
}
