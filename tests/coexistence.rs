//! fi_xpu's headers next to libfabric's: a translation unit includes
//! libfabric's `<rdma/fi_xpu.h>` and fi_xpu's headers in either order
//! (against a stand-in declared from upstream's documented types, since
//! the libfabric under test has no fi_xpu.h), as C11 and as C++17, and
//! runs; nothing fi_xpu installs sits at a path libfabric installs.
use crate::common;

use std::process::Command;

fn upstream_dir() -> String {
    format!("-I{}", common::root().join("tests/c/upstream").display())
}

#[test]
fn upstream_header_and_ours_in_either_order() {
    let dir = common::scratch("coexist");
    let src = common::root().join("tests/c/coexist.c");
    for first in ["0", "1"] {
        let exe = dir.join(format!("coexist{first}"));
        let def = format!("-DUPSTREAM_FIRST={first}");
        common::cc(&[&src], &exe, &[&upstream_dir(), &def, "-pedantic"]);
        let o = common::run_ok(Command::new(&exe).env("FI_XPU_PROVIDER", "shm"));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "coexist: ok\n");

        let mut cxx = Command::new("c++");
        cxx.args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic"])
            .args(["-fsyntax-only", "-x", "c++"])
            .arg(format!("-I{}", common::root().display()))
            .arg(format!("-I{}", common::root().join("include").display()))
            .arg(upstream_dir())
            .arg(&def)
            .arg(&src);
        common::run_ok(&mut cxx);
    }
}
