//! Network-namespace isolation for kernel tests.
//!
//! Every test that programs nftables or routes runs in a fresh network namespace of its own,
//! never in the host's. [`netns_test!`] defines such a test: the test re-executes its own test
//! binary under `unshare --net` with only that test selected, so the whole child process (every
//! thread, every netlink socket, every `nft`/`ip` it spawns) lives in the new namespace and the
//! namespace disappears with the process.
//!
//! Without root the test is skipped with a message, except under CI (`CI` set), where a skipped
//! kernel test is a failure.

use std::process::{Command, Stdio};

use super::shell::sh;

const CHILD_ENV: &str = "EDGENETD_NETNS_CHILD";

/// Defines a `#[test]` whose body runs in a fresh network namespace with `lo` up.
#[macro_export]
macro_rules! netns_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        #[test]
        $(#[$meta])*
        fn $name() {
            let test_path = $crate::common::netns::test_path(module_path!(), stringify!($name));
            $crate::common::netns::run_isolated(&test_path, || $body);
        }
    };
}

/// The name libtest knows the test `name` of `module` (a `module_path!()`) by: the module path
/// without the crate's name, then the test's.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{name}"),
        None => name.to_string(),
    }
}

/// True when this process is the re-executed child, already inside its own namespace.
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs `body` in a fresh network namespace (see the module docs).
pub fn run_isolated(test_path: &str, body: impl FnOnce()) {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test_path) {
        sh("ip link set lo up");
        body();
        return;
    }
    if !is_root() {
        if skips_are_failures() {
            panic!(
                "kernel test {test_path} needs root; under CI a skipped kernel test is a failure"
            );
        }
        eprintln!("SKIPPED kernel test {test_path}: needs root (run the suite as root)");
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let output = Command::new("unshare")
        .arg("--net")
        .arg("--")
        .arg(exe)
        .args(["--exact", test_path, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test_path)
        .stdin(Stdio::null())
        .output()
        .expect("spawn unshare --net (util-linux)");
    let ran = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !ran.contains("1 passed") {
        // Indent the child's report so its own "test result" line is not mistaken for ours.
        for line in ran.lines() {
            eprintln!("  | {line}");
        }
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            eprintln!("  | {line}");
        }
        panic!(
            "kernel test {test_path} failed in its network namespace ({})",
            output.status
        );
    }
}

/// True under CI or `EDGENETD_KERNEL_TESTS=required`: a test that cannot run (no root, a
/// missing tool) must fail rather than skip.
pub fn skips_are_failures() -> bool {
    std::env::var_os("CI").is_some()
        || std::env::var("EDGENETD_KERNEL_TESTS").as_deref() == Ok("required")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
