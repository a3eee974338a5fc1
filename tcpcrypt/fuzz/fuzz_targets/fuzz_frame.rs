//! Frame and plaintext parsers, and an established session fed the input after a real
//! handshake: nothing forged may ever come out as plaintext.
use tcpcrypt_proto::msgs::{FrameRef, Parse, Plaintext};
use tcpcrypt_proto::{resume, Config, Session};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(Parse::Done(f, n)) = FrameRef::parse(data) {
            assert_eq!(f.ciphertext.len() + 3, n);
        }
        let _ = Plaintext::parse(data);
        let cfg = Config::default();
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut rand_core::OsRng);
        let pa = resume::negotiate(&syn, &synack, false, true, &cfg.teps, &[]).unwrap();
        let pb = resume::negotiate(&syn, &synack, true, true, &cfg.teps, &[]).unwrap();
        let mut a = Session::new(&pa, cfg.clone(), None, &mut rand_core::OsRng).unwrap();
        let mut b = Session::new(&pb, cfg, None, &mut rand_core::OsRng).unwrap();
        b.receive(&a.take_outgoing()).unwrap();
        a.receive(&b.take_outgoing()).unwrap();
        // A genuine frame first, then the input.
        a.send(b"genuine").unwrap();
        b.receive(&a.take_outgoing()).unwrap();
        assert_eq!(b.take_plaintext(), b"genuine");
        let _ = b.receive(data);
        assert_eq!(b.plaintext_len(), 0);
        let _ = b.receive_eof();
    });
}
