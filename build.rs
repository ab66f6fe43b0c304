// Gives libfi_xpu.so a versioned soname so that installed programs bind to the
// ABI major.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfi_xpu.so.{major}");
}
