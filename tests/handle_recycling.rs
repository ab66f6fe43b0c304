//! Drives `tests/c/handle_recycling.c`: closed handles are recycled under a
//! new generation (a million registrations opened and closed leave resident
//! memory bounded; a stale handle whose slot was reused gets -FI_EINVAL and
//! leaves the new object alone), through the C API and the test provider.
use crate::common;
use crate::plugins;

use std::process::Command;

#[test]
fn closed_handles_are_recycled() {
    let dir = common::scratch("handle-recycling");
    plugins::chmod(&dir, 0o755);
    plugins::build_plugin(&dir, "objtest", &plugins::named("objtest", 150));
    let exe = dir.join("handle_recycling");
    common::cc(
        &[&common::root().join("tests/c/handle_recycling.c")],
        &exe,
        &["-O2"],
    );
    let mut cmd = Command::new(&exe);
    cmd.env("FI_XPU_PROVIDER_PATH", &dir)
        .env("FI_XPU_PROVIDER", "objtest")
        .env("FI_XPU_LOG_LEVEL", "none");
    let out = common::run_ok(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "handle_recycling: ok\n"
    );
}
