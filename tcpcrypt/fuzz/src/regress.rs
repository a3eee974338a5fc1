//! Corpus regression: every file of corpus/<target>/ through the target's function, without
//! AFL (`cargo test --lib --release` in tcpcrypt/fuzz). A panic names the file.
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files
}

fn replay(target: &str, mut run: impl FnMut(&[u8])) {
    for f in corpus(target) {
        let data = std::fs::read(&f).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&data)));
        if r.is_err() {
            panic!("{target}: {} fails", f.display());
        }
    }
}

#[test]
fn fuzz_eno() {
    replay("eno", crate::legacy::eno);
}

#[test]
fn fuzz_init() {
    replay("init", crate::legacy::init);
}

#[test]
fn fuzz_frame() {
    replay("frame", crate::legacy::frame);
}

#[test]
fn fuzz_session_x25519() {
    let mut t = crate::session::SessionTarget::new(tcpcrypt_proto::Tep::Curve25519);
    let mut all = 0;
    replay("session_x25519", |d| all |= t.run(d));
    assert_eq!(all, 127, "seeds reach {all:#x}");
}

#[test]
fn fuzz_session_p256() {
    let mut t = crate::session::SessionTarget::new(tcpcrypt_proto::Tep::P256);
    let mut all = 0;
    replay("session_p256", |d| all |= t.run(d));
    assert_eq!(all, 127, "seeds reach {all:#x}");
}

#[test]
fn fuzz_session_p521() {
    let mut t = crate::session::SessionTarget::new(tcpcrypt_proto::Tep::P521);
    let mut all = 0;
    replay("session_p521", |d| all |= t.run(d));
    assert_eq!(all, 127, "seeds reach {all:#x}");
}

#[test]
fn fuzz_established() {
    use crate::established::reached;
    let mut t = crate::established::Established::new();
    let mut all = 0;
    replay("established", |d| all |= t.run(d));
    // The seeds alone reach every state after a successful decryption: URGp, FINp, rekey...
    assert_eq!(all & reached::ALL, reached::ALL, "seeds reach {all:#x} of {:#x}", reached::ALL);
}

#[test]
fn fuzz_resume() {
    let mut t = crate::resume::Resume::new();
    let mut all = 0;
    replay("resume", |d| all |= t.run(d));
    assert_eq!(all, 31, "seeds reach {all:#x}");
}

#[test]
fn fuzz_eno_diff() {
    use crate::eno_diff::reached;
    let mut all = 0;
    replay("eno_diff", |d| all |= crate::eno_diff::run(d));
    assert_eq!(all, reached::ALL, "seeds reach {all:#x}");
}

#[test]
fn fuzz_successors() {
    use crate::successors::reached;
    let mut t = crate::successors::Successors::new();
    let mut all = 0;
    replay("successors", |d| all |= t.run(d));
    assert_eq!(all, reached::ALL, "seeds reach {all:#x}");
}

/// A quick random mutation smoke run over the corpora (not AFL; for checking a target's
/// oracle before a campaign): `cargo test --lib --release -- --ignored smoke`.
#[test]
#[ignore]
fn smoke() {
    use rand_core::RngCore;
    let iters: usize = std::env::var("SMOKE_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let mut rng = crate::DetRng::new(std::env::var("SMOKE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1));
    let mut mutate = |seed: &[u8]| {
        let mut d = seed.to_vec();
        for _ in 0..(rng.next_u32() % 8) {
            match rng.next_u32() % 4 {
                0 if !d.is_empty() => {
                    let i = rng.next_u32() as usize % d.len();
                    d[i] ^= 1 << (rng.next_u32() % 8);
                }
                1 if !d.is_empty() => {
                    let i = rng.next_u32() as usize % d.len();
                    d[i] = rng.next_u32() as u8;
                }
                2 => {
                    let i = rng.next_u32() as usize % (d.len() + 1);
                    d.insert(i, rng.next_u32() as u8);
                }
                _ if !d.is_empty() => {
                    let i = rng.next_u32() as usize % d.len();
                    d.truncate(i.max(1));
                }
                _ => {}
            }
        }
        d
    };
    let mut es = crate::established::Established::new();
    let mut rs = crate::resume::Resume::new();
    let mut ss = crate::successors::Successors::new();
    let mut s = [
        crate::session::SessionTarget::new(tcpcrypt_proto::Tep::Curve25519),
        crate::session::SessionTarget::new(tcpcrypt_proto::Tep::P256),
        crate::session::SessionTarget::new(tcpcrypt_proto::Tep::P521),
    ];
    for (t, name) in ["established", "resume", "eno_diff", "successors", "session_x25519", "session_p256", "session_p521"].iter().enumerate() {
        let seeds: Vec<Vec<u8>> = corpus(name).iter().map(|f| std::fs::read(f).unwrap()).collect();
        for i in 0..iters {
            let d = mutate(&seeds[i % seeds.len()]);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match t {
                0 => {
                    es.run(&d);
                }
                1 => {
                    rs.run(&d);
                }
                2 => {
                    crate::eno_diff::run(&d);
                }
                3 => {
                    ss.run(&d);
                }
                k => {
                    s[k - 4].run(&d);
                }
            }));
            if r.is_err() {
                let p = std::env::temp_dir().join(format!("smoke-{name}-{i}"));
                std::fs::write(&p, &d).unwrap();
                panic!("{name}: input saved in {}", p.display());
            }
        }
    }
}

/// Replay files through one target, printing each panic:
/// `REPLAY_TARGET=established REPLAY_PATH=out/campaign-established/default/crashes cargo test --lib -- --ignored replay_files --nocapture`.
#[test]
#[ignore]
fn replay_files() {
    let target = std::env::var("REPLAY_TARGET").expect("REPLAY_TARGET");
    let path = PathBuf::from(std::env::var("REPLAY_PATH").expect("REPLAY_PATH"));
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        v.sort();
        v
    } else {
        vec![path]
    };
    let mut run: Box<dyn FnMut(&[u8])> = match target.as_str() {
        "eno" => Box::new(crate::legacy::eno),
        "init" => Box::new(crate::legacy::init),
        "frame" => Box::new(crate::legacy::frame),
        "eno_diff" => Box::new(|d| {
            crate::eno_diff::run(d);
        }),
        "established" => {
            let mut t = crate::established::Established::new();
            Box::new(move |d| {
                t.run(d);
            })
        }
        "resume" => {
            let mut t = crate::resume::Resume::new();
            Box::new(move |d| {
                t.run(d);
            })
        }
        "successors" => {
            let mut t = crate::successors::Successors::new();
            Box::new(move |d| {
                t.run(d);
            })
        }
        s => {
            let tep = match s {
                "session_x25519" => tcpcrypt_proto::Tep::Curve25519,
                "session_p256" => tcpcrypt_proto::Tep::P256,
                "session_p521" => tcpcrypt_proto::Tep::P521,
                _ => panic!("unknown target {s}"),
            };
            let mut t = crate::session::SessionTarget::new(tep);
            Box::new(move |d| {
                t.run(d);
            })
        }
    };
    let mut failed = 0;
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&data))).is_err() {
            eprintln!("^^^ {}", f.display());
            failed += 1;
        }
    }
    eprintln!("{failed} of {} files fail", files.len());
}
