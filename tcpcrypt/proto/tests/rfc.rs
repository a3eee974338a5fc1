//! RFC constants checked against the RFC text itself (shared/docs/rfc beside the repo) when
//! it is there, and against the values transcribed below in any case.

use std::path::PathBuf;

use tcpcrypt_proto::consts::*;
use tcpcrypt_proto::{eno, keys, Aead, Tep};

fn rfc(name: &str) -> Option<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for up in [3, 4] {
        let mut p = root.clone();
        for _ in 0..up - 1 {
            p.pop();
        }
        let cand = p.join("shared/docs/rfc").join(name);
        if let Ok(s) = std::fs::read_to_string(&cand) {
            return Some(s);
        }
    }
    std::fs::read_to_string(PathBuf::from("/work/shared/docs/rfc").join(name)).ok()
}

/// Find `| <value> | <name> |` rows in a table.
fn table_value(text: &str, name: &str) -> Option<u64> {
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
        if cells.len() >= 2 && cells[1] == name && cells[0].starts_with("0x") {
            return u64::from_str_radix(cells[0].trim_start_matches("0x"), 16).ok();
        }
    }
    None
}

#[test]
fn constants_transcribed() {
    assert_eq!(CONST_NEXTK, 0x01);
    assert_eq!(CONST_SESSID, 0x02);
    assert_eq!(CONST_REKEY, 0x03);
    assert_eq!(CONST_KEY_A, 0x04);
    assert_eq!(CONST_KEY_B, 0x05);
    assert_eq!(CONST_RESUME, 0x06);
    assert_eq!(INIT1_MAGIC, 0x15101a0e);
    assert_eq!(INIT2_MAGIC, 0x097105e0);
    assert_eq!((N_A_LEN, N_B_LEN, K_LEN), (32, 32, 32));
    assert_eq!(eno::KIND, 69);
    assert_eq!(Tep::P256.id(), 0x21);
    assert_eq!(Tep::P521.id(), 0x22);
    assert_eq!(Tep::Curve25519.id(), 0x23);
    assert_eq!(Aead::Aes128Gcm.id(), 0x0001);
    assert_eq!(Aead::Aes256Gcm.id(), 0x0002);
    assert_eq!(Aead::ChaCha20Poly1305.id(), 0x0010);
    assert_eq!((Aead::Aes128Gcm.key_len(), Aead::Aes128Gcm.nonce_len()), (16, 12));
    assert_eq!((Aead::Aes256Gcm.key_len(), Aead::Aes256Gcm.nonce_len()), (32, 12));
    assert_eq!((Aead::ChaCha20Poly1305.key_len(), Aead::ChaCha20Poly1305.nonce_len()), (32, 12));
}

#[test]
fn constants_match_rfc_text() {
    let Some(t) = rfc("rfc8548.txt") else {
        eprintln!("rfc8548.txt not found; transcribed values checked only");
        return;
    };
    for (name, v) in [
        ("CONST_NEXTK", u64::from(CONST_NEXTK)),
        ("CONST_SESSID", u64::from(CONST_SESSID)),
        ("CONST_REKEY", u64::from(CONST_REKEY)),
        ("CONST_KEY_A", u64::from(CONST_KEY_A)),
        ("CONST_KEY_B", u64::from(CONST_KEY_B)),
        ("CONST_RESUME", u64::from(CONST_RESUME)),
        ("INIT1_MAGIC", u64::from(INIT1_MAGIC)),
        ("INIT2_MAGIC", u64::from(INIT2_MAGIC)),
    ] {
        assert_eq!(table_value(&t, name), Some(v), "{name}");
    }
    for tep in Tep::ALL {
        assert_eq!(table_value(&t, tep.name()), Some(u64::from(tep.id())), "{tep}");
    }
    for a in Aead::ALL {
        // Table 5 rows: | 0x0001 | AEAD_AES_128_GCM | [RFC8548], Section 6 |
        assert_eq!(table_value(&t, a.name()), Some(u64::from(a.id())), "{a}");
    }
    for l in ["N_A_LEN: 32 bytes", "N_B_LEN: 32 bytes", "K_LEN:   32 bytes"] {
        assert!(t.contains(l), "{l}");
    }
    assert!(t.contains("resume[i] = CPRF(ss[i], CONST_RESUME, 18)"));
    let e = rfc("rfc8547.txt").expect("rfc8547 beside rfc8548");
    assert!(e.contains("|Kind=|Len= |") && e.contains("|  69 | N+2 |"));
}

#[test]
fn hkdf_known_answer_rfc5869_case1() {
    // RFC 5869 A.1: our Extract/CPRF are HKDF-SHA256.
    let ikm = [0x0bu8; 22];
    let salt: Vec<u8> = (0u8..=0x0c).collect();
    let info: Vec<u8> = (0xf0u8..=0xf9).collect();
    let prk = keys::extract(&salt, &ikm);
    assert_eq!(
        tcpcrypt_proto::hex(prk.expose()),
        "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"
    );
    let mut okm = [0u8; 42];
    keys::cprf(&prk, &[&info], &mut okm).unwrap();
    assert_eq!(
        tcpcrypt_proto::hex(&okm),
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    );
}

#[test]
fn key_schedule_structure() {
    // The schedule is as §3.3-§3.5 write it, checked with plain HKDF calls.
    let ss0 = keys::prk(&[1; 32], b"transcript", b"init1", b"init2", b"es");
    let mut ikm = Vec::new();
    for p in [&b"transcript"[..], b"init1", b"init2", b"es"] {
        ikm.extend_from_slice(p);
    }
    assert_eq!(ss0.expose(), keys::extract(&[1; 32], &ikm).expose());
    let mut ss1 = [0u8; 32];
    keys::cprf(&ss0, &[&[0x01]], &mut ss1).unwrap();
    assert_eq!(&ss1, keys::next_session_secret(&ss0).expose());
    let sn = [9u8; 16];
    let mut mk0 = [0u8; 32];
    keys::cprf(&ss0, &[&[0x03], &sn], &mut mk0).unwrap();
    assert_eq!(&mk0, keys::first_master_key(&ss0, &sn).expose());
    let sid = keys::session_id(0x23, &ss0, &[]);
    assert_eq!(sid.len(), 33);
    assert_eq!(sid[0], 0x23);
    let mut rest = [0u8; 32];
    keys::cprf(&ss0, &[&[0x02]], &mut rest).unwrap();
    assert_eq!(&sid[1..], &rest);
    let mut r = [0u8; 18];
    keys::cprf(&ss0, &[&[0x06]], &mut r).unwrap();
    assert_eq!(keys::resume_id(&ss0), r);
    // Frame nonce: offset in the last 8 bytes, XOR NR.
    let nr = [0xffu8; 12];
    let n = keys::frame_nonce(&nr, 0x0102030405060708);
    assert_eq!(n, [0xff, 0xff, 0xff, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7]);
}
