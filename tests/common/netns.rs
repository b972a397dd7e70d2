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

const CHILD_ENV: &str = "EDGENETD_NETNS_CHILD";

/// Defines a `#[test]` whose body runs in a fresh network namespace with `lo` up.
#[macro_export]
macro_rules! netns_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        #[test]
        $(#[$meta])*
        fn $name() {
            let module = module_path!();
            let test_path = match module.split_once("::") {
                Some((_, rest)) => format!("{rest}::{}", stringify!($name)),
                None => stringify!($name).to_string(),
            };
            $crate::common::netns::run_isolated(&test_path, || $body);
        }
    };
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
        if std::env::var_os("CI").is_some()
            || std::env::var("EDGENETD_KERNEL_TESTS").as_deref() == Ok("required")
        {
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

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a shell command in the current namespace and returns its stdout; panics on failure.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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

/// A named network namespace (`ip netns add`) used as an extra host in a test topology; the
/// test's own namespace plays the router. Deleted on drop.
pub struct Host {
    /// The namespace's name, unique per process.
    pub name: String,
}

impl Host {
    /// Creates `ip netns` `<role>-<pid>` with `lo` up.
    pub fn new(role: &str) -> Host {
        let name = format!("en-{role}-{}", std::process::id());
        let _ = sh_status(&format!("ip netns del {name}"));
        sh(&format!("ip netns add {name}"));
        let host = Host { name };
        host.sh("ip link set lo up");
        host
    }

    /// Runs a shell command inside this host's namespace.
    pub fn sh(&self, cmd: &str) -> String {
        sh(&format!(
            "ip netns exec {} sh -c '{}'",
            self.name,
            cmd.replace('\'', r"'\''")
        ))
    }

    /// Like [`Host::sh`] but returns (success, stdout, stderr).
    pub fn sh_status(&self, cmd: &str) -> (bool, String, String) {
        sh_status(&format!(
            "ip netns exec {} sh -c '{}'",
            self.name,
            cmd.replace('\'', r"'\''")
        ))
    }

    /// Spawns a long-running command inside this host (killed by the caller).
    pub fn spawn(&self, cmd: &str) -> std::process::Child {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", cmd])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn in netns")
    }

    /// Links this host to the current (router) namespace with a veth pair: `host_if` inside the
    /// host with `host_addr` (CIDR), `router_if` here with `router_addr` (CIDR); both up.
    pub fn link_to_router(
        &self,
        host_if: &str,
        host_addr: &str,
        router_if: &str,
        router_addr: &str,
    ) {
        sh(&format!(
            "ip link add {router_if} type veth peer name {host_if} netns {}",
            self.name
        ));
        sh(&format!(
            "ip addr add {router_addr} dev {router_if} && ip link set {router_if} up"
        ));
        self.sh(&format!(
            "ip addr add {host_addr} dev {host_if} && ip link set {host_if} up"
        ));
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = sh_status(&format!("ip netns pids {} | xargs -r kill -9", self.name));
        let _ = sh_status(&format!("ip netns del {}", self.name));
    }
}
