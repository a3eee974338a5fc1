//! See tcpcrypt_fuzz::eno_diff (src/eno_diff.rs): the BPF program's C ENO parsers vs eno.rs.
fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = tcpcrypt_fuzz::eno_diff::run(data);
    });
}
