//! ENO option parser, encoder round trip, negotiation and the SYN-ACK builder.
use tcpcrypt_proto::{eno, resume, SessionCache, Tep};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = eno::NonSynOption::parse(data);
        if let Ok(o) = eno::SynOption::parse(data) {
            if let Ok(e) = o.encode() {
                assert_eq!(eno::SynOption::parse(&e).as_ref(), Ok(&o));
            }
        }
        // Split into two options: A's and B's.
        let cut = data.first().map(|&c| c as usize % (data.len().max(1))).unwrap_or(0);
        let (a, b) = data.split_at(cut.min(data.len()));
        for passive in [false, true] {
            let _ = resume::negotiate(a, b, passive, true, &Tep::ALL, &[]);
        }
        let mut cache = SessionCache::new(2);
        let _ = resume::synack_option(data, &Tep::ALL, Some(&mut cache), 8, &mut rand_core::OsRng);
    });
}
