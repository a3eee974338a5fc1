//! The key schedule (RFC 8548 §3.3-§3.5, §3.8): HKDF-SHA256 Extract/Expand as Extract and CPRF.

use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::consts::*;
use crate::error::Error;
use crate::suite::{Aead, AeadKey, AE_NONCE_LEN};

/// A 32-byte secret (PRK, ss[i], mk[j]); zeroed on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop, PartialEq, Eq)]
pub struct Secret(pub(crate) [u8; K_LEN]);

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Only for tests and known-answer checks.
    #[doc(hidden)]
    pub fn expose(&self) -> &[u8; K_LEN] {
        &self.0
    }
    /// Only for tests and known-answer checks.
    #[doc(hidden)]
    pub fn from_bytes(b: [u8; K_LEN]) -> Secret {
        Secret(b)
    }
}

/// Extract(salt, IKM) = HMAC-SHA256(salt, IKM).
pub fn extract(salt: &[u8], ikm: &[u8]) -> Secret {
    let (prk, _) = Hkdf::<Sha256>::extract(Some(salt), ikm);
    let mut s = [0u8; K_LEN];
    s.copy_from_slice(&prk);
    Secret(s)
}

/// CPRF(K, CONST, L) = HKDF-Expand-SHA256(K, CONST, L); `info` is concatenated.
pub fn cprf(key: &Secret, info: &[&[u8]], out: &mut [u8]) -> Result<(), Error> {
    let hk = Hkdf::<Sha256>::from_prk(&key.0).map_err(|_| Error::Internal("PRK length"))?;
    hk.expand_multi_info(info, out).map_err(|_| Error::Internal("OKM length"))
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
