//! See tcpcrypt_fuzz::legacy::eno (src/legacy.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        tcpcrypt_fuzz::legacy::eno(data);
    });
}
