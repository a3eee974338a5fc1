//! See tcpcrypt_fuzz::established (src/established.rs). Setup runs once, before the fork server.
fn main() {
    let mut target = tcpcrypt_fuzz::established::Established::new();
    afl::fuzz!(|data: &[u8]| {
        let _ = target.run(data);
    });
}
