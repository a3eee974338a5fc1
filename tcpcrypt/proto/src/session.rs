//! The tcpcrypt connection state machine (RFC 8548 §3.3-§3.9): no I/O. Feed it the bytes
//! read from the TCP connection, give it plaintext to send; it hands back the bytes to write
//! and the plaintext received.
//!
//! ```text
//!   role A (fresh):  new() -> Init1 queued -> AwaitInit2 --Init2--> Established
//!   role B (fresh):  new() -> AwaitInit1 --Init1--> Init2 queued, Established
//!   resumed:         new() -> Established (no Init messages, §3.5)
//!   any error:       Failed (fatal: abort the TCP connection, deliver nothing more)
//! ```

use std::collections::VecDeque;

use rand_core::{CryptoRng, RngCore};
use zeroize::{Zeroize, Zeroizing};

use crate::consts::*;
use crate::eno::Role;
use crate::error::Error;
use crate::keys::{self, Secret, TrafficKey};
use crate::msgs::{self, FrameRef, Init1, Init2, Parse, CONTROL_REKEY, FLAG_FINP, FLAG_URGP};
use crate::resume::{KeyMode, Plan, ResumeTicket};
use crate::suite::{Aead, Ephemeral, Tep, TAG_LEN};

/// Largest application data per frame: clen = 1 (flags) + data + 16 (tag) < 2^16.
pub const MAX_FRAME_DATA: usize = MAX_CLEN - TAG_LEN - 1;

/// Session configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// TEPs we negotiate, most preferred first.
    pub teps: Vec<Tep>,
    /// AEADs: offered in this order as A, chosen by this preference as B.
    pub aeads: Vec<Aead>,
    /// Application bytes per frame (1..=MAX_FRAME_DATA).
    pub max_frame_data: usize,
    /// Initiate rekeying after this many application bytes under one key (None: never).
    /// Default [`DEFAULT_REKEY_AFTER_BYTES`].
    pub rekey_after_bytes: Option<u64>,
    /// Resumption nonce length, 0..=8 (§3.5: default 8).
    pub resume_nonce_len: usize,
    /// Produce a resumption ticket (ss[i+1]) when keys are set (§3.5 policy 2 when false).
    pub cache_sessions: bool,
    /// Most application bytes [`Session::send`] queues before keys are set (a peer that never
    /// sends Init1/Init2 must not make us hold more): beyond it `send` fails with
    /// [`Error::TooLarge`]. Callers should apply back-pressure well before (see
    /// [`Session::pending_len`]).
    pub max_pending: usize,
    /// Record key-log lines ([`Session::take_key_log`]) - for debugging and teaching only;
    /// never on by default.
    pub key_log: bool,
}

/// Default automatic rekey interval: 2^36 application bytes (64 GiB) under one key.
///
/// Why: AES-GCM's security degrades with the amount of data under one key. NIST SP 800-38D
/// and the TLS 1.3 analysis (RFC 8446 §5.5) put the limit at about 2^24.5 full 16 KiB records,
/// i.e. 2^38.5 bytes, for an attacker advantage of 2^-57 (confidentiality and integrity
/// together, per key); 2^36 bytes is 2^22 frames at our default 16 KiB frames, a factor ~5.7
/// below, which keeps that margin with frames of any size (the bound counts blocks, and our
/// frames are at most ~4x the default). 12-byte nonces from the offset never repeat within a
/// key anyway (§3.6). ChaCha20-Poly1305 has no such practical bound, but one interval for all
/// AEADs is simpler and a rekey costs two HKDF calls. RFC 8548 §3.8 leaves the when to us.
pub const DEFAULT_REKEY_AFTER_BYTES: u64 = 1 << 36;

/// Default [`Config::max_pending`]: 1 MiB.
pub const DEFAULT_MAX_PENDING: usize = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            teps: Tep::ALL.to_vec(),
            aeads: Aead::ALL.to_vec(),
            max_frame_data: 16 * 1024,
            rekey_after_bytes: Some(DEFAULT_REKEY_AFTER_BYTES),
            resume_nonce_len: MAX_RESUME_NONCE_LEN,
            cache_sessions: true,
            max_pending: DEFAULT_MAX_PENDING,
            key_log: false,
        }
    }
}

/// Something that happened, for the caller's logs and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Keys are set: application data may flow.
    Established,
    /// A generation changed (§3.8).
    Rekeyed { local_gen: u64, remote_gen: u64 },
    /// The peer's authenticated end of stream (FINp, §3.7).
    PeerFin,
}

/// Per-connection counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Init1/Init2 bytes written.
    pub handshake_bytes_sent: u64,
    /// Init1/Init2 bytes read.
    pub handshake_bytes_received: u64,
    /// Frames written.
    pub frames_sent: u64,
    /// Frames read and authenticated.
    pub frames_received: u64,
    /// Application bytes sealed.
    pub plaintext_sent: u64,
    /// Application bytes opened.
    pub plaintext_received: u64,
    /// All bytes this session produced for the TCP stream (handshake + frames).
    pub wire_bytes_sent: u64,
    /// All bytes fed to it from the TCP stream.
    pub wire_bytes_received: u64,
    /// Generations we advanced our sending keys.
    pub rekeys_sent: u64,
    /// rekey = 1 frames received.
    pub rekeys_received: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitInit1,
    AwaitInit2,
    Established,
    Failed(Error),
}

/// One tcpcrypt connection.
pub struct Session {
    role: Role,
    tep: Tep,
    tep_byte: u8,
    transcript: Vec<u8>,
    cfg: Config,
    state: State,
    resumed: bool,
    // Fresh key exchange.
    eph: Option<Ephemeral>,
    my_nonce: [u8; 32],
    init1: Vec<u8>,
    // Keys.
    aead: Option<Aead>,
    encrypt_ab: bool,
    send_mk: Option<Secret>,
    recv_mk: Option<Secret>,
    send_key: Option<TrafficKey>,
    recv_key: Option<TrafficKey>,
    local_gen: u64,
    remote_gen: u64,
    rekey_flag: bool,
    bytes_since_rekey: u64,
    send_off: u64,
    recv_off: u64,
    session_id: Option<Vec<u8>>,
    ticket: Option<ResumeTicket>,
    // Buffers.
    incoming: Vec<u8>,
    plaintext: Vec<u8>,
    outgoing: Vec<u8>,
    pending: Vec<u8>,
    fin_queued: bool,
    fin_sent: bool,
    peer_fin: bool,
    events: VecDeque<Event>,
    stats: Stats,
    key_log: Vec<Zeroizing<String>>,
    #[cfg(test)]
    pub(crate) nonce_log: Vec<([u8; 32], bool, [u8; 12])>,
}

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("tep", &self.tep)
            .field("aead", &self.aead)
            .field("state", &self.state)
            .field("local_gen", &self.local_gen)
            .field("remote_gen", &self.remote_gen)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Start a session for a negotiated plan. For resumption, `ticket` must be the ticket the
    /// plan names (the one offered in our SYN, or returned by `synack_option`).
    pub fn new<R: RngCore + CryptoRng>(
        plan: &Plan,
        cfg: Config,
        ticket: Option<ResumeTicket>,
        rng: &mut R,
    ) -> Result<Session, Error> {
        if cfg.max_frame_data == 0 || cfg.max_frame_data > MAX_FRAME_DATA {
            return Err(Error::InvalidState("max_frame_data out of range"));
        }
        if cfg.aeads.is_empty() {
            return Err(Error::NoCommonCipher);
        }
        let mut s = Session::blank(plan.eno.role, plan.tep, plan.eno.tep_byte(), plan.eno.transcript.clone(), cfg);
        match &plan.mode {
            KeyMode::Resume { id, my_nonce, peer_nonce } => {
                let t = ticket.filter(|t| t.id == *id && t.tep == plan.tep).ok_or(Error::ResumeMismatch)?;
                let sn: Vec<u8> = match t.orig_role {
                    Role::A => [my_nonce.as_slice(), peer_nonce].concat(),
                    Role::B => [peer_nonce.as_slice(), my_nonce].concat(),
                };
                s.resumed = true;
                s.encrypt_ab = t.orig_role == Role::A;
                s.install_keys(t.ss.clone(), &sn, t.aead, t.orig_role, t.index)?;
                // The next secret continues the resumed chain (a cache tells chains apart by it).
                if let Some(next) = s.ticket.as_mut() {
                    next.lineage = t.lineage;
                }
            }
            KeyMode::Fresh => {
                rng.fill_bytes(&mut s.my_nonce);
                s.eph = Some(Ephemeral::generate(plan.tep, rng));
                if s.role == Role::A {
                    let init1 = Init1 {
                        sym_ciphers: s.cfg.aeads.iter().map(|a| a.id()).collect(),
                        nonce: s.my_nonce,
                        pub_key: s.eph.as_ref().map(|e| e.public_field()).unwrap_or_default(),
                        ignored: Vec::new(),
                    }
                    .encode()?;
                    s.emit_handshake(&init1);
                    s.init1 = init1;
                    s.state = State::AwaitInit2;
                }
            }
        }
        Ok(s)
    }

    /// A session in its first state, no keys.
    fn blank(role: Role, tep: Tep, tep_byte: u8, transcript: Vec<u8>, cfg: Config) -> Session {
        Session {
            role,
            tep,
            tep_byte,
            transcript,
            cfg,
            state: State::AwaitInit1,
            resumed: false,
            eph: None,
            my_nonce: [0; 32],
            init1: Vec::new(),
            aead: None,
            encrypt_ab: role == Role::A,
            send_mk: None,
            recv_mk: None,
            send_key: None,
            recv_key: None,
            local_gen: 0,
            remote_gen: 0,
            rekey_flag: false,
            bytes_since_rekey: 0,
            send_off: 0,
            recv_off: 0,
            session_id: None,
            ticket: None,
            incoming: Vec::new(),
            plaintext: Vec::new(),
            outgoing: Vec::new(),
            pending: Vec::new(),
            fin_queued: false,
            fin_sent: false,
            peer_fin: false,
            events: VecDeque::new(),
            stats: Stats::default(),
            key_log: Vec::new(),
            #[cfg(test)]
            nonce_log: Vec::new(),
        }
    }

    /// One direction of a session as a passive observer with its secret sees it
    /// ([`crate::observe`]): a receive-only session holding the sender's traffic keys (k_ab when
    /// `sender_ab`) from ss[i] and sn[i], reading frames whose stream offsets start at
    /// `recv_off` (after Init1 or Init2 in a fresh session, 0 in a resumed one). What it would
    /// send (answers to rekeys) goes to its outgoing buffer, which no one reads.
    pub(crate) fn observer(tep: Tep, tep_byte: u8, aead: Aead, ss: Secret, sn: &[u8], sender_ab: bool, recv_off: u64) -> Result<Session, Error> {
        let cfg = Config { aeads: vec![aead], rekey_after_bytes: None, cache_sessions: false, key_log: false, ..Config::default() };
        let mut s = Session::blank(if sender_ab { Role::B } else { Role::A }, tep, tep_byte, Vec::new(), cfg);
        s.encrypt_ab = !sender_ab;
        s.install_keys(ss, sn, aead, Role::A, 0)?;
        s.recv_off = recv_off;
        Ok(s)
    }

    /// Bytes received but not yet a complete message or frame.
    pub(crate) fn unparsed_len(&self) -> usize {
        self.incoming.len()
    }

    fn emit_handshake(&mut self, msg: &[u8]) {
        self.outgoing.extend_from_slice(msg);
        self.send_off += msg.len() as u64;
        self.stats.handshake_bytes_sent += msg.len() as u64;
        self.stats.wire_bytes_sent += msg.len() as u64;
    }

    /// ss[i] -> mk[0], session ID, next ticket; set generation-0 traffic keys.
    fn install_keys(&mut self, ss: Secret, sn: &[u8], aead: Aead, orig_role: Role, index: u64) -> Result<(), Error> {
        let mk0 = keys::first_master_key(&ss, sn);
        let sid = keys::session_id(self.tep_byte, &ss, sn);
        if self.cfg.key_log {
            let ss_hex = keys::secret_hex(&ss);
            self.key_log.push(Zeroizing::new(format!("TCPCRYPT_SS {} {index} {}", crate::hex(&sid), ss_hex.as_str())));
        }
        self.session_id = Some(sid);
        if self.cfg.cache_sessions {
            self.ticket = Some(ResumeTicket::new(self.tep, aead, orig_role, index + 1, keys::next_session_secret(&ss)));
        }
        drop(ss);
        self.send_key = Some(TrafficKey::derive(&mk0, aead, self.encrypt_ab)?);
        self.recv_key = Some(TrafficKey::derive(&mk0, aead, !self.encrypt_ab)?);
        self.send_mk = Some(mk0.clone());
        self.recv_mk = Some(mk0);
        self.aead = Some(aead);
        self.state = State::Established;
        self.events.push_back(Event::Established);
        Ok(())
    }

    fn after_established(&mut self) -> Result<(), Error> {
        let pending = Zeroizing::new(std::mem::take(&mut self.pending));
        self.seal_data(&pending)?;
        if self.fin_queued {
            self.send_fin()?;
        }
        Ok(())
    }

    fn fail(&mut self, e: Error) -> Error {
        if !matches!(self.state, State::Failed(_)) {
            self.state = State::Failed(e);
        }
        self.eph = None;
        self.pending.zeroize();
        self.send_key = None;
        self.recv_key = None;
        self.send_mk = None;
        self.recv_mk = None;
        self.ticket = None;
        e
    }

    fn check(&self) -> Result<(), Error> {
        match self.state {
            State::Failed(e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Feed bytes read from the TCP connection. An error is fatal for the connection.
    pub fn receive(&mut self, input: &[u8]) -> Result<(), Error> {
        self.check()?;
        self.incoming.extend_from_slice(input);
        self.stats.wire_bytes_received += input.len() as u64;
        let r = self.process();
        r.map_err(|e| self.fail(e))
    }

    fn process(&mut self) -> Result<(), Error> {
        let mut pos = 0usize;
        let r = self.process_from(&mut pos);
        self.incoming.drain(..pos);
        r
    }

    fn process_from(&mut self, pos: &mut usize) -> Result<(), Error> {
        loop {
            let buf = &self.incoming[*pos..];
            match self.state {
                State::Failed(e) => return Err(e),
                State::AwaitInit1 => {
                    let Parse::Done(m, n) = Init1::parse(self.tep, buf)? else { return Ok(()) };
                    let raw = buf[..n].to_vec();
                    *pos += n;
                    self.recv_off += n as u64;
                    self.stats.handshake_bytes_received += n as u64;
                    self.on_init1(m, raw)?;
                }
                State::AwaitInit2 => {
                    let Parse::Done(m, n) = Init2::parse(self.tep, buf)? else { return Ok(()) };
                    let raw = buf[..n].to_vec();
                    *pos += n;
                    self.recv_off += n as u64;
                    self.stats.handshake_bytes_received += n as u64;
                    self.on_init2(m, raw)?;
                }
                State::Established => {
                    let (control, start, n) = match FrameRef::parse(buf)? {
                        Parse::Done(f, n) => (f.control, *pos + FRAME_HEADER_LEN, n),
                        Parse::Incomplete(_) => return Ok(()),
                    };
                    self.open_frame(control, start, *pos + n)?;
                    *pos += n;
                    self.recv_off = self.recv_off.checked_add(n as u64).ok_or(Error::OffsetExhausted)?;
                }
            }
        }
    }

    /// Key log: the key-agreement result ES, named by N_A (which Init1 carries in clear).
    fn log_es(&mut self, n_a: &[u8], es: &[u8]) {
        if self.cfg.key_log {
            self.key_log.push(Zeroizing::new(format!("TCPCRYPT_ES {} {}", crate::hex(n_a), crate::hex(es))));
        }
    }

    fn on_init1(&mut self, m: Init1, raw: Vec<u8>) -> Result<(), Error> {
        let aead = self
            .cfg
            .aeads
            .iter()
            .copied()
            .find(|a| m.sym_ciphers.contains(&a.id()))
            .ok_or(Error::NoCommonCipher)?;
        let eph = self.eph.take().ok_or(Error::Internal("no ephemeral key"))?;
        let init2 = Init2 { sym_cipher: aead.id(), nonce: self.my_nonce, pub_key: eph.public_field(), ignored: Vec::new() }
            .encode()?;
        let es = eph.agree(&m.pub_key)?;
        self.log_es(&m.nonce, &es);
        let prk = keys::prk(&m.nonce, &self.transcript, &raw, &init2, &es);
        self.emit_handshake(&init2);
        self.install_keys(prk, &[], aead, Role::B, 0)?;
        self.after_established()
    }

    fn on_init2(&mut self, m: Init2, raw: Vec<u8>) -> Result<(), Error> {
        if !self.cfg.aeads.iter().any(|a| a.id() == m.sym_cipher) {
            return Err(Error::CipherNotOffered(m.sym_cipher));
        }
        let aead = Aead::from_id(m.sym_cipher).ok_or(Error::CipherNotOffered(m.sym_cipher))?;
        let eph = self.eph.take().ok_or(Error::Internal("no ephemeral key"))?;
        let es = eph.agree(&m.pub_key)?;
        let n_a = self.my_nonce;
        self.log_es(&n_a, &es);
        let prk = keys::prk(&self.my_nonce, &self.transcript, &self.init1, &raw, &es);
        self.init1 = Vec::new();
        self.install_keys(prk, &[], aead, Role::A, 0)?;
        self.after_established()
    }

    fn open_frame(&mut self, control: u8, ct_start: usize, ct_end: usize) -> Result<(), Error> {
        if self.peer_fin {
            return Err(Error::DataAfterFin);
        }
        let aead = self.aead.ok_or(Error::Internal("no AEAD"))?;
        let rekey = control & CONTROL_REKEY != 0;
        if rekey {
            let mk = keys::next_master_key(self.recv_mk.as_ref().ok_or(Error::Internal("no recv mk"))?);
            self.recv_key = Some(TrafficKey::derive(&mk, aead, !self.encrypt_ab)?);
            self.recv_mk = Some(mk);
            self.remote_gen += 1;
            self.stats.rekeys_received += 1;
        }
        let key = self.recv_key.as_ref().ok_or(Error::Internal("no recv key"))?;
        let clen = ct_end - ct_start;
        let aad = msgs::associated_data(control, clen);
        let nonce = key.nonce(self.recv_off);
        let start = self.plaintext.len();
        let body_end = ct_end - TAG_LEN;
        self.plaintext.extend_from_slice(&self.incoming[ct_start..body_end]);
        if let Err(e) = key.aead.open(&nonce, &aad, &mut self.plaintext[start..], &self.incoming[body_end..ct_end]) {
            self.plaintext.truncate(start);
            return Err(e);
        }
        let flags = self.plaintext[start];
        let hdr = if flags & FLAG_URGP != 0 { 3 } else { 1 };
        if self.plaintext.len() - start < hdr {
            self.plaintext.truncate(start);
            return Err(Error::BadPlaintext);
        }
        self.plaintext.copy_within(start + hdr.., start);
        self.plaintext.truncate(self.plaintext.len() - hdr);
        self.stats.frames_received += 1;
        self.stats.plaintext_received += (self.plaintext.len() - start) as u64;
        if flags & FLAG_FINP != 0 {
            self.peer_fin = true;
            self.events.push_back(Event::PeerFin);
        }
        if rekey {
            if self.remote_gen > self.local_gen {
                self.advance_local(self.remote_gen - self.local_gen)?;
                if !self.fin_sent {
                    self.rekey_flag = true;
                    self.seal_frame(&[], false)?;
                }
            }
            self.events.push_back(Event::Rekeyed { local_gen: self.local_gen, remote_gen: self.remote_gen });
        }
        Ok(())
    }

    fn advance_local(&mut self, steps: u64) -> Result<(), Error> {
        let aead = self.aead.ok_or(Error::Internal("no AEAD"))?;
        for _ in 0..steps {
            let mk = keys::next_master_key(self.send_mk.as_ref().ok_or(Error::Internal("no send mk"))?);
            self.send_key = Some(TrafficKey::derive(&mk, aead, self.encrypt_ab)?);
            self.send_mk = Some(mk);
            self.local_gen += 1;
            self.stats.rekeys_sent += 1;
        }
        self.bytes_since_rekey = 0;
        Ok(())
    }

    fn seal_frame(&mut self, data: &[u8], fin: bool) -> Result<(), Error> {
        if let Some(limit) = self.cfg.rekey_after_bytes {
            if self.bytes_since_rekey >= limit && !data.is_empty() {
                self.advance_local(1)?;
                self.rekey_flag = true;
                self.events.push_back(Event::Rekeyed { local_gen: self.local_gen, remote_gen: self.remote_gen });
            }
        }
        let clen = 1 + data.len() + TAG_LEN;
        if clen > MAX_CLEN {
            return Err(Error::TooLarge("frame"));
        }
        let frame_len = (FRAME_HEADER_LEN + clen) as u64;
        let next_off = self.send_off.checked_add(frame_len).ok_or(Error::OffsetExhausted)?;
        let control = if std::mem::take(&mut self.rekey_flag) { CONTROL_REKEY } else { 0 };
        let key = self.send_key.as_ref().ok_or(Error::InvalidState("no keys"))?;
        let aad = msgs::associated_data(control, clen);
        let nonce = key.nonce(self.send_off);
        #[cfg(test)]
        self.nonce_log.push((*self.send_mk.as_ref().map(|m| m.expose()).unwrap_or(&[0; 32]), self.encrypt_ab, nonce));
        let start = self.outgoing.len();
        self.outgoing.extend_from_slice(&aad);
        self.outgoing.push(if fin { FLAG_FINP } else { 0 });
        self.outgoing.extend_from_slice(data);
        let tag = key.aead.seal(&nonce, &aad, &mut self.outgoing[start + FRAME_HEADER_LEN..])?;
        self.outgoing.extend_from_slice(&tag);
        self.send_off = next_off;
        self.stats.frames_sent += 1;
        self.stats.plaintext_sent += data.len() as u64;
        self.stats.wire_bytes_sent += frame_len;
        self.bytes_since_rekey += data.len() as u64;
        Ok(())
    }

    /// Queue application data (sealed into frames at once once keys are set).
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        self.check()?;
        if self.fin_queued || self.fin_sent {
            return Err(Error::InvalidState("send after FIN"));
        }
        if self.state != State::Established {
            if self.pending.len().saturating_add(data.len()) > self.cfg.max_pending {
                return Err(self.fail(Error::TooLarge("data queued before the key exchange completed")));
            }
            self.pending.extend_from_slice(data);
            return Ok(());
        }
        self.seal_data(data).map_err(|e| self.fail(e))
    }

    fn seal_data(&mut self, data: &[u8]) -> Result<(), Error> {
        let max = self.cfg.max_frame_data;
        for chunk in data.chunks(max) {
            self.seal_frame(chunk, false)?;
        }
        Ok(())
    }

    /// End our direction: a frame with FINp (§3.7). Idempotent.
    pub fn send_fin(&mut self) -> Result<(), Error> {
        self.check()?;
        if self.fin_sent {
            return Ok(());
        }
        if self.state != State::Established {
            self.fin_queued = true;
            return Ok(());
        }
        self.fin_queued = false;
        self.seal_frame(&[], true).map_err(|e| self.fail(e))?;
        self.fin_sent = true;
        Ok(())
    }

    /// Initiate rekeying (§3.8) with an empty frame: also the verified keep-alive of §3.9.
    /// Returns false (and sends nothing) while a previous empty-frame rekey is unanswered.
    pub fn initiate_rekey(&mut self) -> Result<bool, Error> {
        self.check()?;
        if self.state != State::Established || self.fin_sent {
            return Err(Error::InvalidState("rekey needs an established, open session"));
        }
        if self.remote_gen < self.local_gen {
            return Ok(false);
        }
        self.advance_local(1).map_err(|e| self.fail(e))?;
        self.rekey_flag = true;
        self.seal_frame(&[], false).map_err(|e| self.fail(e))?;
        self.events.push_back(Event::Rekeyed { local_gen: self.local_gen, remote_gen: self.remote_gen });
        Ok(true)
    }

    /// The TCP connection delivered FIN. Unless an authenticated FINp frame arrived first,
    /// this is an abort (§3.7), distinct from end of file.
    pub fn receive_eof(&mut self) -> Result<(), Error> {
        self.check()?;
        if self.peer_fin && self.incoming.is_empty() {
            Ok(())
        } else {
            Err(self.fail(Error::TruncatedStream))
        }
    }

    /// Append received application data to `out`.
    pub fn read_plaintext(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.plaintext);
    }
    /// Take the received application data.
    pub fn take_plaintext(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.plaintext)
    }
    /// Bytes of received application data waiting.
    pub fn plaintext_len(&self) -> usize {
        self.plaintext.len()
    }
    /// Take the bytes to write to the TCP connection.
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.outgoing)
    }
    /// Append the bytes to write to `out`.
    pub fn write_outgoing(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.outgoing);
    }
    /// Bytes waiting to be written.
    pub fn outgoing_len(&self) -> usize {
        self.outgoing.len()
    }
    /// Application bytes queued by [`Session::send`] until keys are set (at most
    /// [`Config::max_pending`]).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
    /// Key-log lines recorded since the last call (only with [`Config::key_log`]): one line
    /// per secret, `TCPCRYPT_ES <N_A hex> <ES hex>` (fresh key exchange: the key-agreement
    /// result, named by the nonce Init1 carries) and `TCPCRYPT_SS <session ID hex> <i>
    /// <ss[i] hex>` (the session secret behind a session ID: ss[0] = PRK for a fresh
    /// exchange). From ES and a capture's ENO options, Init1 and Init2, every key follows
    /// (RFC 8548 §3.3-§3.6). The strings are zeroed on drop.
    pub fn take_key_log(&mut self) -> Vec<Zeroizing<String>> {
        std::mem::take(&mut self.key_log)
    }
    /// Whether there are bytes to write.
    pub fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty()
    }
    /// Next event.
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
    /// Keys are set.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }
    /// The fatal error, if any.
    pub fn error(&self) -> Option<Error> {
        match self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }
    /// The peer's FINp arrived.
    pub fn peer_fin(&self) -> bool {
        self.peer_fin
    }
    /// Our FINp was sealed.
    pub fn fin_sent(&self) -> bool {
        self.fin_sent
    }
    /// The session ID (RFC 8548 §3.4, RFC 8547 §5.1): None until keys are set.
    pub fn session_id(&self) -> Option<&[u8]> {
        self.session_id.as_deref()
    }
    /// Our TCP-ENO role in this connection.
    pub fn role(&self) -> Role {
        self.role
    }
    /// The negotiated TEP.
    pub fn tep(&self) -> Tep {
        self.tep
    }
    /// The AEAD in use (None before Init2).
    pub fn aead(&self) -> Option<Aead> {
        self.aead
    }
    /// Whether keys came from session resumption.
    pub fn resumed(&self) -> bool {
        self.resumed
    }
    /// (local, remote) generation numbers (§3.8).
    pub fn generations(&self) -> (u64, u64) {
        (self.local_gen, self.remote_gen)
    }
    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// The ticket (ss[i+1]) to cache for resuming with this peer; taken once.
    pub fn take_ticket(&mut self) -> Option<ResumeTicket> {
        self.ticket.take()
    }
}

impl Drop for Session {
    /// Application data queued or received but not yet taken is wiped with the keys (which
    /// wipe themselves).
    fn drop(&mut self) {
        self.pending.zeroize();
        self.plaintext.zeroize();
        self.my_nonce.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume;
    use crate::successors::Acceptor;
    use rand_core::OsRng;
    use std::collections::HashSet;

    fn pair(cfg_a: Config, cfg_b: Config) -> (Session, Session) {
        let syn = resume::syn_option(&cfg_a.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg_b.teps, None, 8, &mut OsRng);
        let pa = resume::negotiate(&syn, &synack, false, true, &cfg_a.teps, &[]).unwrap();
        let pb = resume::negotiate(&syn, &synack, true, true, &cfg_b.teps, &[]).unwrap();
        (Session::new(&pa, cfg_a, None, &mut OsRng).unwrap(), Session::new(&pb, cfg_b, None, &mut OsRng).unwrap())
    }

    fn pump(a: &mut Session, b: &mut Session) {
        for _ in 0..8 {
            let x = a.take_outgoing();
            b.receive(&x).unwrap();
            let y = b.take_outgoing();
            a.receive(&y).unwrap();
        }
    }

    #[test]
    fn nonces_never_repeat_across_rekey_and_resumption() {
        let cfg = Config { rekey_after_bytes: Some(50_000), ..Config::default() };
        let (mut a, mut b) = pair(cfg.clone(), cfg.clone());
        pump(&mut a, &mut b);
        let mut seen: HashSet<([u8; 32], bool, [u8; 12])> = HashSet::new();
        let mut keys_seen: HashSet<[u8; 32]> = HashSet::new();
        for round in 0..20 {
            a.send(&vec![round as u8; 20_000]).unwrap();
            b.send(&vec![round as u8; 7_000]).unwrap();
            if round % 5 == 0 {
                a.initiate_rekey().unwrap();
            }
            pump(&mut a, &mut b);
        }
        assert!(a.generations().0 >= 4, "{:?}", a.generations());
        assert_eq!(a.generations().0, b.generations().1);
        let mut ta = a.take_ticket().unwrap();
        let mut tb = b.take_ticket().unwrap();
        let mut all = vec![a, b];
        // B's acceptor starts the chain at ss[1] and derives ss[2], ss[3] itself.
        let mut acceptor = Acceptor::new(4);
        acceptor.insert(b"peer", tb.clone());
        // Three resumptions in a row (ss[1], ss[2], ss[3]).
        for i in 0..3 {
            let (active_ticket, passive_cache) = (ta, &mut acceptor);
            let nonce = [i as u8; 8];
            let syn = resume::syn_option(&cfg.teps, Some(&active_ticket.suboption(&nonce))).unwrap();
            let (synack, pt) = resume::synack_option(&syn, &cfg.teps, Some(passive_cache), 8, &mut OsRng);
            let pt = pt.expect("passive side resumes");
            assert_eq!((pt.id, pt.index), (tb.id, i + 1), "the acceptor's ss[i] is the passive session's");
            let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[&active_ticket]).unwrap();
            let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[&pt]).unwrap();
            assert!(matches!(pa.mode, KeyMode::Resume { .. }));
            let mut x = Session::new(&pa, cfg.clone(), Some(active_ticket), &mut OsRng).unwrap();
            let mut y = Session::new(&pb, cfg.clone(), Some(pt), &mut OsRng).unwrap();
            assert!(x.resumed() && y.resumed());
            assert_eq!(x.session_id(), y.session_id());
            assert_eq!(x.session_id().unwrap()[0], 0xa3);
            x.send(&[1; 100_000]).unwrap();
            y.send(&[2; 60_000]).unwrap();
            pump(&mut x, &mut y);
            assert_eq!(x.take_plaintext(), vec![2; 60_000]);
            assert_eq!(y.take_plaintext(), vec![1; 100_000]);
            ta = x.take_ticket().unwrap();
            tb = y.take_ticket().unwrap();
            all.push(x);
            all.push(y);
        }
        for s in &all {
            for (mk, ab, n) in &s.nonce_log {
                keys_seen.insert(*mk);
                assert!(seen.insert((*mk, *ab, *n)), "nonce reused under one key");
            }
        }
        // Each session's two directions share mk but use k_ab vs k_ba: distinct keys, and no
        // master key is shared across sessions.
        let per_session: Vec<HashSet<[u8; 32]>> =
            all.iter().map(|s| s.nonce_log.iter().map(|(m, _, _)| *m).collect()).collect();
        for i in (0..per_session.len()).step_by(2) {
            for j in (0..per_session.len()).step_by(2) {
                if i != j {
                    assert!(per_session[i].is_disjoint(&per_session[j]));
                }
            }
        }
        assert!(keys_seen.len() > 8);
    }
}
