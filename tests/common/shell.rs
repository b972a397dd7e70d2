//! Shell commands in the current network namespace, for setting up and reading back kernel
//! state with the real `ip` and `nft`.

use std::process::Command;

/// Runs a shell command and returns its stdout; panics on failure.
pub fn sh(cmd: &str) -> String {
    let (ok, out, err) = sh_status(cmd);
    assert!(ok, "`{cmd}` failed: {err}");
    out
}

/// Runs a shell command and returns (success, stdout, stderr) without panicking.
pub fn sh_status(cmd: &str) -> (bool, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until the output of `cmd` (a listing such as `nft list set …`, empty while what it
/// lists does not exist) holds `what`; panics naming both after `timeout`.
pub fn wait_output_holds(cmd: &str, what: &str, timeout: std::time::Duration) {
    let listing = format!("{cmd} 2>/dev/null || true");
    super::wait::wait_until(&format!("`{cmd}` to hold {what}"), timeout, || {
        sh(&listing).contains(what)
    });
}
