//! One check of one backend, on the probe engine: `Ok` when it answers as the check expects,
//! else the reason in a few words (`refused`, `timeout`, `status 503`, ...) for the
//! transition's log line. The sockets carry no mark: a backend is reached the way the router
//! routes.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::service::{BackendCheck, BackendCheckKind};
use crate::probe::{self, Check, First, Pacing, Schedule, Target};

/// How late a probe may finish a check before it counts as wedged.
pub const GRACE: Duration = Duration::from_secs(5);

/// Runs one check of `backend`, at most `timeout` long.
pub async fn check(
    backend: SocketAddr,
    kind: &BackendCheckKind,
    timeout: Duration,
) -> Result<(), String> {
    if let BackendCheckKind::Http { path, .. } = kind
        && crate::fault_hook!(crate::fault::by_name::check_hangs(path), {
            let _ = path;
            false
        })
    {
        // Fault-injection builds: a probe that never returns, past its own timeout (the
        // probe watch's test).
        return std::future::pending().await;
    }
    let check = match kind {
        BackendCheckKind::None => return Ok(()),
        BackendCheckKind::Tcp => Check::Tcp,
        BackendCheckKind::Http { path, expect } => Check::Http {
            path,
            expect: *expect,
        },
        BackendCheckKind::Udp { send, expect } => Check::Udp {
            send,
            expect: expect.as_deref(),
        },
        BackendCheckKind::Dns { query_name } => Check::Dns {
            name: query_name,
            qtype: probe::dns::A,
        },
        BackendCheckKind::Tls { sni } => Check::Tls {
            sni: sni.as_deref(),
        },
    };
    let target = Target {
        addr: backend,
        mark: None,
    };
    probe::check(target, &check, timeout).await
}

/// How a backend is checked: first at a random offset within the interval, then `interval`
/// after each check.
pub fn schedule_of(check: &BackendCheck) -> Schedule {
    Schedule {
        interval: check.interval,
        timeout: check.timeout,
        grace: GRACE,
        rise: check.rise,
        fall: check.fall,
        first: First::RandomOffset,
        pacing: Pacing::AfterFinish,
    }
}
