//! Restarting the daemon leaves no gap: while clients on the wan host keep opening
//! connections to a lan server through a policy forward rule and to a service VIP, and one
//! long-lived connection through the VIP keeps talking, the daemon is killed with SIGKILL and
//! restarted, then stopped with SIGTERM and restarted. No connection attempt fails, the
//! long-lived connection survives, and each restarted daemon's first syncs write no route or
//! rule. How many nf_tables commits the first syncs make is printed; the second test pins
//! that it is none: every controller adopts the intact state an earlier run left.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::policy::{HOME, lan_wan};
use common::topology::Topology;
use common::wait::wait_until;
use edgenetd::dataplane::nft::Nft;

const EXTRA: &str = r#"
[[policy.rule]]
name = "web-from-wan"
from = "wan"
to = "lan"
protocol = "tcp"
ports = [8080]
action = "accept"

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
protocol = "tcp"
backends = ["10.0.0.10:80"]
"#;

/// The wan host's clients: for `secs` seconds, new connections alternately to the VIP and
/// through the forward rule (1 s timeout each), and one connection to the VIP that sends a
/// line every 50 ms and must get it echoed. Prints `attempts N failures F long ok|broken`.
const CLIENTS: &str = r#"
import socket, sys, time
secs = float(sys.argv[1])
def once(addr):
    try:
        with socket.create_connection(addr, timeout=1) as s:
            return s.recv(64).endswith(b"\n")
    except OSError:
        return False
long = socket.create_connection(("10.96.0.10", 80), timeout=1)
long.recv(64)
attempts = failures = 0
long_ok = True
end = time.time() + secs
i = 0
while time.time() < end:
    ok = once(("10.96.0.10", 80) if i % 2 == 0 else ("10.0.0.10", 8080))
    attempts += 1
    failures += 0 if ok else 1
    if not ok:
        print("failed", i, time.time(), flush=True)
    try:
        long.sendall(b"ping %d\n" % i)
        long_ok = long_ok and long.recv(64) == b"ping %d\n" % i
    except OSError:
        long_ok = False
    i += 1
    time.sleep(0.05)
print("attempts", attempts, "failures", failures, "long", "ok" if long_ok else "broken", flush=True)
"#;

fn generation() -> u32 {
    Nft::open().unwrap().generation().unwrap()
}

/// Starts the daemon and waits for the first policy and service syncs.
fn start_synced(tag: &str, config: &str) -> Daemon {
    let d = Daemon::start(tag, config);
    d.wait_ready();
    wait_until(
        "first policy and service syncs",
        Duration::from_secs(20),
        || {
            ["policy", "service"].iter().all(|c| {
                d.metric("edgenetd_controller_syncs_total", &[("controller", c)])
                    .is_some_and(|n| n >= 1.0)
            })
        },
    );
    d
}

/// Route and rule writes edgenetd (protocol 190) makes while `ip monitor` runs, as lines.
fn route_writes(monitor: &str) -> Vec<String> {
    std::fs::read_to_string(monitor)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("proto 190"))
        .map(str::to_string)
        .collect()
}

/// Stops `d` with `signal` and starts it again: the new daemon, and how many nf_tables commits
/// its first syncs made.
fn restart(t: &Topology, d: &mut Daemon, config: &str, signal: &str, tag: &str) -> (Daemon, u32) {
    let before = generation();
    let monitor = t.script(&format!("monitor-{tag}.out"), "");
    let mut mon = std::process::Command::new("sh")
        .args(["-c", &format!("exec ip monitor route rule > {monitor}")])
        .spawn()
        .unwrap();
    d.signal(signal);
    assert!(
        d.wait_exit(Duration::from_secs(10)).is_some(),
        "exit on {signal}"
    );
    let restarted = start_synced(tag, config);
    std::thread::sleep(Duration::from_millis(500));
    let after = generation();
    mon.kill().unwrap();
    mon.wait().unwrap();
    let writes = route_writes(&monitor);
    assert!(
        writes.is_empty(),
        "route writes after SIG{signal}: {writes:?}"
    );
    (restarted, after.wrapping_sub(before))
}

netns_test! {
    fn sigkill_and_sigterm_restarts_lose_no_connection_and_write_nothing() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        wan.sh("ip route add 10.96.0.0/16 via 192.0.2.1");
        t.serve(lan, "tcp", 80);
        t.serve(lan, "tcp", 8080);
        let config = format!("{HOME}{EXTRA}");
        let mut d = start_synced("gap-0", &config);
        let script = t.script("clients.py", CLIENTS);
        let out = t.script("clients.out", "");
        let mut clients = wan.spawn(&format!("exec python3 -u {script} 12 > {out} 2>&1"));
        std::thread::sleep(Duration::from_secs(2));
        let (mut d2, kill_commits) = restart(&t, &mut d, &config, "KILL", "gap-1");
        drop(d);
        std::thread::sleep(Duration::from_secs(2));
        let (d3, term_commits) = restart(&t, &mut d2, &config, "TERM", "gap-2");
        drop(d2);
        assert!(clients.wait().unwrap().success());
        let report = std::fs::read_to_string(&out).unwrap();
        println!("{report}nf_tables commits by the first syncs: {kill_commits} after SIGKILL, \
                  {term_commits} after SIGTERM");
        let last = report.lines().last().unwrap_or_default();
        let words: Vec<&str> = last.split(' ').collect();
        assert!(words.len() == 6 && words[0] == "attempts", "{report}");
        let attempts: u32 = words[1].parse().unwrap();
        assert!(attempts > 50, "{report}");
        assert_eq!(words[3], "0", "connection attempts failed: {report}");
        assert_eq!(words[5], "ok", "the long-lived connection broke: {report}");
        drop(d3);
    }
}

netns_test! {
    fn a_restarted_daemons_first_syncs_commit_nothing_when_nothing_changed() {
        let t = lan_wan();
        let config = format!("{HOME}{EXTRA}");
        let mut d = start_synced("adopt-0", &config);
        let (mut d2, kill_commits) = restart(&t, &mut d, &config, "KILL", "adopt-1");
        drop(d);
        let (d3, term_commits) = restart(&t, &mut d2, &config, "TERM", "adopt-2");
        drop(d2);
        assert_eq!((kill_commits, term_commits), (0, 0), "nf_tables commits after restarts");
        drop(d3);
    }
}
