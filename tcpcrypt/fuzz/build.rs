//! Builds the user-space copy of the BPF program's ENO parsers for `fuzz_eno_diff`.
//!
//! `../eno-bpf/bpf/eno.bpf.c` is compiled as it is, except for its four one-line inline-asm
//! helpers (BPF assembly, which only exists to keep clang from turning mask arithmetic back
//! into branches): each is replaced by the C expression with the same 64-bit semantics
//! (BPF `>>=` is a logical shift). A replacement that no longer matches the source fails the
//! build, so a changed helper cannot silently be fuzzed as something else. The BPF helper
//! calls are stubs (c/include/bpf/, c/eno_shim.c); only the parsers and `passive_synack`
//! are driven.
use std::path::PathBuf;

const ASM: [(&str, &str); 4] = [
    (r#"asm volatile("%0 >>= 6; %0 &= 1" : "+r"(w));"#, "w = (w >> 6) & 1;"),
    (r#"asm volatile("%0 &= 63" : "+r"(x));"#, "x &= 63;"),
    (r#"asm volatile("%0 -= %1; %0 >>= 63" : "+r"(a) : "r"(b));"#, "a = (a - b) >> 63;"),
    (r#"asm volatile("%0 = -%0; %0 |= %1; %0 >>= 63" : "+r"(y) : "r"(x));"#, "y = ((0 - y) | x) >> 63;"),
];

fn main() {
    let src = PathBuf::from("../eno-bpf/bpf/eno.bpf.c");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=c/eno_shim.c");
    println!("cargo:rerun-if-changed=c/include/bpf/bpf_helpers.h");
    println!("cargo:rerun-if-changed=c/include/bpf/bpf_endian.h");
    let mut text = std::fs::read_to_string(&src).expect("read eno.bpf.c");
    for (from, to) in ASM {
        assert_eq!(text.matches(from).count(), 1, "eno.bpf.c changed: `{from}` not found once; update fuzz/build.rs");
        text = text.replace(from, to);
    }
    assert!(!text.contains("asm volatile"), "eno.bpf.c has new inline asm; update fuzz/build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("eno_bpf_user.c"), text).unwrap();
    cc::Build::new()
        .file("c/eno_shim.c")
        .include("c/include")
        .include(&out)
        .flag_if_supported("-Wno-unused-function")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-unused-variable")
        .flag_if_supported("-Wno-unused-but-set-variable")
        .flag_if_supported("-Wno-sign-compare")
        .flag_if_supported("-Werror=implicit-function-declaration")
        .opt_level(2)
        .compile("eno_shim");
}
