//! Sealing and opening throughput of a Session (16 KiB frames) per AEAD, single core, no I/O.
//! `cargo bench -p tcpcrypt-proto` (or `--bench aead_throughput -- --mb 512`).

use std::time::Instant;

use rand_core::OsRng;
use tcpcrypt_proto::{resume, Aead, Config, Session};

fn main() {
    let mb: usize = std::env::args()
        .skip_while(|a| a != "--mb")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let chunk = vec![0x5au8; 1 << 20];
    for aead in Aead::ALL {
        let cfg = Config { aeads: vec![aead], ..Config::default() };
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut OsRng);
        let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
        let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
        let mut a = Session::new(&pa, cfg.clone(), None, &mut OsRng).unwrap();
        let mut b = Session::new(&pb, cfg, None, &mut OsRng).unwrap();
        b.receive(&a.take_outgoing()).unwrap();
        a.receive(&b.take_outgoing()).unwrap();
        let (mut seal_t, mut open_t) = (0f64, 0f64);
        let mut wire = 0usize;
        let mut out = Vec::with_capacity(2 << 20);
        for _ in 0..mb {
            let t = Instant::now();
            a.send(&chunk).unwrap();
            a.write_outgoing(&mut out);
            seal_t += t.elapsed().as_secs_f64();
            wire += out.len();
            let t = Instant::now();
            b.receive(&out).unwrap();
            let p = b.take_plaintext();
            open_t += t.elapsed().as_secs_f64();
            assert_eq!(p.len(), chunk.len());
            out.clear();
        }
        let bytes = (mb << 20) as f64;
        println!(
            "{:<24} seal {:>7.2} Gbit/s  open {:>7.2} Gbit/s  framing overhead {:.3} %",
            aead.name(),
            bytes * 8.0 / seal_t / 1e9,
            bytes * 8.0 / open_t / 1e9,
            (wire as f64 - bytes) / bytes * 100.0
        );
    }
}
