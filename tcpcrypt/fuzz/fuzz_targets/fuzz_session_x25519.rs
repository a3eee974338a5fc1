//! See tcpcrypt_fuzz::session (src/session.rs). Setup runs once, before the fork server.
fn main() {
    let mut target = tcpcrypt_fuzz::session::SessionTarget::new(tcpcrypt_proto::Tep::Curve25519);
    afl::fuzz!(|data: &[u8]| {
        let _ = target.run(data);
    });
}
