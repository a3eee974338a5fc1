//! Errors. Every error of an established session is fatal: the daemon aborts the TCP
//! connection (RST), which RFC 8548 requires to be distinct from an authentic end of file.

use core::fmt;

/// A tcpcrypt error. After a [`crate::Session`] returned one, the session is dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Init1/Init2 do not start with their magic number (§4.1, §4.3).
    BadMagic { expected: u32, got: u32 },
    /// A length field is inconsistent with the message (§4.1).
    BadLength(&'static str),
    /// The message is longer than this implementation accepts.
    TooLarge(&'static str),
    /// Init1 offered no AEAD we support (§3.3).
    NoCommonCipher,
    /// Init2 chose a sym_cipher that Init1 did not offer (§3.3: abort).
    CipherNotOffered(u16),
    /// Public-key validation failed, or X25519 gave the all-zero secret (§3.3, §5).
    BadPublicKey,
    /// AEAD authentication failed (§3.6: abort, never deliver).
    BadTag,
    /// A frame's plaintext is shorter than its flags/urgent fields (§4.2.1).
    BadPlaintext,
    /// Data (any frame) after the frame with FINp (§3.7).
    DataAfterFin,
    /// TCP FIN without a frame with FINp (§3.7: abort).
    TruncatedStream,
    /// The negotiated TEP is not tcpcrypt or not supported.
    UnsupportedTep(u8),
    /// Resumption was negotiated but no matching cached secret was given.
    ResumeMismatch,
    /// The 64-bit stream offset would wrap (§3.6).
    OffsetExhausted,
    /// An API call in a state that does not allow it (e.g. send after FIN).
    InvalidState(&'static str),
    /// A bug or misuse (e.g. wrong key length) that input cannot cause.
    Internal(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadMagic { expected, got } => write!(f, "bad magic {got:#010x}, expected {expected:#010x}"),
            Error::BadLength(w) => write!(f, "bad length: {w}"),
            Error::TooLarge(w) => write!(f, "too large: {w}"),
            Error::NoCommonCipher => write!(f, "no common AEAD algorithm"),
            Error::CipherNotOffered(c) => write!(f, "Init2 chose sym_cipher {c:#06x} not offered in Init1"),
            Error::BadPublicKey => write!(f, "peer public key failed validation"),
            Error::BadTag => write!(f, "frame authentication failed"),
            Error::BadPlaintext => write!(f, "malformed frame plaintext"),
            Error::DataAfterFin => write!(f, "frame after FINp"),
            Error::TruncatedStream => write!(f, "TCP FIN without an authenticated FINp frame"),
            Error::UnsupportedTep(t) => write!(f, "TEP {t:#04x} not supported"),
            Error::ResumeMismatch => write!(f, "resumption negotiated without a matching cached session"),
            Error::OffsetExhausted => write!(f, "stream offset would wrap"),
            Error::InvalidState(w) => write!(f, "invalid state: {w}"),
            Error::Internal(w) => write!(f, "internal error: {w}"),
        }
    }
}

impl std::error::Error for Error {}
