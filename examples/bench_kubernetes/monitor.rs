//! When a backend address reached the kernel, as `nft monitor` reports the element writes of
//! the benchmark's namespace: the moment the kernel committed the batch, seen from outside
//! the daemon, without reading back a map of tens of thousands of elements (a `nft get
//! element` on such a map reads the whole set and takes longer than the change itself).
//!
//! The monitor runs from before the first change to the end; a reader thread notes the first
//! time each `address . port` appears in an added element's value, so a wait is a lookup.

use std::collections::HashMap;
use std::io::Read;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// First sightings of backend addresses in added elements.
type Seen = Arc<Mutex<HashMap<Ipv4Addr, Instant>>>;

/// A running `nft monitor new elements`.
pub struct Monitor {
    /// The process.
    child: Child,
    /// What it reported.
    seen: Seen,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Monitor {
    /// Starts the monitor and waits until it listens (it reads the ruleset first, which
    /// takes a while on a big table).
    pub fn start() -> Monitor {
        // The probe's map exists before the monitor starts: a monitor of element events
        // alone does not learn of sets created after it read the ruleset.
        nft_f(
            "add table ip bench-probe\n\
             add map ip bench-probe m { type ipv4_addr : ipv4_addr . inet_service ; }\n",
        )
        .expect("probe table");
        let mut child = Command::new("nft")
            .args(["monitor", "new", "elements"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nft monitor");
        let mut out = child.stdout.take().unwrap();
        let seen: Seen = Arc::default();
        let noted = seen.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut carry = String::new();
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    return;
                }
                let at = Instant::now();
                carry.push_str(&String::from_utf8_lossy(&buf[..n]));
                // An element ends with `}` (one per line); keep a partial one for the next read.
                let cut = carry.rfind('}').map_or(0, |i| i + 1);
                let done: String = carry.drain(..cut).collect();
                let mut seen = noted.lock().unwrap();
                for a in values(&done) {
                    seen.entry(a).or_insert(at);
                }
            }
        });
        let m = Monitor { child, seen };
        m.wait_listening();
        m
    }

    /// Writes a throwaway element until the monitor reports it: from then on it listens.
    fn wait_listening(&self) {
        let probe = Ipv4Addr::new(198, 18, 0, 1);
        let port = 9;
        let t = Instant::now();
        loop {
            nft_f(&format!(
                "add element ip bench-probe m {{ 198.18.0.2 : {probe} . {port} }}\n"
            ))
            .expect("probe element");
            std::thread::sleep(Duration::from_millis(100));
            let heard = self.seen(probe).is_some();
            nft_f("delete element ip bench-probe m { 198.18.0.2 }\n").expect("probe element");
            if heard {
                nft_f("delete table ip bench-probe\n").expect("probe table");
                self.seen.lock().unwrap().clear();
                return;
            }
            let exited = self.child_exited();
            assert!(
                !exited && t.elapsed() < Duration::from_secs(120),
                "nft monitor never reported (exited: {exited})"
            );
        }
    }

    /// The monitor process is gone.
    fn child_exited(&self) -> bool {
        // SAFETY: waitpid(2) with WNOHANG on our own child; no memory is involved.
        let pid = self.child.id() as i32;
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
    }

    /// When `addr` was first seen in an added element, if it was.
    pub fn seen(&self, addr: Ipv4Addr) -> Option<Instant> {
        self.seen.lock().unwrap().get(&addr).copied()
    }

    /// Waits until every one of `addrs` was seen (or `timeout` passed); the last sighting.
    pub fn wait_all(&self, addrs: &[Ipv4Addr], timeout: Duration) -> Option<Instant> {
        let t = Instant::now();
        loop {
            {
                let seen = self.seen.lock().unwrap();
                let times: Option<Vec<Instant>> =
                    addrs.iter().map(|a| seen.get(a).copied()).collect();
                if let Some(times) = times {
                    return times.into_iter().max();
                }
            }
            if t.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The address of every `A.B.C.D . port` that is an element's value (after ` : `) in `text`.
fn values(text: &str) -> Vec<Ipv4Addr> {
    text.split(" : ")
        .skip(1)
        .filter_map(|value| value.split(" . ").next()?.trim().parse().ok())
        .collect()
}

/// `nft -f -` with `text`; its stderr when it failed.
pub fn nft_f(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::values;

    #[test]
    fn values_are_read_from_monitor_lines() {
        let text = "add element inet edgenetd-service backends4 { 10.96.0.0 . tcp . 80 . 0x00000003 : 10.250.0.1 . 8080 }\n\
                    add element inet edgenetd-service backends4 { 10.96.0.0 . tcp . 80 . 0x00000004 : 10.250.0.2 . 8080, 10.96.0.0 . tcp . 80 . 0x00000005 : 10.250.0.3 . 9 }";
        assert_eq!(
            values(text),
            ["10.250.0.1", "10.250.0.2", "10.250.0.3"]
                .map(|a| a.parse::<std::net::Ipv4Addr>().unwrap())
                .to_vec()
        );
    }
}
