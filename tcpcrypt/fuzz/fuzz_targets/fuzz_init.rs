//! See tcpcrypt_fuzz::legacy::init (src/legacy.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        tcpcrypt_fuzz::legacy::init(data);
    });
}
