// Gives libfi_xpu.so a versioned soname so that installed programs bind to the
// ABI major, and records the install-time provider directory.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfi_xpu.so.{major}");
    println!("cargo:rerun-if-env-changed=FI_XPU_INSTALL_PROVIDER_DIR");
    let dir = std::env::var("FI_XPU_INSTALL_PROVIDER_DIR").unwrap_or_default();
    println!("cargo:rustc-env=FI_XPU_BUILTIN_PROVIDER_DIR={dir}");
}
