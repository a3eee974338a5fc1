//! fuzz_session_{x25519,p256,p521}: one session per key type (TEP), host A or host B, fed
//! Init2/Init1 whose Pub field the fuzzer chooses (raw, or framed with a correct length so
//! that P-256/P-521 point validation and X25519's low-order points are reached), then the
//! rest of the input as frames.
//!
//! Oracle: for a well-formed Init message the target knows the outcome independently of
//! tcpcrypt-proto (it replays the session's deterministic ephemeral key and validates the
//! point with p256/p521/x25519-dalek itself): no common cipher, cipher not offered, bad public
//! key, or established. Forged frames never yield plaintext. An unmodified genuine peer gives
//! the genuine session ID.
use tcpcrypt_proto::keys;
use tcpcrypt_proto::msgs::{Init1, Init2, Parse, FLAG_URGP};
use tcpcrypt_proto::{resume, Aead, Config, Error, Plan, Session, Tep};

use crate::crypto::{agree_as, Direction, SEED_A, SEED_B, SEED_SYNACK};
use crate::{DetRng, Input};
use rand_core::RngCore;

/// X25519 public keys of small order (and p-1, p, p+1), which must give the all-zero secret
/// or be rejected (RFC 7748 §6); the fuzzer picks one by index, optionally with bit 255 set.
const X25519_SPECIAL: [[u8; 32]; 7] = [
    [0; 32],
    [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    [
        0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a, 0xda, 0x09,
        0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00,
    ],
    [
        0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b, 0x04, 0x44,
        0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57,
    ],
    [
        0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ],
    [
        0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ],
    [
        0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ],
];

pub struct SessionTarget {
    tep: Tep,
    cfg: Config,
    plan_a: Plan,
    plan_b: Plan,
    init1: Vec<u8>,
    init2: Vec<u8>,
    session_id: Vec<u8>,
}

enum Expect {
    Raw,
    Fails(Error),
    Establishes,
}

impl SessionTarget {
    pub fn new(tep: Tep) -> Self {
        let cfg = Config { teps: vec![tep], ..Config::default() };
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut DetRng::new(SEED_SYNACK));
        let plan_a = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
        let plan_b = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
        assert_eq!(plan_a.tep, tep);
        let mut a = Session::new(&plan_a, cfg.clone(), None, &mut DetRng::new(SEED_A)).unwrap();
        let mut b = Session::new(&plan_b, cfg.clone(), None, &mut DetRng::new(SEED_B)).unwrap();
        let init1 = a.take_outgoing();
        b.receive(&init1).unwrap();
        let init2 = b.take_outgoing();
        a.receive(&init2).unwrap();
        let session_id = a.session_id().unwrap().to_vec();
        assert_eq!(b.session_id(), Some(&session_id[..]));
        SessionTarget { tep, cfg, plan_a, plan_b, init1, init2, session_id }
    }

    /// A Pub field: raw bytes, a well-framed point from the input, or (X25519) a special point.
    fn pub_field(&self, r: &mut Input) -> Vec<u8> {
        let m = r.u8();
        match self.tep {
            Tep::Curve25519 => {
                if m & 3 == 1 {
                    let mut p = X25519_SPECIAL[usize::from(m >> 2) % X25519_SPECIAL.len()];
                    if m & 0x80 != 0 {
                        p[31] |= 0x80;
                    }
                    p.to_vec()
                } else {
                    r.array::<32>().to_vec()
                }
            }
            Tep::P256 | Tep::P521 => {
                let point_len = self.tep.pub_field_len() - 2;
                if m & 1 == 1 {
                    let mut f = r.take(self.tep.pub_field_len()).to_vec();
                    f.resize(self.tep.pub_field_len(), 0);
                    f
                } else {
                    let mut f = (point_len as u16).to_be_bytes().to_vec();
                    f.push(0x02 | ((m >> 1) & 1));
                    let x = r.take(point_len - 1);
                    f.extend_from_slice(x);
                    f.resize(2 + point_len, 0);
                    f
                }
            }
        }
    }

    /// One execution; returns what it reached (bits: 1 established by a fuzzer-made Init and
    /// delivered a frame sealed under the keys the target derived for it, 2
    /// bad public key, 4 no common cipher, 8 cipher not offered, 16 genuine session ID,
    /// 32 host A tested, 64 host B tested).
    pub fn run(&mut self, data: &[u8]) -> u32 {
        let mut r = Input::new(data);
        let flags = r.u8();
        let test_b = flags & 1 == 0;
        let (plan, seed) = if test_b { (&self.plan_b, SEED_B) } else { (&self.plan_a, SEED_A) };
        let mut s = Session::new(plan, self.cfg.clone(), None, &mut DetRng::new(seed)).unwrap();
        if !test_b {
            assert_eq!(s.take_outgoing(), self.init1, "deterministic Init1");
        }
        let mut stream;
        let mut expect = Expect::Raw;
        let mut genuine = false;
        // The fuzzer's Init fields: (N from its message, Pub field, sym_cipher of its Init2).
        let mut fields: Option<([u8; 32], Vec<u8>, u16)> = None;
        match (flags >> 1) & 3 {
            1 => {
                // A well-formed Init message with fuzzer-chosen fields.
                if test_b {
                    let nc = r.u8() % 8;
                    let sym_ciphers: Vec<u16> = (0..nc).map(|_| cipher_id(&mut r)).collect();
                    let nonce = r.array::<32>();
                    let pub_key = self.pub_field(&mut r);
                    let ign = usize::from(r.u8() % 16);
                    let ignored = r.take(ign).to_vec();
                    expect = if !self.cfg.aeads.iter().any(|a| sym_ciphers.contains(&a.id())) {
                        Expect::Fails(Error::NoCommonCipher)
                    } else if self.replay_agree(seed, &pub_key).is_none() {
                        Expect::Fails(Error::BadPublicKey)
                    } else {
                        Expect::Establishes
                    };
                    fields = Some((nonce, pub_key.clone(), 0));
                    stream = Init1 { sym_ciphers, nonce, pub_key, ignored }.encode().unwrap();
                } else {
                    let sym_cipher = cipher_id(&mut r);
                    let nonce = r.array::<32>();
                    let pub_key = self.pub_field(&mut r);
                    let ign = usize::from(r.u8() % 16);
                    let ignored = r.take(ign).to_vec();
                    expect = if !self.cfg.aeads.iter().any(|a| a.id() == sym_cipher) {
                        Expect::Fails(Error::CipherNotOffered(sym_cipher))
                    } else if self.replay_agree(seed, &pub_key).is_none() {
                        Expect::Fails(Error::BadPublicKey)
                    } else {
                        Expect::Establishes
                    };
                    fields = Some((nonce, pub_key.clone(), sym_cipher));
                    stream = Init2 { sym_cipher, nonce, pub_key, ignored }.encode().unwrap();
                }
            }
            2 => {
                // The genuine peer's message, with up to 4 bytes changed.
                stream = if test_b { self.init1.clone() } else { self.init2.clone() };
                let n = r.u8() % 5;
                genuine = n == 0;
                for _ in 0..n {
                    let i = usize::from(r.u16()) % stream.len();
                    stream[i] ^= r.u8().max(1);
                }
            }
            _ => stream = Vec::new(),
        }
        let init_len = stream.len();
        // Where the Init message establishes the session, a genuine frame follows it: the target
        // derives the keys itself (its own ES for the fuzzer's public key), so the session must
        // deliver the frame's data.
        let frame = matches!(expect, Expect::Establishes).then(|| {
            let fl = r.u8() & !FLAG_URGP;
            let n = usize::from(r.u8() % 64);
            (fl, r.take(n).to_vec())
        });
        stream.extend_from_slice(r.rest());
        // The Init message in two receive calls, split where the flags say; then the rest.
        let cut = usize::from(flags >> 3) * init_len / 32;
        let _ = s.receive(&stream[..cut]);
        let _ = s.receive(&stream[cut..init_len]);
        assert_eq!(s.plaintext_len(), 0, "plaintext from an Init message");
        let mut sealed = false;
        if let (Some((fl, data)), Some((nonce, pub_key, sym_cipher))) = (&frame, &fields) {
            assert!(s.session_id().is_some(), "Init with a valid key did not establish: {:?}", s.error());
            let out = s.take_outgoing();
            let (init1, init2, n_a, ab, aead) = if test_b {
                let Ok(Parse::Done(m2, n)) = Init2::parse(self.tep, &out) else { panic!("B sent no Init2") };
                assert_eq!(n, out.len(), "B sent more than Init2");
                let aead = Aead::from_id(m2.sym_cipher).expect("B chose an unknown AEAD");
                assert!(self.cfg.aeads.contains(&aead));
                (stream[..init_len].to_vec(), out, *nonce, true, aead)
            } else {
                assert!(out.is_empty());
                let mut n_a = [0u8; 32];
                DetRng::new(SEED_A).fill_bytes(&mut n_a);
                (self.init1.clone(), stream[..init_len].to_vec(), n_a, false, Aead::from_id(*sym_cipher).unwrap())
            };
            let es = self.replay_agree(seed, pub_key).expect("ES");
            let prk = keys::prk(&n_a, &plan.eno.transcript, &init1, &init2, &es);
            let mk0 = keys::first_master_key(&prk, &[]);
            let mut peer = Direction::new(&mk0, aead, ab, init_len as u64);
            let mut pt = vec![*fl];
            pt.extend_from_slice(data);
            let f = peer.seal(0, &pt);
            s.receive(&f).expect("a genuine frame under the keys of the fuzzer's public key");
            assert_eq!(&s.take_plaintext(), data, "frame data");
            sealed = true;
        }
        let _ = s.receive(&stream[init_len..]);
        assert_eq!(s.plaintext_len(), 0, "forged frames gave plaintext");
        let mut reached = if test_b { 64 } else { 32 };
        match expect {
            Expect::Raw => {}
            Expect::Fails(e) => {
                assert_eq!(s.error(), Some(e), "Init outcome");
                assert!(s.session_id().is_none());
                reached |= match e {
                    Error::BadPublicKey => 2,
                    Error::NoCommonCipher => 4,
                    _ => 8,
                };
            }
            Expect::Establishes => {
                assert!(sealed);
                reached |= 1;
            }
        }
        if genuine {
            assert_eq!(s.session_id(), Some(&self.session_id[..]), "genuine peer, other session ID");
            reached |= 16;
        }
        let _ = s.receive_eof();
        reached
    }

    /// The session's own ES with this Pub field, computed outside tcpcrypt-proto.
    fn replay_agree(&self, seed: u64, pub_key: &[u8]) -> Option<Vec<u8>> {
        let mut rng = DetRng::new(seed);
        let mut nonce = [0u8; 32];
        rng.fill_bytes(&mut nonce);
        agree_as(self.tep, &mut rng, pub_key)
    }
}

/// A sym_cipher id: mostly the known ones, sometimes any.
fn cipher_id(r: &mut Input) -> u16 {
    match r.u8() % 5 {
        0 => 0x0001,
        1 => 0x0002,
        2 => 0x0010,
        _ => r.u16(),
    }
}
