//! The targets' own view of a session's keys: a deterministic fresh key exchange whose ES the
//! target recomputes (it replays the active side's RNG to get the same ephemeral key), and
//! traffic keys derived from it with tcpcrypt-proto's public key schedule, so that a target
//! can seal frames with any control byte and any plaintext flags (URGp, FINp, reserved bits)
//! and open what a session sends. Setup checks the derivation against genuine frames.
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use chacha20poly1305::ChaCha20Poly1305;
use rand_core::RngCore;
use tcpcrypt_proto::consts::{CONST_KEY_A, CONST_KEY_B};
use tcpcrypt_proto::keys::{self, Secret};
use tcpcrypt_proto::msgs::{Init2, Parse};
use tcpcrypt_proto::{resume, Acceptor, Aead, Config, KeyMode, Plan, ResumeTicket, Session, Tep};

use crate::DetRng;

pub const SEED_A: u64 = 0x5eed_000a;
pub const SEED_B: u64 = 0x5eed_000b;
pub const SEED_SYNACK: u64 = 0x5eed_005a;
/// The active opener's resumption nonce in the targets' resumed sessions.
pub const RESUME_NONCE_A: [u8; 8] = *b"fuzz-rsA";

/// An AEAD keyed with one direction's K.
pub enum Cipher {
    A128(Box<Aes128Gcm>),
    A256(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
}

impl Cipher {
    fn new(alg: Aead, key: &[u8]) -> Cipher {
        match alg {
            Aead::Aes128Gcm => Cipher::A128(Box::new(Aes128Gcm::new_from_slice(key).unwrap())),
            Aead::Aes256Gcm => Cipher::A256(Box::new(Aes256Gcm::new_from_slice(key).unwrap())),
            Aead::ChaCha20Poly1305 => Cipher::ChaCha(Box::new(ChaCha20Poly1305::new_from_slice(key).unwrap())),
        }
    }
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let n = aes_gcm::Nonce::from_slice(nonce);
        match self {
            Cipher::A128(c) => c.encrypt_in_place_detached(n, aad, buf),
            Cipher::A256(c) => c.encrypt_in_place_detached(n, aad, buf),
            Cipher::ChaCha(c) => c.encrypt_in_place_detached(n, aad, buf),
        }
        .unwrap()
        .into()
    }
    fn open(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> bool {
        let n = aes_gcm::Nonce::from_slice(nonce);
        let t = aes_gcm::Tag::from_slice(tag);
        match self {
            Cipher::A128(c) => c.decrypt_in_place_detached(n, aad, buf, t),
            Cipher::A256(c) => c.decrypt_in_place_detached(n, aad, buf, t),
            Cipher::ChaCha(c) => c.decrypt_in_place_detached(n, aad, buf, t),
        }
        .is_ok()
    }
}

/// One direction of a session as the target sees it: master key generation, traffic key,
/// stream offset (= frame ID of the next frame).
pub struct Direction {
    pub aead: Aead,
    pub ab: bool,
    pub mk: Secret,
    pub gen: u64,
    pub cipher: Cipher,
    pub nr: [u8; 12],
    pub off: u64,
}

impl Direction {
    pub fn new(mk0: &Secret, aead: Aead, ab: bool, off: u64) -> Direction {
        let (cipher, nr) = traffic(mk0, aead, ab);
        Direction { aead, ab, mk: mk0.clone(), gen: 0, cipher, nr, off }
    }
    /// mk[j+1] (§3.8).
    pub fn advance(&mut self) {
        self.mk = keys::next_master_key(&self.mk);
        let (c, nr) = traffic(&self.mk, self.aead, self.ab);
        self.cipher = c;
        self.nr = nr;
        self.gen += 1;
    }
    /// The frame `control | clen | AEAD(plaintext)` at offset `off` under the current key.
    pub fn seal_at(&self, control: u8, plaintext: &[u8], off: u64) -> Vec<u8> {
        let clen = plaintext.len() + 16;
        assert!(clen <= 0xffff);
        let aad = [control, (clen >> 8) as u8, clen as u8];
        let mut out = aad.to_vec();
        out.extend_from_slice(plaintext);
        let tag = self.cipher.seal(&keys::frame_nonce(&self.nr, off), &aad, &mut out[3..]);
        out.extend_from_slice(&tag);
        out
    }
    /// Seal the next frame (advancing the generation first if `control` has the rekey bit).
    pub fn seal(&mut self, control: u8, plaintext: &[u8]) -> Vec<u8> {
        if control & 1 != 0 {
            self.advance();
        }
        let f = self.seal_at(control, plaintext, self.off);
        self.off += f.len() as u64;
        f
    }
    /// Open one complete frame (advancing on the rekey bit, as a receiver does).
    pub fn open(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let control = frame[0];
        let clen = usize::from(u16::from_be_bytes([frame[1], frame[2]]));
        assert_eq!(frame.len(), 3 + clen);
        if control & 1 != 0 {
            self.advance();
        }
        let mut body = frame[3..3 + clen - 16].to_vec();
        let ok = self.cipher.open(&keys::frame_nonce(&self.nr, self.off), &frame[..3], &mut body, &frame[3 + clen - 16..]);
        self.off += frame.len() as u64;
        ok.then_some(body)
    }
}

fn traffic(mk: &Secret, aead: Aead, ab: bool) -> (Cipher, [u8; 12]) {
    let mut okm = vec![0u8; aead.key_len() + 12];
    keys::cprf(mk, &[&[if ab { CONST_KEY_A } else { CONST_KEY_B }]], &mut okm).unwrap();
    let mut nr = [0u8; 12];
    nr.copy_from_slice(&okm[aead.key_len()..]);
    (Cipher::new(aead, &okm[..aead.key_len()]), nr)
}

/// ES of the fresh key exchange whose active side used `DetRng::new(seed_a)`, from B's Pub
/// field: the same ephemeral key, drawn again the way tcpcrypt-proto draws it (32 bytes of
/// N_A, then the key pair).
pub fn replay_es(tep: Tep, seed: u64, peer_pub: &[u8]) -> Option<Vec<u8>> {
    let mut r = DetRng::new(seed);
    let mut nonce = [0u8; 32];
    r.fill_bytes(&mut nonce);
    agree_as(tep, &mut r, peer_pub)
}

/// Draw an ephemeral key from `r` as tcpcrypt-proto does and agree with `peer_pub` (the Pub
/// field as sent). None where the peer's key is invalid (§5) or the X25519 result is zero.
pub fn agree_as(tep: Tep, r: &mut DetRng, peer_pub: &[u8]) -> Option<Vec<u8>> {
    match tep {
        Tep::Curve25519 => {
            let s = x25519_dalek::EphemeralSecret::random_from_rng(&mut *r);
            let b: [u8; 32] = peer_pub.try_into().ok()?;
            let shared = s.diffie_hellman(&x25519_dalek::PublicKey::from(b));
            shared.was_contributory().then(|| shared.as_bytes().to_vec())
        }
        Tep::P256 => {
            let s = p256::ecdh::EphemeralSecret::random(&mut *r);
            let pk = p256::PublicKey::from_sec1_bytes(nist_point(peer_pub, 33)?).ok()?;
            Some(s.diffie_hellman(&pk).raw_secret_bytes().to_vec())
        }
        Tep::P521 => {
            let s = p521::ecdh::EphemeralSecret::random(&mut *r);
            let pk = p521::PublicKey::from_sec1_bytes(nist_point(peer_pub, 67)?).ok()?;
            Some(s.diffie_hellman(&pk).raw_secret_bytes().to_vec())
        }
    }
}

/// RFC 8548 §5's Pub field for P-256/P-521, independently of tcpcrypt-proto: a two-byte
/// length equal to the compressed point's, then a compressed point (0x02/0x03).
pub fn nist_point(field: &[u8], point_len: usize) -> Option<&[u8]> {
    if field.len() != 2 + point_len || usize::from(u16::from_be_bytes([field[0], field[1]])) != point_len {
        return None;
    }
    let p = &field[2..];
    matches!(p[0], 0x02 | 0x03).then_some(p)
}

/// A fresh key exchange between two deterministic sessions, and a resumption of it, with
/// everything a target needs to rebuild either side and to seal/open as the other.
pub struct Pair {
    pub tep: Tep,
    pub aead: Aead,
    pub cfg: Config,
    pub plan_a: Plan,
    pub plan_b: Plan,
    pub init1: Vec<u8>,
    pub init2: Vec<u8>,
    /// mk[0] of the fresh session.
    pub mk0: Secret,
    /// The resumed session (ss[1]): plans and tickets of both sides, and its mk[0].
    pub rplan_a: Plan,
    pub rplan_b: Plan,
    pub rticket_a: ResumeTicket,
    pub rticket_b: ResumeTicket,
    pub rmk0: Secret,
    /// The tickets (ss[1]) the fresh sessions produced.
    pub ticket_a: ResumeTicket,
    pub ticket_b: ResumeTicket,
}

pub fn cfg_for(tep: Tep, aead: Aead) -> Config {
    Config { teps: vec![tep], aeads: vec![aead], ..Config::default() }
}

impl Pair {
    pub fn new(tep: Tep, aead: Aead) -> Pair {
        let cfg = cfg_for(tep, aead);
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut DetRng::new(SEED_SYNACK));
        let plan_a = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
        let plan_b = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
        let mut a = Session::new(&plan_a, cfg.clone(), None, &mut DetRng::new(SEED_A)).unwrap();
        let mut b = Session::new(&plan_b, cfg.clone(), None, &mut DetRng::new(SEED_B)).unwrap();
        let init1 = a.take_outgoing();
        b.receive(&init1).unwrap();
        let init2 = b.take_outgoing();
        a.receive(&init2).unwrap();
        assert!(a.is_established() && b.is_established());
        let Ok(Parse::Done(m2, _)) = Init2::parse(tep, &init2) else { panic!("Init2") };
        let es = replay_es(tep, SEED_A, &m2.pub_key).expect("ES");
        let mut n_a = [0u8; 32];
        DetRng::new(SEED_A).fill_bytes(&mut n_a);
        let prk = keys::prk(&n_a, &plan_a.eno.transcript, &init1, &init2, &es);
        let mk0 = keys::first_master_key(&prk, &[]);
        // Check the derivation against genuine frames both ways.
        let mut ab = Direction::new(&mk0, aead, true, init1.len() as u64);
        let mut ba = Direction::new(&mk0, aead, false, init2.len() as u64);
        a.send(b"check a->b").unwrap();
        b.send(b"check b->a").unwrap();
        assert_eq!(ab.open(&a.take_outgoing()).as_deref(), Some(&b"\0check a->b"[..]), "derived k_ab");
        assert_eq!(ba.open(&b.take_outgoing()).as_deref(), Some(&b"\0check b->a"[..]), "derived k_ba");
        let ticket_a = a.take_ticket().unwrap();
        let ticket_b = b.take_ticket().unwrap();

        // Resumption with ss[1]: A offers its ticket, B finds its own in its acceptor.
        let syn = resume::syn_option(&cfg.teps, Some(&ticket_a.suboption(&RESUME_NONCE_A))).unwrap();
        let mut cache = Acceptor::new(4);
        cache.insert(b"A", ticket_b.clone());
        let (synack, tb) = resume::synack_option(&syn, &cfg.teps, Some(&mut cache), 8, &mut DetRng::new(SEED_SYNACK));
        let rticket_b = tb.expect("B resumes");
        let rticket_a = ticket_a.clone();
        let rplan_a = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[&rticket_a]).unwrap();
        let rplan_b = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[&rticket_b]).unwrap();
        let KeyMode::Resume { my_nonce, peer_nonce, .. } = &rplan_a.mode else { panic!("resume plan") };
        let sn = [my_nonce.as_slice(), peer_nonce].concat();
        let ss1 = keys::next_session_secret(&prk);
        let rmk0 = keys::first_master_key(&ss1, &sn);
        let mut ra = Session::new(&rplan_a, cfg.clone(), Some(rticket_a.clone()), &mut DetRng::new(SEED_A)).unwrap();
        let mut rb = Session::new(&rplan_b, cfg.clone(), Some(rticket_b.clone()), &mut DetRng::new(SEED_B)).unwrap();
        ra.send(b"resumed a->b").unwrap();
        rb.send(b"resumed b->a").unwrap();
        let mut ab = Direction::new(&rmk0, aead, true, 0);
        let mut ba = Direction::new(&rmk0, aead, false, 0);
        assert_eq!(ab.open(&ra.take_outgoing()).as_deref(), Some(&b"\0resumed a->b"[..]), "derived resumed k_ab");
        assert_eq!(ba.open(&rb.take_outgoing()).as_deref(), Some(&b"\0resumed b->a"[..]), "derived resumed k_ba");
        Pair {
            tep,
            aead,
            cfg,
            plan_a,
            plan_b,
            init1,
            init2,
            mk0,
            rplan_a,
            rplan_b,
            rticket_a,
            rticket_b,
            rmk0,
            ticket_a,
            ticket_b,
        }
    }
}
