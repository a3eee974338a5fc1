//! See tcpcrypt_fuzz::legacy::frame (src/legacy.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        tcpcrypt_fuzz::legacy::frame(data);
    });
}
