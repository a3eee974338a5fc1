//! See tcpcrypt_fuzz::resume (src/resume.rs). Setup runs once, before the fork server.
fn main() {
    let mut target = tcpcrypt_fuzz::resume::Resume::new();
    afl::fuzz!(|data: &[u8]| {
        let _ = target.run(data);
    });
}
