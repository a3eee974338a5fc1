//! See tcpcrypt_fuzz::successors (src/successors.rs). Setup runs once, before the fork server.
fn main() {
    let mut target = tcpcrypt_fuzz::successors::Successors::new();
    afl::fuzz!(|data: &[u8]| {
        let _ = target.run(data);
    });
}
