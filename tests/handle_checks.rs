//! Device handles are checked: a handle of another class (cast or forged),
//! memory that is no handle, a block stamped by another library version,
//! the handles of closed objects and (shm) a raw peer address of junk bytes
//! give -FI_EINVAL on every operation, with the real objects untouched.
//! tests/c/handle_checks.c, through the public headers, on shm and ofi.
use crate::common;

use std::process::Command;

fn run(prov: &str) {
    let mut cmd = Command::new(common::ofi::program("handle_checks", &[]));
    cmd.arg(prov)
        .env("FI_XPU_PROVIDER", prov)
        .env("FI_XPU_LOG_LEVEL", "none");
    if prov == "ofi" {
        cmd.env("FI_XPU_OFI_PROVIDER", "tcp")
            .env("FI_TCP_IFACE", "lo");
    }
    let o = common::run_ok(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("handle_checks {prov}: ok\n")
    );
}

#[test]
fn shm_device_handles_are_checked() {
    run("shm");
}

#[test]
fn ofi_device_handles_are_checked() {
    run("ofi");
}
