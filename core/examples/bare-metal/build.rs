//! Hands `link.x` to the linker for the bare-metal target.
//!
//! A build script rather than `.cargo/config.toml`, because cargo reads
//! config from the directory it is run in, not from the manifest's: this way
//! `--manifest-path core/examples/bare-metal/Cargo.toml` from the repository
//! root links the same image as `cargo build` inside this folder.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=link.x");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-search={dir}");
        println!("cargo:rustc-link-arg-bins=-Tlink.x");
    }
}
