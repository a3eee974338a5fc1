//! Builds the user-space copy of the BPF program's ENO parsers for `fuzz_eno_diff`.
//!
//! `../eno-bpf/bpf/eno.bpf.c` is compiled as it is: its inline-asm helpers (BPF assembly,
//! which only exists to keep clang from turning mask arithmetic back into branches) are under
//! `#ifdef __bpf__`, with the C expression of the same 64-bit semantics for other targets.
//! The BPF helper calls are stubs (c/include/bpf/, c/eno_shim.c); only the parsers,
//! `passive_synack` and `active_established` are driven.
use std::path::PathBuf;

fn main() {
    let src = PathBuf::from("../eno-bpf/bpf/eno.bpf.c");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=c/eno_shim.c");
    println!("cargo:rerun-if-changed=c/include/bpf/bpf_helpers.h");
    println!("cargo:rerun-if-changed=c/include/bpf/bpf_endian.h");
    let text = std::fs::read_to_string(&src).expect("read eno.bpf.c");
    // Every asm statement must have its host form: count them against the #ifdef blocks.
    let asm = text.matches("asm volatile").count();
    let guarded = text.matches("#ifdef __bpf__\n\tasm volatile").count();
    assert_eq!(asm, guarded, "eno.bpf.c has inline asm outside `#ifdef __bpf__`; give it a C form");
    cc::Build::new()
        .file("c/eno_shim.c")
        .include("c/include")
        .include("../eno-bpf/bpf")
        .flag_if_supported("-Wno-unused-function")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-unused-variable")
        .flag_if_supported("-Wno-unused-but-set-variable")
        .flag_if_supported("-Wno-sign-compare")
        .flag_if_supported("-Werror=implicit-function-declaration")
        .opt_level(2)
        .compile("eno_shim");
}
