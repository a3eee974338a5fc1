//! A passive observer holding the key log (`tcpcryptd --key-log`, format in tcpcrypt/README.md):
//! decrypt a captured connection's tcpcrypt frames, for teaching and debugging - the role
//! SSLKEYLOGFILE plays for TLS. The decryption is the session's own: one receive-only
//! [`Session`] per direction holding the sender's traffic keys, fed the captured stream
//! ([`Session::receive`]), so frames, rekeying, FINp and the AEADs are the code the daemon runs,
//! not a second implementation.
//!
//! Which secret: a fresh session's PRK = ss[0] from the `TCPCRYPT_ES` line named by Init1's
//! N_A (RFC 8548 §3.3), or a `TCPCRYPT_SS` line whose secret gives the session ID this
//! connection must have (§3.4: from the SYN-ACK's TEP byte and sn[i]). A resumed session has no
//! Init messages: its `TCPCRYPT_SS` line is found the same way, with sn[i] from the two
//! resumption suboptions (§3.5; which of the two hosts was originally A, and the session's AEAD,
//! are not in the log: the orientation whose session ID matches and the AEAD whose first frame
//! authenticates are taken). A key that does not authenticate the connection's first frame
//! is an error ([`ObserveError::WrongKey`]), never garbage output.

use std::fmt;

use zeroize::Zeroizing;

use crate::consts::*;
use crate::eno::{self, Policy};
use crate::error::Error;
use crate::keys::{self, Secret};
use crate::msgs::{Init1, Init2, Parse};
use crate::resume::{lengths_valid, resume_fields};
use crate::session::Session;
use crate::suite::{Aead, Tep};

/// The secrets of a key log.
#[derive(Default)]
pub struct KeyLog {
    es: Vec<([u8; N_A_LEN], Zeroizing<Vec<u8>>)>,
    ss: Vec<(Vec<u8>, Secret)>,
}

impl fmt::Debug for KeyLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyLog({} ES, {} SS)", self.es.len(), self.ss.len())
    }
}

/// A malformed key-log line (1-based line number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLogError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for KeyLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

fn unhex(s: &str, what: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{what} is not hex: {s:?}"));
    }
    Ok((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0)).collect())
}

impl KeyLog {
    /// Read a key log: `TCPCRYPT_ES <N_A> <ES>` and `TCPCRYPT_SS <session ID> <i> <ss[i]>` lines;
    /// blank lines, `#` comments and other labels (as SSLKEYLOGFILE readers do) are skipped.
    pub fn parse(text: &str) -> Result<KeyLog, KeyLogError> {
        let mut log = KeyLog::default();
        for (n, line) in text.lines().enumerate() {
            let err = |message: String| KeyLogError { line: n + 1, message };
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.first().copied() {
                Some("TCPCRYPT_ES") => {
                    let [_, n_a, es] = f[..] else { return Err(err("TCPCRYPT_ES needs N_A and ES".into())) };
                    let n_a: [u8; N_A_LEN] =
                        unhex(n_a, "N_A").map_err(&err)?.try_into().map_err(|_| err(format!("N_A is not {N_A_LEN} bytes")))?;
                    let es = Zeroizing::new(unhex(es, "ES").map_err(&err)?);
                    if es.is_empty() {
                        return Err(err("ES is empty".into()));
                    }
                    log.es.push((n_a, es));
                }
                Some("TCPCRYPT_SS") => {
                    let [_, sid, i, ss] = f[..] else { return Err(err("TCPCRYPT_SS needs session ID, i and ss[i]".into())) };
                    let sid = unhex(sid, "session ID").map_err(&err)?;
                    if sid.len() != 1 + K_LEN {
                        return Err(err(format!("session ID is not {} bytes", 1 + K_LEN)));
                    }
                    i.parse::<u64>().map_err(|_| err(format!("i is not a number: {i:?}")))?;
                    let ss = Zeroizing::new(unhex(ss, "ss[i]").map_err(&err)?);
                    let ss: [u8; K_LEN] = ss[..].try_into().map_err(|_| err(format!("ss[i] is not {K_LEN} bytes")))?;
                    log.ss.push((sid, Secret(ss)));
                }
                _ => {}
            }
        }
        Ok(log)
    }

    /// Whether it holds no secret at all.
    pub fn is_empty(&self) -> bool {
        self.es.is_empty() && self.ss.is_empty()
    }
}

/// One captured connection: the SYN's and SYN-ACK's ENO options (kind and length included) and
/// each direction's TCP payload from the start, reassembled.
#[derive(Debug, Clone, Copy)]
pub struct Captured<'a> {
    pub syn_option: &'a [u8],
    pub synack_option: &'a [u8],
    /// Active opener (host A) -> passive opener.
    pub a_to_b: &'a [u8],
    pub b_to_a: &'a [u8],
}

/// One direction, decrypted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Direction {
    /// The application bytes, in order.
    pub plaintext: Vec<u8>,
    /// Frames that authenticated.
    pub frames: u64,
    /// Of them, rekey frames.
    pub rekeys: u64,
    /// The sender's FINp frame was among them (a clean end of its data).
    pub fin: bool,
    /// Bytes after the last complete frame (an incomplete frame: the capture ended or lost it).
    pub trailing: usize,
    /// Why decryption stopped before the end, after at least one good frame (a forged or
    /// damaged frame, data after FINp).
    pub error: Option<String>,
}

/// A decrypted connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The session ID (§3.4) the key gives for this connection: what both daemons report.
    pub session_id: Vec<u8>,
    pub tep: Tep,
    pub aead: Aead,
    pub resumed: bool,
    /// Whether a frame authenticated (with no frame in either direction the key is unchecked).
    pub verified: bool,
    pub a_to_b: Direction,
    pub b_to_a: Direction,
}

/// Why a connection could not be decrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObserveError {
    /// TCP-ENO did not negotiate a tcpcrypt TEP on this connection (it ran plain TCP).
    NotTcpcrypt(String),
    /// A fresh session whose Init1/Init2 are missing or malformed in the capture.
    Handshake(String),
    /// The key log has no secret for this connection.
    NoKey(String),
    /// The key log's secret for this connection does not authenticate its frames.
    WrongKey(String),
}

impl fmt::Display for ObserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObserveError::NotTcpcrypt(w) => write!(f, "not tcpcrypt: {w}"),
            ObserveError::Handshake(w) => write!(f, "handshake: {w}"),
            ObserveError::NoKey(w) => write!(f, "no key: {w}"),
            ObserveError::WrongKey(w) => write!(f, "wrong key: {w}"),
        }
    }
}

impl std::error::Error for ObserveError {}

/// A way to key the two directions.
struct Keying {
    ss: Secret,
    sn: Vec<u8>,
    /// Host A (the active opener) sends with k_ab: it was A of the session's first connection.
    a_sends_ab: bool,
    aeads: Vec<Aead>,
    /// The log names this connection with it (an ES line by Init1's N_A, an SS line by the
    /// resumed session's ID); else it is only tried (a fresh session's SS line: its session ID
    /// follows from the secret alone, so only a frame can tell whether it is this one).
    named: bool,
}

/// Decrypt one direction; `Err` only when its first frame does not authenticate (the key is
/// wrong for it). Bytes before `off` are the Init message.
fn direction(tep: Tep, tep_byte: u8, aead: Aead, k: &Keying, sender_ab: bool, stream: &[u8], off: usize) -> Result<Direction, Error> {
    let mut s = Session::observer(tep, tep_byte, aead, k.ss.clone(), &k.sn, sender_ab, off as u64)?;
    let r = s.receive(&stream[off..]);
    let st = s.stats();
    if let Err(e) = r {
        if st.frames_received == 0 {
            return Err(e);
        }
    }
    Ok(Direction {
        plaintext: s.take_plaintext(),
        frames: st.frames_received,
        rekeys: st.rekeys_received,
        fin: s.peer_fin(),
        trailing: s.unparsed_len(),
        error: r.err().map(|e| format!("after {} frames: {e}", st.frames_received)),
    })
}

/// Decrypt a captured connection with the key log.
pub fn decrypt(log: &KeyLog, c: &Captured<'_>) -> Result<Observed, ObserveError> {
    if c.syn_option.is_empty() || c.synack_option.is_empty() {
        return Err(ObserveError::NotTcpcrypt(
            if c.syn_option.is_empty() { "no ENO option in the SYN" } else { "no ENO option in the SYN-ACK" }.into(),
        ));
    }
    // ENO as both ends ran it (§4.5 with tcpcrypt's validity, ticket aside: a resumption the
    // key log cannot key is found below).
    let policy = Policy { teps: Tep::ALL.iter().map(|t| t.id()).collect(), mandatory_app_aware: false };
    let neg = eno::negotiate(c.syn_option, c.synack_option, &policy, lengths_valid)
        .map_err(|f| ObserveError::NotTcpcrypt(f.to_string()))?;
    let tep = Tep::from_id(neg.b_suboption.tep).ok_or(ObserveError::NotTcpcrypt("unsupported TEP".into()))?;
    let tep_byte = neg.tep_byte();
    let b_res = resume_fields(&neg.b_suboption).ok().flatten();
    let a_res = neg.a_suboptions.iter().find_map(|s| resume_fields(s).ok().flatten());
    let sid_of = |ss: &Secret, sn: &[u8]| keys::session_id(tep_byte, ss, sn);

    let (candidates, offs, what): (Vec<Keying>, (usize, usize), String) = match (b_res, a_res) {
        (Some((_, b_nonce)), Some((_, a_nonce))) => {
            // Resumed (§3.5): sn = nonce of the originally-A host | the other's.
            let orders = [([a_nonce, b_nonce].concat(), true), ([b_nonce, a_nonce].concat(), false)];
            let mut ks = Vec::new();
            for (sid, ss) in &log.ss {
                for (sn, a_was_a) in &orders {
                    if sid_of(ss, sn) == *sid {
                        ks.push(Keying {
                            ss: ss.clone(),
                            sn: sn.clone(),
                            a_sends_ab: *a_was_a,
                            aeads: Aead::ALL.to_vec(),
                            named: true,
                        });
                    }
                }
            }
            let what = format!("resumed session (nonces {} / {})", crate::hex(a_nonce), crate::hex(b_nonce));
            (ks, (0, 0), what)
        }
        (Some(_), None) => return Err(ObserveError::NotTcpcrypt("SYN-ACK resumes what the SYN did not offer".into())),
        (None, _) => {
            let init1 = match Init1::parse(tep, c.a_to_b) {
                Ok(Parse::Done(m, n)) => (m, n),
                Ok(Parse::Incomplete(_)) => return Err(ObserveError::Handshake("A's stream ends before Init1 does".into())),
                Err(e) => return Err(ObserveError::Handshake(format!("A's stream does not start with Init1: {e}"))),
            };
            let init2 = match Init2::parse(tep, c.b_to_a) {
                Ok(Parse::Done(m, n)) => (m, n),
                Ok(Parse::Incomplete(_)) => return Err(ObserveError::Handshake("B's stream ends before Init2 does".into())),
                Err(e) => return Err(ObserveError::Handshake(format!("B's stream does not start with Init2: {e}"))),
            };
            let aead = Aead::from_id(init2.0.sym_cipher)
                .ok_or_else(|| ObserveError::Handshake(format!("Init2 names unknown cipher {:#06x}", init2.0.sym_cipher)))?;
            let (raw1, raw2) = (&c.a_to_b[..init1.1], &c.b_to_a[..init2.1]);
            let n_a = init1.0.nonce;
            let keying = |ss, named| Keying { ss, sn: Vec::new(), a_sends_ab: true, aeads: vec![aead], named };
            let mut ks: Vec<Keying> = log
                .es
                .iter()
                .filter(|(n, _)| *n == n_a)
                .map(|(_, es)| keying(keys::prk(&n_a, &neg.transcript, raw1, raw2, es), true))
                .chain(log.ss.iter().filter(|(sid, ss)| sid_of(ss, &[]) == *sid).map(|(_, ss)| keying(ss.clone(), false)))
                .collect();
            // The same secret from both lines: try it once.
            ks.dedup_by(|x, y| sid_of(&x.ss, &[]) == sid_of(&y.ss, &[]));
            (ks, (init1.1, init2.1), format!("fresh session (N_A {})", crate::hex(&n_a)))
        }
    };
    if candidates.is_empty() {
        return Err(ObserveError::NoKey(format!("the key log has no secret for this {what}")));
    }
    let mut tried = 0;
    for k in &candidates {
        for &aead in &k.aeads {
            tried += 1;
            let ab = direction(tep, tep_byte, aead, k, k.a_sends_ab, c.a_to_b, offs.0);
            let ba = direction(tep, tep_byte, aead, k, !k.a_sends_ab, c.b_to_a, offs.1);
            if let (Ok(a_to_b), Ok(b_to_a)) = (ab, ba) {
                return Ok(Observed {
                    session_id: sid_of(&k.ss, &k.sn),
                    tep,
                    aead,
                    resumed: b_res.is_some(),
                    verified: a_to_b.frames + b_to_a.frames > 0,
                    a_to_b,
                    b_to_a,
                });
            }
        }
    }
    if candidates.iter().any(|k| k.named) {
        Err(ObserveError::WrongKey(format!(
            "the key log's secret for this {what} does not authenticate its first frame ({tried} tried: a key log \
             of another run, or a capture that is not this connection's start)"
        )))
    } else {
        Err(ObserveError::NoKey(format!(
            "the key log has no line naming this {what}, and none of its {tried} other fresh-session secrets decrypts it"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{resume, Acceptor, Config};
    use rand_core::OsRng;

    fn pump(a: &mut Session, b: &mut Session, ab: &mut Vec<u8>, ba: &mut Vec<u8>) {
        for _ in 0..6 {
            let x = a.take_outgoing();
            ab.extend_from_slice(&x);
            b.receive(&x).unwrap();
            let y = b.take_outgoing();
            ba.extend_from_slice(&y);
            a.receive(&y).unwrap();
        }
    }

    /// A talks (a rekey in the middle, then FINp), B answers; returns (A->B, B->A).
    fn talk(a: &mut Session, b: &mut Session, a_says: &[u8], b_says: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (mut ab, mut ba) = (Vec::new(), Vec::new());
        let half = a_says.len() / 2;
        a.send(&a_says[..half]).unwrap();
        pump(a, b, &mut ab, &mut ba);
        a.initiate_rekey().unwrap();
        pump(a, b, &mut ab, &mut ba); // B answers the rekey
        a.send(&a_says[half..]).unwrap();
        a.send_fin().unwrap();
        b.send(b_says).unwrap();
        b.send_fin().unwrap();
        pump(a, b, &mut ab, &mut ba);
        assert_eq!(b.take_plaintext(), a_says);
        assert_eq!(a.take_plaintext(), b_says);
        (ab, ba)
    }

    fn log_of(s: &mut Session) -> String {
        s.take_key_log().iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn decrypts_a_fresh_session_and_refuses_a_wrong_key() {
        let big: Vec<u8> = (0..40_000u32).map(|i| (i * 7) as u8).collect();
        let cfg = Config { max_frame_data: 1000, key_log: true, ..Config::default() };
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut OsRng);
        let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
        let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
        let mut a = Session::new(&pa, cfg.clone(), None, &mut OsRng).unwrap();
        let mut b = Session::new(&pb, cfg.clone(), None, &mut OsRng).unwrap();
        let (ab, ba) = talk(&mut a, &mut b, &big, b"the reply");
        let log = log_of(&mut a);
        let c = Captured { syn_option: &syn, synack_option: &synack, a_to_b: &ab, b_to_a: &ba };
        let o = decrypt(&KeyLog::parse(&log).unwrap(), &c).unwrap();
        assert_eq!(o.a_to_b.plaintext, big);
        assert_eq!(o.b_to_a.plaintext, b"the reply");
        assert!(o.a_to_b.fin && o.b_to_a.fin && o.verified && !o.resumed);
        assert_eq!(Some(&o.session_id[..]), a.session_id());
        assert!(o.a_to_b.frames >= 40 && o.a_to_b.rekeys == 1 && o.b_to_a.rekeys == 1, "{:?}", o);
        // The SS line alone keys it too.
        let ss_only: String = log.lines().filter(|l| l.starts_with("TCPCRYPT_SS")).collect();
        assert_eq!(decrypt(&KeyLog::parse(&ss_only).unwrap(), &c).unwrap().a_to_b.plaintext, big);
        // Another session's log: no key; this N_A with a wrong ES: wrong key.
        let mut other = Session::new(&pa, cfg.clone(), None, &mut OsRng).unwrap();
        let mut peer = Session::new(&pb, cfg, None, &mut OsRng).unwrap();
        talk(&mut other, &mut peer, b"x", b"y");
        assert!(matches!(decrypt(&KeyLog::parse(&log_of(&mut other)).unwrap(), &c), Err(ObserveError::NoKey(_))));
        let es = log.lines().find(|l| l.starts_with("TCPCRYPT_ES")).unwrap();
        let bad = format!("{} {}", &es[..es.rfind(' ').unwrap()], "11".repeat(32));
        assert!(matches!(decrypt(&KeyLog::parse(&bad).unwrap(), &c), Err(ObserveError::WrongKey(_))));
        // A damaged frame after good ones: decryption stops there and says so.
        let mut hurt = ab.clone();
        let n = hurt.len();
        hurt[n - 30] ^= 1;
        let o = decrypt(&KeyLog::parse(&log).unwrap(), &Captured { a_to_b: &hurt, ..c }).unwrap();
        assert!(o.a_to_b.error.is_some() && !o.a_to_b.fin && o.a_to_b.plaintext.len() < big.len());
        // Plain TCP (no ENO in the SYN-ACK) is not tcpcrypt.
        let plain = Captured { synack_option: &[], ..c };
        assert!(matches!(decrypt(&KeyLog::parse(&log).unwrap(), &plain), Err(ObserveError::NotTcpcrypt(_))));
    }

    #[test]
    fn decrypts_a_resumed_session_opened_by_either_host() {
        let cfg = Config { key_log: true, ..Config::default() };
        for swap in [false, true] {
            let syn = resume::syn_option(&cfg.teps, None).unwrap();
            let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut OsRng);
            let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
            let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
            let mut a = Session::new(&pa, cfg.clone(), None, &mut OsRng).unwrap();
            let mut b = Session::new(&pb, cfg.clone(), None, &mut OsRng).unwrap();
            talk(&mut a, &mut b, b"first", b"connection");
            let (ta, tb) = (a.take_ticket().unwrap(), b.take_ticket().unwrap());
            // The second connection's active opener: A of the first, or (swap) its B.
            let (active, passive) = if swap { (tb, ta) } else { (ta, tb) };
            let mut cache = Acceptor::new(4);
            cache.insert(b"peer", passive);
            let syn = resume::syn_option(&cfg.teps, Some(&active.suboption(&[9; 8]))).unwrap();
            let (synack, pt) = resume::synack_option(&syn, &cfg.teps, Some(&mut cache), 8, &mut OsRng);
            let pt = pt.expect("resumes");
            let px = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[&active]).unwrap();
            let py = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[&pt]).unwrap();
            let mut x = Session::new(&px, cfg.clone(), Some(active), &mut OsRng).unwrap();
            let mut y = Session::new(&py, cfg.clone(), Some(pt), &mut OsRng).unwrap();
            let (ab, ba) = talk(&mut x, &mut y, &[5; 50_000], b"resumed reply");
            let log = log_of(&mut x);
            let c = Captured { syn_option: &syn, synack_option: &synack, a_to_b: &ab, b_to_a: &ba };
            let o = decrypt(&KeyLog::parse(&log).unwrap(), &c).unwrap();
            assert!(o.resumed && o.verified, "swap {swap}");
            assert_eq!(o.a_to_b.plaintext, vec![5; 50_000]);
            assert_eq!(o.b_to_a.plaintext, b"resumed reply");
            assert_eq!(Some(&o.session_id[..]), x.session_id());
            assert_eq!(o.aead, x.aead().unwrap());
        }
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = KeyLog::parse("# comment\n\nTCPCRYPT_ES 00 11\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(KeyLog::parse("TCPCRYPT_SS 23 0 00").is_err());
        assert!(KeyLog::parse("CLIENT_RANDOM aa bb\n").unwrap().is_empty());
    }
}
