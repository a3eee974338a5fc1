//! Item 5 of issue 22: the key schedule's own HMAC/HKDF (whose state is wiped) agrees with
//! the RFCs and with the `hkdf` crate; secrets compare in constant time; the opt-in key log
//! lets a third party derive the session ID (RFC 8548 §3.3, §3.4) from ES and the Init
//! messages; data queued before the key exchange is capped; the default rekey interval.

use rand_core::{OsRng, RngCore};
use subtle::ConstantTimeEq;
use tcpcrypt_proto::keys::{self, Secret};
use tcpcrypt_proto::{hex, resume, Config, Error, Session, Tep, DEFAULT_MAX_PENDING, DEFAULT_REKEY_AFTER_BYTES};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn hmac_sha256_rfc4231() {
    // RFC 4231 test cases 1, 2 and 6 (a 131-byte key: hashed first).
    let k1 = [0x0b; 20];
    assert_eq!(hex(&*keys::hmac_sha256(&k1, &[b"Hi There"])), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    assert_eq!(
        hex(&*keys::hmac_sha256(b"Jefe", &[b"what do ya ", b"want for nothing?"])),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    assert_eq!(
        hex(&*keys::hmac_sha256(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"])),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn own_hkdf_matches_the_hkdf_crate() {
    for round in 0..200usize {
        let mut salt = vec![0u8; round % 70];
        let mut ikm = vec![0u8; (round * 7) % 200];
        OsRng.fill_bytes(&mut salt);
        OsRng.fill_bytes(&mut ikm);
        let prk = keys::extract(&salt, &ikm);
        let (want_prk, hk) = hkdf::Hkdf::<sha2::Sha256>::extract(Some(&salt), &ikm);
        assert_eq!(prk.expose()[..], want_prk[..], "round {round}");
        let info: Vec<u8> = (0..(round % 50) as u8).collect();
        let mut out = vec![0u8; 1 + (round * 13) % 300];
        keys::cprf(&prk, &[&info[..info.len() / 2], &info[info.len() / 2..]], &mut out).unwrap();
        let mut want = vec![0u8; out.len()];
        hk.expand(&info, &mut want).unwrap();
        assert_eq!(out, want, "round {round}");
    }
}

#[test]
fn secrets_compare_in_constant_time_only() {
    let a = Secret::from_bytes([7; 32]);
    let b = Secret::from_bytes([7; 32]);
    let mut c = [7; 32];
    c[31] = 8;
    assert!(bool::from(a.ct_eq(&b)));
    assert!(!bool::from(a.ct_eq(&Secret::from_bytes(c))));
}

fn pair(cfg: Config) -> (Session, Session, Vec<u8>) {
    let syn = resume::syn_option(&cfg.teps, None).unwrap();
    let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut OsRng);
    let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
    let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
    let transcript = [syn, synack].concat();
    (Session::new(&pa, cfg.clone(), None, &mut OsRng).unwrap(), Session::new(&pb, cfg, None, &mut OsRng).unwrap(), transcript)
}

#[test]
fn key_log_gives_the_session_id_by_the_rfc_derivation() {
    for tep in Tep::ALL {
        let cfg = Config { teps: vec![tep], key_log: true, ..Config::default() };
        let (mut a, mut b, transcript) = pair(cfg);
        let init1 = a.take_outgoing();
        b.receive(&init1).unwrap();
        let init2 = b.take_outgoing();
        a.receive(&init2).unwrap();
        let (la, lb) = (a.take_key_log(), b.take_key_log());
        assert_eq!(la.len(), 2, "A logs ES and SS");
        assert_eq!(la.iter().map(|l| l.to_string()).collect::<Vec<_>>(), lb.iter().map(|l| l.to_string()).collect::<Vec<_>>());
        let es_line: Vec<&str> = la[0].split(' ').collect();
        let ss_line: Vec<&str> = la[1].split(' ').collect();
        assert_eq!((es_line[0], ss_line[0], ss_line[2]), ("TCPCRYPT_ES", "TCPCRYPT_SS", "0"));
        // N_A is Init1's bytes after magic, message_len, nciphers and the cipher list.
        let n_a = &init1[9 + 2 * init1[8] as usize..][..32];
        assert_eq!(es_line[1], hex(n_a));
        // PRK = Extract(N_A, eno_transcript | Init1 | Init2 | ES) = ss[0] (§3.3).
        let prk = keys::prk(n_a, &transcript, &init1, &init2, &unhex(es_line[2]));
        assert_eq!(hex(prk.expose()), ss_line[3]);
        // session_id[0] = TEP-byte | CPRF(ss[0], CONST_SESSID, K_LEN) (§3.4).
        let sid = keys::session_id(tep.id(), &prk, &[]);
        assert_eq!(a.session_id(), Some(&sid[..]));
        assert_eq!(b.session_id(), Some(&sid[..]));
        assert_eq!(ss_line[1], hex(&sid));
    }
    // Off by default.
    let (mut a, mut b, _) = pair(Config::default());
    b.receive(&a.take_outgoing()).unwrap();
    a.receive(&b.take_outgoing()).unwrap();
    assert!(a.take_key_log().is_empty() && b.take_key_log().is_empty());
}

#[test]
fn data_queued_before_the_key_exchange_is_capped() {
    assert_eq!(Config::default().max_pending, DEFAULT_MAX_PENDING);
    let cfg = Config { max_pending: 1000, ..Config::default() };
    let (mut a, _b, _) = pair(cfg);
    a.send(&[1; 600]).unwrap();
    a.send(&[2; 400]).unwrap();
    assert_eq!(a.pending_len(), 1000);
    assert!(matches!(a.send(&[3; 1]), Err(Error::TooLarge(_))));
    assert!(a.error().is_some(), "fatal");
    assert_eq!(a.pending_len(), 0, "queued plaintext wiped");
}

#[test]
fn default_rekey_interval() {
    assert_eq!(DEFAULT_REKEY_AFTER_BYTES, 1 << 36);
    assert_eq!(Config::default().rekey_after_bytes, Some(1 << 36));
}
