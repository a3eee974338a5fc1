//! Init1/Init2 parsers, and a passive session (host B) fed the input as its peer's stream.
use tcpcrypt_proto::msgs::{Init1, Init2, Parse};
use tcpcrypt_proto::{resume, Config, Session, Tep};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        for t in Tep::ALL {
            if let Ok(Parse::Done(m, n)) = Init1::parse(t, data) {
                assert!(n <= data.len());
                let e = m.encode().unwrap();
                assert_eq!(&e[..], &data[..n]);
            }
            if let Ok(Parse::Done(m, n)) = Init2::parse(t, data) {
                assert_eq!(&m.encode().unwrap()[..], &data[..n]);
            }
        }
        let cfg = Config::default();
        let syn = resume::syn_option(&cfg.teps, None).unwrap();
        let (synack, _) = resume::synack_option(&syn, &cfg.teps, None, 8, &mut rand_core::OsRng);
        for passive in [true, false] {
            let plan = resume::negotiate(&syn, &synack, passive, true, &cfg.teps, &[]).unwrap();
            let mut s = Session::new(&plan, cfg.clone(), None, &mut rand_core::OsRng).unwrap();
            let _ = s.receive(data);
            assert_eq!(s.plaintext_len(), 0);
        }
    });
}
