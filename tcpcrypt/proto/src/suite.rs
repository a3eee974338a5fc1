//! tcpcrypt's TEPs (key-agreement schemes, RFC 8548 §5 and Table 4) and AEAD algorithms
//! (§6, Table 3 and Table 5).

use core::fmt;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use chacha20poly1305::ChaCha20Poly1305;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroizing;

use crate::error::Error;

/// A tcpcrypt TEP identifier (RFC 8548 Table 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tep {
    /// 0x21 TCPCRYPT_ECDHE_P256 (OPTIONAL).
    P256,
    /// 0x22 TCPCRYPT_ECDHE_P521 (OPTIONAL).
    P521,
    /// 0x23 TCPCRYPT_ECDHE_Curve25519 (REQUIRED).
    Curve25519,
}

impl Tep {
    /// Every TEP this implementation supports, most preferred first.
    pub const ALL: [Tep; 3] = [Tep::Curve25519, Tep::P256, Tep::P521];

    /// The 7-bit TEP identifier.
    pub fn id(self) -> u8 {
        match self {
            Tep::P256 => 0x21,
            Tep::P521 => 0x22,
            Tep::Curve25519 => 0x23,
        }
    }
    /// From a TEP identifier (without the `v` bit).
    pub fn from_id(id: u8) -> Option<Tep> {
        match id {
            0x21 => Some(Tep::P256),
            0x22 => Some(Tep::P521),
            0x23 => Some(Tep::Curve25519),
            _ => None,
        }
    }
    /// Length of the Pub_A / Pub_B field in Init1/Init2: 32 for Curve25519 (no length
    /// prefix); for the NIST curves a two-byte length plus the compressed point (§5).
    pub fn pub_field_len(self) -> usize {
        match self {
            Tep::Curve25519 => 32,
            Tep::P256 => 2 + 33,
            Tep::P521 => 2 + 67,
        }
    }
    /// The name used in RFC 8548.
    pub fn name(self) -> &'static str {
        match self {
            Tep::P256 => "TCPCRYPT_ECDHE_P256",
            Tep::P521 => "TCPCRYPT_ECDHE_P521",
            Tep::Curve25519 => "TCPCRYPT_ECDHE_Curve25519",
        }
    }
}

impl fmt::Display for Tep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tcpcrypt AEAD algorithm (RFC 8548 Table 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aead {
    /// 0x0001 AEAD_AES_128_GCM (REQUIRED).
    Aes128Gcm,
    /// 0x0002 AEAD_AES_256_GCM (RECOMMENDED).
    Aes256Gcm,
    /// 0x0010 AEAD_CHACHA20_POLY1305 (RECOMMENDED).
    ChaCha20Poly1305,
}

/// AEAD tag length of every algorithm here.
pub const TAG_LEN: usize = 16;
/// ae_nonce_len of every algorithm here (Table 3).
pub const AE_NONCE_LEN: usize = 12;

impl Aead {
    /// Every AEAD supported, most preferred first.
    pub const ALL: [Aead; 3] = [Aead::Aes128Gcm, Aead::Aes256Gcm, Aead::ChaCha20Poly1305];

    /// The two-byte sym_cipher identifier.
    pub fn id(self) -> u16 {
        match self {
            Aead::Aes128Gcm => 0x0001,
            Aead::Aes256Gcm => 0x0002,
            Aead::ChaCha20Poly1305 => 0x0010,
        }
    }
    /// From a sym_cipher identifier.
    pub fn from_id(id: u16) -> Option<Aead> {
        match id {
            0x0001 => Some(Aead::Aes128Gcm),
            0x0002 => Some(Aead::Aes256Gcm),
            0x0010 => Some(Aead::ChaCha20Poly1305),
            _ => None,
        }
    }
    /// ae_key_len (Table 3).
    pub fn key_len(self) -> usize {
        match self {
            Aead::Aes128Gcm => 16,
            Aead::Aes256Gcm | Aead::ChaCha20Poly1305 => 32,
        }
    }
    /// ae_nonce_len (Table 3).
    pub fn nonce_len(self) -> usize {
        AE_NONCE_LEN
    }
    /// The RFC's name.
    pub fn name(self) -> &'static str {
        match self {
            Aead::Aes128Gcm => "AEAD_AES_128_GCM",
            Aead::Aes256Gcm => "AEAD_AES_256_GCM",
            Aead::ChaCha20Poly1305 => "AEAD_CHACHA20_POLY1305",
        }
    }
}

impl fmt::Display for Aead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A keyed AEAD instance.
pub(crate) enum AeadKey {
    A128(Box<Aes128Gcm>),
    A256(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
}

impl AeadKey {
    pub(crate) fn new(alg: Aead, key: &[u8]) -> Result<AeadKey, Error> {
        let bad = |_| Error::Internal("AEAD key length");
        Ok(match alg {
            Aead::Aes128Gcm => AeadKey::A128(Box::new(Aes128Gcm::new_from_slice(key).map_err(bad)?)),
            Aead::Aes256Gcm => AeadKey::A256(Box::new(Aes256Gcm::new_from_slice(key).map_err(bad)?)),
            Aead::ChaCha20Poly1305 => {
                AeadKey::ChaCha(Box::new(ChaCha20Poly1305::new_from_slice(key).map_err(bad)?))
            }
        })
    }

    pub(crate) fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> Result<[u8; TAG_LEN], Error> {
        let n = aes_gcm::Nonce::from_slice(nonce);
        let tag = match self {
            AeadKey::A128(c) => c.encrypt_in_place_detached(n, aad, buf),
            AeadKey::A256(c) => c.encrypt_in_place_detached(n, aad, buf),
            AeadKey::ChaCha(c) => c.encrypt_in_place_detached(n, aad, buf),
        }
        .map_err(|_| Error::Internal("AEAD seal"))?;
        Ok(tag.into())
    }

    pub(crate) fn open(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        if tag.len() != TAG_LEN {
            return Err(Error::BadTag);
        }
        let n = aes_gcm::Nonce::from_slice(nonce);
        let t = aes_gcm::Tag::from_slice(tag);
        match self {
            AeadKey::A128(c) => c.decrypt_in_place_detached(n, aad, buf, t),
            AeadKey::A256(c) => c.decrypt_in_place_detached(n, aad, buf, t),
            AeadKey::ChaCha(c) => c.decrypt_in_place_detached(n, aad, buf, t),
        }
        .map_err(|_| Error::BadTag)
    }
}

/// An ephemeral key pair for one key agreement.
pub(crate) enum Ephemeral {
    X25519(x25519_dalek::EphemeralSecret, x25519_dalek::PublicKey),
    P256(p256::ecdh::EphemeralSecret),
    P521(p521::ecdh::EphemeralSecret),
}

fn nist_pub_field(point: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(point.len() + 2);
    v.extend_from_slice(&(point.len() as u16).to_be_bytes());
    v.extend_from_slice(point);
    v
}

fn nist_point(field: &[u8], point_len: usize) -> Result<&[u8], Error> {
    let (len, point) = field.split_at_checked(2).ok_or(Error::BadPublicKey)?;
    if usize::from(u16::from_be_bytes([len[0], len[1]])) != point_len || point.len() != point_len {
        return Err(Error::BadPublicKey);
    }
    // Compressed format is mandatory (§5).
    if !matches!(point.first(), Some(0x02 | 0x03)) {
        return Err(Error::BadPublicKey);
    }
    Ok(point)
}

impl Ephemeral {
    pub(crate) fn generate<R: RngCore + CryptoRng>(tep: Tep, rng: &mut R) -> Ephemeral {
        match tep {
            Tep::Curve25519 => {
                let s = x25519_dalek::EphemeralSecret::random_from_rng(&mut *rng);
                let p = x25519_dalek::PublicKey::from(&s);
                Ephemeral::X25519(s, p)
            }
            Tep::P256 => Ephemeral::P256(p256::ecdh::EphemeralSecret::random(rng)),
            Tep::P521 => Ephemeral::P521(p521::ecdh::EphemeralSecret::random(rng)),
        }
    }

    /// The Pub field as transmitted in Init1/Init2.
    pub(crate) fn public_field(&self) -> Vec<u8> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        match self {
            Ephemeral::X25519(_, p) => p.as_bytes().to_vec(),
            Ephemeral::P256(s) => nist_pub_field(s.public_key().to_encoded_point(true).as_bytes()),
            Ephemeral::P521(s) => nist_pub_field(s.public_key().to_encoded_point(true).as_bytes()),
        }
    }

    /// ES: the key-agreement result with the peer's Pub field (validated: §3.3, §5).
    pub(crate) fn agree(self, peer: &[u8]) -> Result<Zeroizing<Vec<u8>>, Error> {
        match self {
            Ephemeral::X25519(s, _) => {
                let bytes: [u8; 32] = peer.try_into().map_err(|_| Error::BadPublicKey)?;
                let shared = s.diffie_hellman(&x25519_dalek::PublicKey::from(bytes));
                // RFC 7748 §6: abort on the all-zero shared secret.
                if !shared.was_contributory() {
                    return Err(Error::BadPublicKey);
                }
                Ok(Zeroizing::new(shared.as_bytes().to_vec()))
            }
            Ephemeral::P256(s) => {
                let pk = p256::PublicKey::from_sec1_bytes(nist_point(peer, 33)?).map_err(|_| Error::BadPublicKey)?;
                Ok(Zeroizing::new(s.diffie_hellman(&pk).raw_secret_bytes().to_vec()))
            }
            Ephemeral::P521(s) => {
                let pk = p521::PublicKey::from_sec1_bytes(nist_point(peer, 67)?).map_err(|_| Error::BadPublicKey)?;
                Ok(Zeroizing::new(s.diffie_hellman(&pk).raw_secret_bytes().to_vec()))
            }
        }
    }
}
