//! Compiles bpf/eno.bpf.c with clang (-target bpf -O2 -g) into OUT_DIR/eno.bpf.o,
//! which src/lib.rs embeds with include_bytes!.
use std::{env, path::PathBuf, process::Command};

fn main() {
    let src = "bpf/eno.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("eno.bpf.o");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());

    // Debian keeps asm/types.h under the multiarch directory.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("/usr/include/{arch}-linux-gnu");

    let mut cmd = Command::new(&clang);
    cmd.args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        .arg(format!("-I{multiarch}"))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(&out);
    let status = match cmd.status() {
        Ok(s) => s,
        Err(e) => panic!(
            "\n\ntcpcrypt-eno-bpf: cannot run `{clang}` ({e}).\n\
             The sock_ops program bpf/eno.bpf.c is compiled with clang at build time.\n\
             Install it (Debian: apt-get install -y clang libbpf-dev) or set CLANG=/path/to/clang.\n\n"
        ),
    };
    if !status.success() {
        panic!(
            "\n\ntcpcrypt-eno-bpf: `{clang} -target bpf` failed on {src} ({status}).\n\
             It needs <bpf/bpf_helpers.h> (Debian: libbpf-dev) and <linux/bpf.h> (linux-libc-dev).\n\n"
        );
    }
}
