//! Wire messages of RFC 8548 §4: Init1, Init2 (§4.1), encryption frames (§4.2) and their
//! plaintext (§4.2.1). Parsers never panic; they return [`Parse::Incomplete`] when more
//! bytes are needed, so they can be fed a TCP stream.

use crate::consts::*;
use crate::error::Error;
use crate::suite::{Tep, TAG_LEN};

/// Outcome of parsing from the front of a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse<T> {
    /// A complete message and the number of bytes it occupies.
    Done(T, usize),
    /// At least this many bytes in total are needed.
    Incomplete(usize),
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

/// Read magic and message_len, checking magic and the length bounds. `Ok(None)` = need 8 bytes.
fn init_header(buf: &[u8], magic: u32, min_len: usize) -> Result<Option<usize>, Error> {
    if buf.len() < 4 {
        // Reject a wrong magic as early as its bytes arrive.
        if magic.to_be_bytes()[..buf.len()] != *buf {
            let mut got = [0u8; 4];
            got[..buf.len()].copy_from_slice(buf);
            return Err(Error::BadMagic { expected: magic, got: u32::from_be_bytes(got) });
        }
        return Ok(None);
    }
    let got = be32(buf);
    if got != magic {
        return Err(Error::BadMagic { expected: magic, got });
    }
    if buf.len() < 8 {
        return Ok(None);
    }
    let m = be32(&buf[4..]) as usize;
    if m < min_len {
        return Err(Error::BadLength("message_len shorter than the message's fields"));
    }
    if m > MAX_INIT_LEN {
        return Err(Error::TooLarge("message_len"));
    }
    Ok(Some(m))
}

/// Init1 = { INIT1_MAGIC, sym_cipher_list, N_A, Pub_A } (§3.3, §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init1 {
    /// sym_cipher identifiers offered by A (unknown ones are kept: they are just not chosen).
    pub sym_ciphers: Vec<u16>,
    /// N_A.
    pub nonce: [u8; N_A_LEN],
    /// Pub_A as transmitted (for P-256/P-521 with its two-byte length).
    pub pub_key: Vec<u8>,
    /// Trailing ignored bytes (we send none; we accept and ignore them).
    pub ignored: Vec<u8>,
}

impl Init1 {
    /// Encode (ignored field included if set, so tests can exercise it).
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        if self.sym_ciphers.len() > 255 {
            return Err(Error::TooLarge("nciphers"));
        }
        let len = 9 + 2 * self.sym_ciphers.len() + N_A_LEN + self.pub_key.len() + self.ignored.len();
        if len > MAX_INIT_LEN {
            return Err(Error::TooLarge("Init1"));
        }
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&INIT1_MAGIC.to_be_bytes());
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.push(self.sym_ciphers.len() as u8);
        for c in &self.sym_ciphers {
            out.extend_from_slice(&c.to_be_bytes());
        }
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.pub_key);
        out.extend_from_slice(&self.ignored);
        Ok(out)
    }

    /// Parse from the front of `buf` for the negotiated TEP.
    pub fn parse(tep: Tep, buf: &[u8]) -> Result<Parse<Init1>, Error> {
        let fixed = 9 + N_A_LEN + tep.pub_field_len();
        let Some(m) = init_header(buf, INIT1_MAGIC, fixed)? else { return Ok(Parse::Incomplete(8)) };
        if buf.len() < 9 {
            return Ok(Parse::Incomplete(9.max(m)));
        }
        let k = usize::from(buf[8]);
        let need = fixed + 2 * k;
        if m < need {
            return Err(Error::BadLength("Init1 message_len shorter than nciphers implies"));
        }
        if buf.len() < m {
            return Ok(Parse::Incomplete(m));
        }
        let msg = &buf[..m];
        let sym_ciphers = msg[9..9 + 2 * k].chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
        let mut nonce = [0u8; N_A_LEN];
        let n0 = 9 + 2 * k;
        nonce.copy_from_slice(&msg[n0..n0 + N_A_LEN]);
        let p0 = n0 + N_A_LEN;
        let pub_key = msg[p0..p0 + tep.pub_field_len()].to_vec();
        let ignored = msg[need..].to_vec();
        Ok(Parse::Done(Init1 { sym_ciphers, nonce, pub_key, ignored }, m))
    }
}

/// Init2 = { INIT2_MAGIC, sym_cipher, N_B, Pub_B } (§3.3, §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init2 {
    /// The AEAD chosen by B.
    pub sym_cipher: u16,
    /// N_B.
    pub nonce: [u8; N_B_LEN],
    /// Pub_B as transmitted.
    pub pub_key: Vec<u8>,
    /// Trailing ignored bytes.
    pub ignored: Vec<u8>,
}

impl Init2 {
    /// Encode.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let len = 10 + N_B_LEN + self.pub_key.len() + self.ignored.len();
        if len > MAX_INIT_LEN {
            return Err(Error::TooLarge("Init2"));
        }
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&INIT2_MAGIC.to_be_bytes());
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.extend_from_slice(&self.sym_cipher.to_be_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.pub_key);
        out.extend_from_slice(&self.ignored);
        Ok(out)
    }

    /// Parse from the front of `buf` for the negotiated TEP.
    pub fn parse(tep: Tep, buf: &[u8]) -> Result<Parse<Init2>, Error> {
        let fixed = 10 + N_B_LEN + tep.pub_field_len();
        let Some(m) = init_header(buf, INIT2_MAGIC, fixed)? else { return Ok(Parse::Incomplete(8)) };
        if buf.len() < m {
            return Ok(Parse::Incomplete(m));
        }
        let msg = &buf[..m];
        let sym_cipher = u16::from_be_bytes([msg[8], msg[9]]);
        let mut nonce = [0u8; N_B_LEN];
        nonce.copy_from_slice(&msg[10..10 + N_B_LEN]);
        let pub_key = msg[10 + N_B_LEN..fixed].to_vec();
        let ignored = msg[fixed..].to_vec();
        Ok(Parse::Done(Init2 { sym_cipher, nonce, pub_key, ignored }, m))
    }
}

/// The control byte's rekey bit (§4.2); the other seven bits (cres) are reserved.
pub const CONTROL_REKEY: u8 = 0x01;
/// Plaintext flags: FINp (§4.2.1).
pub const FLAG_FINP: u8 = 0x01;
/// Plaintext flags: URGp (§4.2.1).
pub const FLAG_URGP: u8 = 0x02;

/// A frame as seen on the wire: `control | clen | ciphertext` (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// The control byte (cres bits are ignored on receipt).
    pub control: u8,
    /// The ciphertext (AEAD output incl. tag).
    pub ciphertext: &'a [u8],
}

impl<'a> FrameRef<'a> {
    /// Parse one frame from the front of `buf`. Only the length can be wrong here: a
    /// ciphertext shorter than a tag (plus the flags byte) is rejected at once.
    pub fn parse(buf: &'a [u8]) -> Result<Parse<FrameRef<'a>>, Error> {
        if buf.len() < FRAME_HEADER_LEN {
            return Ok(Parse::Incomplete(FRAME_HEADER_LEN));
        }
        let clen = usize::from(u16::from_be_bytes([buf[1], buf[2]]));
        if clen < TAG_LEN + 1 {
            return Err(Error::BadLength("clen shorter than tag plus flags"));
        }
        let total = FRAME_HEADER_LEN + clen;
        match buf.get(FRAME_HEADER_LEN..total) {
            Some(ciphertext) => Ok(Parse::Done(FrameRef { control: buf[0], ciphertext }, total)),
            None => Ok(Parse::Incomplete(total)),
        }
    }
    /// The rekey bit.
    pub fn rekey(&self) -> bool {
        self.control & CONTROL_REKEY != 0
    }
    /// Associated data: `control | clen` (§4.2.2).
    pub fn associated_data(&self) -> [u8; 3] {
        associated_data(self.control, self.ciphertext.len())
    }
}

/// Associated data `control | clen` (§4.2.2).
pub fn associated_data(control: u8, clen: usize) -> [u8; 3] {
    let c = (clen as u16).to_be_bytes();
    [control, c[0], c[1]]
}

/// A decrypted frame plaintext (§4.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plaintext<'a> {
    /// flags (fres bits ignored).
    pub flags: u8,
    /// The urgent field if URGp is set.
    pub urgent: Option<u16>,
    /// Application data.
    pub data: &'a [u8],
}

impl<'a> Plaintext<'a> {
    /// Parse a decrypted plaintext.
    pub fn parse(p: &'a [u8]) -> Result<Plaintext<'a>, Error> {
        let (&flags, rest) = p.split_first().ok_or(Error::BadPlaintext)?;
        if flags & FLAG_URGP != 0 {
            let (u, data) = rest.split_at_checked(2).ok_or(Error::BadPlaintext)?;
            Ok(Plaintext { flags, urgent: Some(u16::from_be_bytes([u[0], u[1]])), data })
        } else {
            Ok(Plaintext { flags, urgent: None, data: rest })
        }
    }
    /// Header length before the data.
    pub fn header_len(&self) -> usize {
        if self.urgent.is_some() {
            3
        } else {
            1
        }
    }
    /// FINp.
    pub fn fin(&self) -> bool {
        self.flags & FLAG_FINP != 0
    }
    /// Encode.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.data.len() + 3);
        match self.urgent {
            Some(u) => {
                v.push(self.flags | FLAG_URGP);
                v.extend_from_slice(&u.to_be_bytes());
            }
            None => v.push(self.flags & !FLAG_URGP),
        }
        v.extend_from_slice(self.data);
        v
    }
}
