//! Puts `memory.x` where cortex-m-rt's `link.x` finds it, and links with
//! `link.x` (a build script, not `.cargo/config.toml`, so that a build from
//! any folder with `--manifest-path` links the same image).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=memory.x");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-search={dir}");
        println!("cargo:rustc-link-arg-bins=-Tlink.x");
    }
}
