//! Link options of the x86_64 release binary: the same two the aarch64 cross-build passes
//! (scripts/arm64/cross-build.sh), for the idle RSS (docs/operations.md, "Footprint").
//!
//! - Packed relative relocations (DT_RELR): the loader reads every relocation at start-up,
//!   so all of RELA's 24 bytes per absolute pointer (about 100 kB) stayed mapped; RELR is a
//!   bitmap of them. Needs glibc 2.36 (Debian 12); the toolchain links x86_64 with rust-lld.
//! - No DWARF unwind tables: the release profile aborts on panic and is stripped, so
//!   nothing unwinds and a backtrace would have no names.
//! - Code the idle daemon never runs (the Kubernetes client and its TLS,
//!   `explain`) in one block after the rest (packaging/link/cold-text-last.ld), so that it
//!   does not share the 64 KiB fault-around windows of the code that runs.
//!
//! Only `bin` targets of the release profile get them: tests and examples (the benchmarks)
//! unwind, and keep the default link.

use std::env::var;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=packaging/link/discard-unwind-tables.ld");
    println!("cargo::rerun-if-changed=packaging/link/cold-text-last.ld");
    let is = |key: &str, value: &str| var(key).is_ok_and(|v| v == value);
    if !(is("PROFILE", "release")
        && is("CARGO_CFG_TARGET_ARCH", "x86_64")
        && is("CARGO_CFG_TARGET_OS", "linux")
        && is("CARGO_CFG_TARGET_ENV", "gnu"))
    {
        return;
    }
    let dir = var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    for arg in [
        "-Wl,-z,pack-relative-relocs".to_string(),
        "-Wl,--no-eh-frame-hdr".to_string(),
        format!("-Wl,-T,{dir}/packaging/link/discard-unwind-tables.ld"),
        format!("-Wl,-T,{dir}/packaging/link/cold-text-last.ld"),
    ] {
        println!("cargo::rustc-link-arg-bins={arg}");
    }
}
