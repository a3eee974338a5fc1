//! Two sessions against each other: handshakes for every TEP and AEAD, data both ways, FIN,
//! rekey, resumption, and the fatal errors (tampering, truncation, bad keys, bad ciphers).

use proptest::prelude::*;
use rand_core::OsRng;
use tcpcrypt_proto::msgs::{FrameRef, Init1, Init2, Parse, Plaintext};
use tcpcrypt_proto::resume::{self, KeyMode};
use tcpcrypt_proto::{eno, Acceptor, Aead, Config, Error, Event, Fallback, Role, Session, Tep};

fn cfg(tep: Tep, aead: Aead) -> Config {
    Config { teps: vec![tep], aeads: vec![aead], ..Config::default() }
}

fn plans(a: &Config, b: &Config) -> (resume::Plan, resume::Plan) {
    let syn = resume::syn_option(&a.teps, None).unwrap();
    let (synack, _) = resume::synack_option(&syn, &b.teps, None, 8, &mut OsRng);
    (
        resume::negotiate(&syn, &synack, false, true, &a.teps, &[]).unwrap(),
        resume::negotiate(&syn, &synack, true, true, &b.teps, &[]).unwrap(),
    )
}

fn pair(a: Config, b: Config) -> (Session, Session) {
    let (pa, pb) = plans(&a, &b);
    (Session::new(&pa, a, None, &mut OsRng).unwrap(), Session::new(&pb, b, None, &mut OsRng).unwrap())
}

/// Deliver everything in flight, in chunks of `chunk` bytes (to exercise partial input).
fn pump(a: &mut Session, b: &mut Session, chunk: usize) {
    loop {
        let x = a.take_outgoing();
        let y = b.take_outgoing();
        if x.is_empty() && y.is_empty() {
            return;
        }
        for c in x.chunks(chunk) {
            b.receive(c).unwrap();
        }
        for c in y.chunks(chunk) {
            a.receive(c).unwrap();
        }
    }
}

#[test]
fn every_tep_and_aead_handshakes_and_exchanges_data() {
    for tep in Tep::ALL {
        for aead in Aead::ALL {
            let (mut a, mut b) = pair(cfg(tep, aead), cfg(tep, aead));
            assert_eq!(a.role(), Role::A);
            assert_eq!(b.role(), Role::B);
            let init1 = a.take_outgoing();
            // Init1: 8 + 1 + 2 + 32 + pub.
            assert_eq!(init1.len(), 9 + 2 + 32 + tep.pub_field_len());
            b.receive(&init1).unwrap();
            assert!(b.is_established());
            let init2 = b.take_outgoing();
            assert_eq!(init2.len(), 10 + 32 + tep.pub_field_len());
            a.receive(&init2).unwrap();
            assert!(a.is_established());
            assert_eq!(a.aead(), Some(aead));
            assert_eq!(a.session_id(), b.session_id());
            let sid = a.session_id().unwrap();
            assert_eq!(sid.len(), 33);
            assert_eq!(sid[0], tep.id());
            let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
            a.send(&big).unwrap();
            b.send(b"pong").unwrap();
            pump(&mut a, &mut b, 1400);
            assert_eq!(b.take_plaintext(), big);
            assert_eq!(a.take_plaintext(), b"pong");
            a.send_fin().unwrap();
            pump(&mut a, &mut b, 1400);
            assert!(b.peer_fin());
            b.receive_eof().unwrap();
            assert!(a.send(b"x").is_err());
            // B can still send after A's half-close.
            b.send(b"late").unwrap();
            b.send_fin().unwrap();
            pump(&mut a, &mut b, 7);
            assert_eq!(a.take_plaintext(), b"late");
            assert!(a.peer_fin());
            let st = a.stats();
            assert_eq!(st.handshake_bytes_sent, init1.len() as u64);
            assert_eq!(st.plaintext_sent, big.len() as u64);
            assert_eq!(st.frames_sent, big.len().div_ceil(16384) as u64 + 1);
        }
    }
}

#[test]
fn aead_preference_is_bs() {
    let a = Config { aeads: vec![Aead::ChaCha20Poly1305, Aead::Aes128Gcm], ..Config::default() };
    let b = Config { aeads: vec![Aead::Aes256Gcm, Aead::Aes128Gcm, Aead::ChaCha20Poly1305], ..Config::default() };
    let (mut x, mut y) = pair(a, b);
    pump(&mut x, &mut y, 100_000);
    assert_eq!(x.aead(), Some(Aead::Aes128Gcm));
    assert_eq!(y.aead(), Some(Aead::Aes128Gcm));
}

#[test]
fn no_common_cipher_aborts() {
    let (mut a, mut b) = pair(cfg(Tep::Curve25519, Aead::Aes128Gcm), cfg(Tep::Curve25519, Aead::Aes256Gcm));
    assert_eq!(b.receive(&a.take_outgoing()), Err(Error::NoCommonCipher));
    // Dead for good.
    assert_eq!(b.send(b"x"), Err(Error::NoCommonCipher));
}

#[test]
fn init2_with_unoffered_cipher_aborts() {
    let c = cfg(Tep::Curve25519, Aead::Aes128Gcm);
    let (mut a, mut b) = pair(c.clone(), Config { aeads: vec![Aead::Aes128Gcm], ..c });
    b.receive(&a.take_outgoing()).unwrap();
    let mut init2 = b.take_outgoing();
    init2[9] = 0x02; // sym_cipher := AES-256-GCM
    assert_eq!(a.receive(&init2), Err(Error::CipherNotOffered(2)));
}

#[test]
fn bad_public_keys_abort() {
    // X25519: the all-zero public key gives the all-zero secret (RFC 7748 §6).
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c.clone());
    let mut init1 = a.take_outgoing();
    let n = init1.len();
    init1[n - 32..].fill(0);
    assert_eq!(b.receive(&init1), Err(Error::BadPublicKey));
    // P-256: a point not on the curve, and an uncompressed-format prefix.
    for (i, v) in [(2usize, 0xffu8), (0, 0x04)] {
        let p = cfg(Tep::P256, Aead::Aes128Gcm);
        let (mut a, mut b) = pair(p.clone(), p);
        let mut init1 = a.take_outgoing();
        let n = init1.len();
        let pk = &mut init1[n - 33..];
        if i == 0 {
            pk[0] = v;
        } else {
            pk[1..].fill(v);
        }
        assert_eq!(b.receive(&init1), Err(Error::BadPublicKey));
    }
}

#[test]
fn wrong_magic_rejected_on_first_byte() {
    let (_, mut b) = pair(Config::default(), Config::default());
    assert!(matches!(b.receive(&[0x16]), Err(Error::BadMagic { .. })));
    let (mut a, _) = pair(Config::default(), Config::default());
    let mut bytes = vec![];
    bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert!(matches!(a.receive(&bytes), Err(Error::BadMagic { .. })));
}

#[test]
fn ignored_trailing_bytes_are_accepted_and_in_the_prk() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c);
    let raw = a.take_outgoing();
    let Parse::Done(mut m, n) = Init1::parse(Tep::Curve25519, &raw).unwrap() else { panic!() };
    assert_eq!(n, raw.len());
    assert_eq!(m.encode().unwrap(), raw);
    m.ignored = vec![0xee; 10];
    let longer = m.encode().unwrap();
    b.receive(&longer).unwrap();
    assert!(b.is_established());
    // A's PRK used the Init1 without the extra bytes: keys differ, the first frame fails.
    a.receive(&b.take_outgoing()).unwrap();
    b.send(b"hi").unwrap();
    assert_eq!(a.receive(&b.take_outgoing()), Err(Error::BadTag));
}

#[test]
fn every_tampered_byte_of_a_frame_is_fatal_and_delivers_nothing() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    a.send(b"attack at dawn").unwrap();
    let frame = a.take_outgoing();
    for i in 0..frame.len() {
        for bit in [0x01u8, 0x80] {
            let (mut a2, mut b2) = pair(c.clone(), c.clone());
            pump(&mut a2, &mut b2, 1 << 20);
            a2.send(b"attack at dawn").unwrap();
            let mut f = a2.take_outgoing();
            f[i] ^= bit;
            let r = b2.receive(&f);
            // Length changes may make the frame incomplete: then a FIN must abort.
            match r {
                Err(_) => {}
                Ok(()) => {
                    assert!(i == 1 || i == 2, "byte {i} flip accepted");
                    assert_eq!(b2.receive_eof(), Err(Error::TruncatedStream));
                }
            }
            assert_eq!(b2.plaintext_len(), 0, "plaintext leaked after tampering byte {i}");
            // Reserved cres bits are part of the AAD: flipping them fails authentication too.
        }
    }
}

#[test]
fn replayed_or_reordered_frames_fail() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c);
    pump(&mut a, &mut b, 1 << 20);
    a.send(b"one").unwrap();
    let f1 = a.take_outgoing();
    a.send(b"two").unwrap();
    let f2 = a.take_outgoing();
    b.receive(&f2).map(|_| ()).expect_err("frame out of order must fail");
    let (mut a, mut b) = pair(Config::default(), Config::default());
    pump(&mut a, &mut b, 1 << 20);
    a.send(b"one").unwrap();
    let f1b = a.take_outgoing();
    b.receive(&f1b).unwrap();
    assert_eq!(b.receive(&f1b), Err(Error::BadTag));
    let _ = f1;
}

#[test]
fn fin_rules() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    a.send(b"abc").unwrap();
    pump(&mut a, &mut b, 1 << 20);
    // TCP FIN without FINp: abort, distinct from EOF.
    assert_eq!(b.receive_eof(), Err(Error::TruncatedStream));
    // Frame after FINp.
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    a.send_fin().unwrap();
    let fin = a.take_outgoing();
    b.receive(&fin).unwrap();
    assert_eq!(b.next_event(), Some(Event::Established));
    assert_eq!(b.next_event(), Some(Event::PeerFin));
    assert_eq!(b.receive(&[0, 0, 17]).and_then(|_| b.receive(&[0; 17])), Err(Error::DataAfterFin));
    // FIN queued before keys: sent right after them.
    let (mut a, mut b) = pair(c.clone(), c);
    a.send(b"early").unwrap();
    a.send_fin().unwrap();
    pump(&mut a, &mut b, 3);
    assert_eq!(b.take_plaintext(), b"early");
    assert!(b.peer_fin());
}

#[test]
fn rekey_both_ways_and_keepalive() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c);
    pump(&mut a, &mut b, 1 << 20);
    assert!(a.initiate_rekey().unwrap());
    // Only one empty-frame rekey outstanding.
    assert!(!a.initiate_rekey().unwrap());
    assert_eq!(a.generations(), (1, 0));
    let f = a.take_outgoing();
    assert_eq!(f[0] & 1, 1, "rekey bit set");
    b.receive(&f).unwrap();
    assert_eq!(b.generations(), (1, 1));
    // B answered immediately with a rekey = 1 frame (the verified keep-alive answer).
    let ans = b.take_outgoing();
    assert_eq!(ans[0] & 1, 1);
    a.receive(&ans).unwrap();
    assert_eq!(a.generations(), (1, 1));
    for i in 0..5 {
        a.send(&[i; 40_000]).unwrap();
        b.send(&[i; 30_000]).unwrap();
        if i % 2 == 0 {
            assert!(b.initiate_rekey().unwrap());
        }
        pump(&mut a, &mut b, 1000);
        assert_eq!(a.take_plaintext(), vec![i; 30_000]);
        assert_eq!(b.take_plaintext(), vec![i; 40_000]);
    }
    assert_eq!(a.generations(), b.generations());
    assert_eq!(a.generations().0, 4);
    // Rekey after FIN: the responder does not answer.
    a.send_fin().unwrap();
    pump(&mut a, &mut b, 1000);
    assert!(b.initiate_rekey().unwrap());
    let f = b.take_outgoing();
    a.receive(&f).unwrap();
    assert!(!a.has_outgoing());
}

#[test]
fn automatic_rekey_by_volume() {
    let c = Config { rekey_after_bytes: Some(100_000), ..Config::default() };
    let (mut a, mut b) = pair(c.clone(), c);
    pump(&mut a, &mut b, 1 << 20);
    let data = vec![5u8; 1_000_000];
    a.send(&data).unwrap();
    pump(&mut a, &mut b, 65536);
    assert_eq!(b.take_plaintext(), data);
    assert!(a.generations().0 >= 8, "{:?}", a.generations());
    assert_eq!(a.generations().0, b.generations().1);
    assert_eq!(b.generations().0, b.generations().1);
}

/// Resume with `ta` against a passive opener whose acceptor holds the chain of `ta`'s partner.
fn resume_once(ta: tcpcrypt_proto::ResumeTicket, cache: &mut Acceptor, a_cfg: &Config) -> (Session, Session) {
    let syn = resume::syn_option(&a_cfg.teps, Some(&ta.suboption(&[7; 8]))).unwrap();
    assert!(syn.len() <= 40);
    let (synack, held) = resume::synack_option(&syn, &a_cfg.teps, Some(&mut *cache), 8, &mut OsRng);
    let held = held.expect("B resumes");
    assert!(cache.take(&held.peer_half(), held.tep).0.is_none(), "ticket taken");
    let pa = resume::negotiate(&syn, &synack, false, true, &a_cfg.teps, &[&ta]).unwrap();
    let pb = resume::negotiate(&syn, &synack, true, true, &a_cfg.teps, &[&held]).unwrap();
    assert!(matches!(pa.mode, KeyMode::Resume { .. }));
    (
        Session::new(&pa, a_cfg.clone(), Some(ta), &mut OsRng).unwrap(),
        Session::new(&pb, a_cfg.clone(), Some(held), &mut OsRng).unwrap(),
    )
}

#[test]
fn resumption_with_role_swap_and_chain() {
    let c = Config { aeads: vec![Aead::ChaCha20Poly1305], ..Config::default() };
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    let sid0 = a.session_id().unwrap().to_vec();
    let (ta, tb) = (a.take_ticket().unwrap(), b.take_ticket().unwrap());
    assert_eq!(ta.id, tb.id);
    assert_eq!(ta.index, 1);
    // Each host's acceptor holds the chain from ss[1] (the other host's ss[1] is its partner).
    let (mut acc_a, mut acc_b) = (Acceptor::new(8), Acceptor::new(8));
    acc_a.insert(b"10.0.0.2", ta);
    acc_b.insert(b"10.0.0.1", tb.clone());
    // Resume with the original B as the active opener (roles swap).
    let (mut x, mut y) = resume_once(tb, &mut acc_a, &c);
    assert_eq!(x.role(), Role::A);
    assert!(x.is_established() && y.is_established());
    assert!(!x.has_outgoing(), "no Init messages when resuming");
    assert_eq!(x.aead(), Some(Aead::ChaCha20Poly1305), "AEAD of the original session");
    let sid1 = x.session_id().unwrap().to_vec();
    assert_eq!(Some(&sid1[..]), y.session_id());
    assert_ne!(sid0, sid1);
    assert_eq!(sid1[0], 0x23 | 0x80, "v = 1 in a resumed session ID");
    x.send(b"from original B").unwrap();
    y.send(b"from original A").unwrap();
    pump(&mut x, &mut y, 5);
    assert_eq!(y.take_plaintext(), b"from original B");
    assert_eq!(x.take_plaintext(), b"from original A");
    let (tx, ty) = (x.take_ticket().unwrap(), y.take_ticket().unwrap());
    assert_eq!((tx.index, tx.id), (2, ty.id));
    // ss[2] the other way: the original B (x) is the passive opener; its acceptor derived ss[2].
    let (mut p, mut q) = resume_once(ty, &mut acc_b, &c);
    p.send(b"again").unwrap();
    pump(&mut p, &mut q, 100);
    assert_eq!(q.take_plaintext(), b"again");
    assert_ne!(p.session_id().unwrap(), &sid1[..]);
}

#[test]
fn resumption_declined_or_mismatched_falls_to_fresh_or_off() {
    let c = Config::default();
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    let ta = a.take_ticket().unwrap();
    // B has no ticket: it answers fresh; A negotiates fresh key exchange.
    let syn = resume::syn_option(&c.teps, Some(&ta.suboption(&[1; 8]))).unwrap();
    let mut empty = Acceptor::new(8);
    let (synack, held) = resume::synack_option(&syn, &c.teps, Some(&mut empty), 8, &mut OsRng);
    assert!(held.is_none());
    let pa = resume::negotiate(&syn, &synack, false, true, &c.teps, &[&ta]).unwrap();
    assert_eq!(pa.mode, KeyMode::Fresh);
    // B answers resumption with a half that does not match: A must ignore that suboption,
    // and with nothing else in B's option, ENO is disabled.
    let bogus = eno::SynOption::new(
        Some(eno::Global::new(false, true)),
        vec![eno::TepSuboption::with_data(0x23, vec![0x55; 17])],
    )
    .encode()
    .unwrap();
    assert_eq!(resume::negotiate(&syn, &bogus, false, true, &c.teps, &[&ta]), Err(Fallback::NoCommonTep));
    // A passive opener given a resumption plan but the wrong ticket refuses.
    let (mut a, mut b) = pair(c.clone(), c.clone());
    pump(&mut a, &mut b, 1 << 20);
    let (t1, t2) = (a.take_ticket().unwrap(), b.take_ticket().unwrap());
    let mut cache = Acceptor::new(8);
    cache.insert(b"p", t2);
    let syn = resume::syn_option(&c.teps, Some(&t1.suboption(&[]))).unwrap();
    let (synack, held) = resume::synack_option(&syn, &c.teps, Some(&mut cache), 0, &mut OsRng);
    assert!(held.is_some());
    let pb = resume::negotiate(&syn, &synack, true, true, &c.teps, &[held.as_ref().unwrap()]).unwrap();
    assert_eq!(Session::new(&pb, c.clone(), None, &mut OsRng).err(), Some(Error::ResumeMismatch));
    // Suboption data shorter than 9 bytes is a fresh offer (§3.5).
    let short = eno::SynOption::new(None, vec![eno::TepSuboption::with_data(0x23, vec![1, 2, 3])]).encode().unwrap();
    let (synack, held) = resume::synack_option(&short, &c.teps, Some(&mut cache), 8, &mut OsRng);
    assert!(held.is_none());
    assert_eq!(resume::negotiate(&short, &synack, false, true, &c.teps, &[]).unwrap().mode, KeyMode::Fresh);
}

#[test]
fn fallback_cases() {
    let teps = [Tep::Curve25519];
    let syn = resume::syn_option(&teps, None).unwrap();
    // Peer without ENO.
    assert_eq!(resume::negotiate(&syn, &[], false, false, &teps, &[]), Err(Fallback::NoRemoteOption));
    // Peer with ENO but no common TEP: B sends a vacuous option.
    let (synack, _) = resume::synack_option(&syn, &[Tep::P256], None, 8, &mut OsRng);
    assert_eq!(synack, vec![69, 3, 0x01]);
    assert_eq!(resume::negotiate(&syn, &synack, false, true, &teps, &[]), Err(Fallback::NoCommonTep));
    // Non-tcpcrypt TEPs are never negotiated by us.
    let other = eno::SynOption::new(None, vec![eno::TepSuboption::plain(0x30)]).encode().unwrap();
    let (synack, _) = resume::synack_option(&other, &teps, None, 8, &mut OsRng);
    assert_eq!(synack, vec![69, 3, 0x01]);
    // A middlebox echoing A's option.
    assert_eq!(resume::negotiate(&syn, &syn, false, true, &teps, &[]), Err(Fallback::SameRole));
    // SYN without ENO: B sends none.
    assert!(resume::synack_option(&[], &teps, None, 8, &mut OsRng).0.is_empty());
}

#[test]
fn transcript_tampering_breaks_the_session() {
    // Option bytes altered in transit (§4.8): each side sees a different transcript, and
    // no frame authenticates.
    let c = Config::default();
    let syn = resume::syn_option(&c.teps, None).unwrap();
    let (synack, _) = resume::synack_option(&syn, &c.teps, None, 8, &mut OsRng);
    let mut syn_seen_by_b = syn.clone();
    syn_seen_by_b.retain(|&x| x != 0x21); // P-256 stripped from A's offer
    syn_seen_by_b[1] = syn_seen_by_b.len() as u8;
    let pa = resume::negotiate(&syn, &synack, false, true, &c.teps, &[]).unwrap();
    let pb = resume::negotiate(&syn_seen_by_b, &synack, true, true, &c.teps, &[]).unwrap();
    let mut a = Session::new(&pa, c.clone(), None, &mut OsRng).unwrap();
    let mut b = Session::new(&pb, c, None, &mut OsRng).unwrap();
    b.receive(&a.take_outgoing()).unwrap();
    a.receive(&b.take_outgoing()).unwrap();
    assert_ne!(a.session_id(), b.session_id());
    a.send(b"x").unwrap();
    assert_eq!(b.receive(&a.take_outgoing()), Err(Error::BadTag));
}

#[test]
fn message_round_trips() {
    let m1 = Init1 { sym_ciphers: vec![1, 2, 0x10, 0x7777], nonce: [3; 32], pub_key: vec![9; 35], ignored: vec![] };
    let e = m1.encode().unwrap();
    assert_eq!(Init1::parse(Tep::P256, &e).unwrap(), Parse::Done(m1.clone(), e.len()));
    for cut in 0..e.len() {
        assert!(matches!(Init1::parse(Tep::P256, &e[..cut]), Ok(Parse::Incomplete(_))), "cut {cut}");
    }
    let m2 = Init2 { sym_cipher: 1, nonce: [4; 32], pub_key: vec![8; 32], ignored: vec![1, 2] };
    let e = m2.encode().unwrap();
    assert_eq!(Init2::parse(Tep::Curve25519, &e).unwrap(), Parse::Done(m2, e.len()));
    // message_len shorter than the fields.
    let mut bad = m1.encode().unwrap();
    bad[7] = 10;
    assert!(matches!(Init1::parse(Tep::P256, &bad), Err(Error::BadLength(_))));
    // message_len absurdly large.
    let mut big = m1.encode().unwrap();
    big[4] = 0x7f;
    assert!(matches!(Init1::parse(Tep::P256, &big), Err(Error::TooLarge(_))));
    let p = Plaintext { flags: 1, urgent: Some(5), data: b"ab" };
    assert_eq!(Plaintext::parse(&p.encode()).unwrap(), Plaintext { flags: 3, urgent: Some(5), data: b"ab" });
    assert!(Plaintext::parse(&[2, 0]).is_err());
    assert!(Plaintext::parse(&[]).is_err());
    assert!(matches!(FrameRef::parse(&[0, 0, 5, 1, 2, 3, 4, 5]), Err(Error::BadLength(_))));
}

fn tep_sub() -> impl Strategy<Value = eno::TepSuboption> {
    (0x20u8..=0x7f, any::<bool>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(t, v, d)| {
        if v {
            eno::TepSuboption::with_data(t, d)
        } else {
            eno::TepSuboption::plain(t)
        }
    })
}

proptest! {
    #[test]
    fn eno_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
        let _ = eno::SynOption::parse(&bytes);
        let _ = eno::SynOption::parse_contents(&bytes);
        let _ = eno::NonSynOption::parse(&bytes);
        let mut opt = vec![69, (bytes.len() + 2) as u8];
        opt.extend_from_slice(&bytes);
        if let Ok(p) = eno::SynOption::parse(&opt) {
            // Whatever parses re-encodes (when it fits) to something that parses the same.
            if let Ok(e) = p.encode() {
                prop_assert_eq!(eno::SynOption::parse(&e).unwrap(), p);
            }
        }
        let _ = resume::negotiate(&opt, &bytes, false, true, &Tep::ALL, &[]);
        let _ = resume::synack_option(&opt, &Tep::ALL, Some(&mut Acceptor::new(1)), 8, &mut OsRng);
    }

    #[test]
    fn eno_encode_parse_round_trip(g in proptest::option::of(0u8..0x20), subs in proptest::collection::vec(tep_sub(), 0..5)) {
        let o = eno::SynOption::new(g.map(eno::Global), subs);
        if let Ok(e) = o.encode() {
            prop_assert_eq!(e[1] as usize, e.len());
            prop_assert_eq!(eno::SynOption::parse(&e).unwrap(), o);
        }
    }

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        for t in Tep::ALL {
            let _ = Init1::parse(t, &bytes);
            let _ = Init2::parse(t, &bytes);
        }
        let _ = FrameRef::parse(&bytes);
        let _ = Plaintext::parse(&bytes);
    }

    #[test]
    fn session_survives_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..300), magic in any::<bool>()) {
        let c = Config::default();
        let (mut a, mut b) = pair(c.clone(), c);
        let mut input = if magic { 0x15101a0eu32.to_be_bytes().to_vec() } else { vec![] };
        input.extend_from_slice(&bytes);
        let _ = b.receive(&input);
        prop_assert_eq!(b.plaintext_len(), 0);
        b.receive(&a.take_outgoing()).ok();
        let _ = a.receive(&bytes);
        prop_assert_eq!(a.plaintext_len(), 0);
    }

    #[test]
    fn arbitrary_chunking_is_byte_exact(data in proptest::collection::vec(any::<u8>(), 0..50_000), chunk in 1usize..5000, frame in 1usize..20_000) {
        let c = Config { max_frame_data: frame, ..Config::default() };
        let (mut a, mut b) = pair(c.clone(), c);
        a.send(&data).unwrap();
        a.send_fin().unwrap();
        pump(&mut a, &mut b, chunk);
        prop_assert_eq!(b.take_plaintext(), data);
        prop_assert!(b.peer_fin());
    }
}
