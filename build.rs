//! Links the `kiln` binary with packed relative relocations (DT_RELR):
//! the position-independent binary keeps ASLR, and its table of load-time
//! relocations shrinks from about 180 KB to a few (glibc 2.36 and GNU ld
//! 2.38 or later, as on Debian 12). A linker that does not know the flag
//! links as before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if !(linux && gnu) {
        return;
    }
    let knows = Command::new("ld")
        .arg("--help")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("pack-relative-relocs"));
    if knows {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
