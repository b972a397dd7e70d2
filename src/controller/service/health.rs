//! Backend health checks (`[service.health]`): a probe task per backend and check settings,
//! whose up/down state feeds the model (a down backend gets no slots, like weight 0).
//!
//! - `check = "tcp"`: a TCP connect within `timeout`. `check = "http"`: `GET <path>` over
//!   HTTP/1.0 within `timeout`, the status in `expect`.
//! - A backend starts **up** (a reload never blackholes a service before its first probes),
//!   goes down after `fall` failures in a row and up again after `rise` successes in a row.
//!   Every transition fires the controller's trigger, so the loop syncs at once: new
//!   connections avoid a failed backend within `fall × interval` plus one sync; established
//!   TCP connections are left alone; a UDP backend's conntrack entries are deleted.
//! - Probes run on smol's global executor; a probe whose backend or settings left the config
//!   is dropped (cancelled) at the next sync.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};

use crate::config::service::{HealthCheck, HealthCheckKind, Service};
use crate::sync::Trigger;

/// One probed backend with its check settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProbeKey {
    backend: SocketAddr,
    check: HealthCheck,
}

struct Probe {
    up: Arc<AtomicBool>,
    _task: smol::Task<()>,
}

/// The running probes.
pub struct HealthChecks {
    probes: HashMap<ProbeKey, Probe>,
    trigger: Trigger,
}

impl HealthChecks {
    /// No probes yet; `trigger` is fired on every up/down transition.
    pub fn new(trigger: Trigger) -> HealthChecks {
        HealthChecks {
            probes: HashMap::new(),
            trigger,
        }
    }

    /// Starts probes for the checked backends of `services` that have none and stops the
    /// probes nothing asks for any more.
    pub fn reconcile(&mut self, services: &[Service]) {
        let mut wanted: HashMap<ProbeKey, ()> = HashMap::new();
        for s in services {
            if s.health.check == HealthCheckKind::None {
                continue;
            }
            for b in &s.backends {
                wanted.insert(
                    ProbeKey {
                        backend: b.address,
                        check: s.health.clone(),
                    },
                    (),
                );
            }
        }
        self.probes.retain(|k, _| wanted.contains_key(k));
        for k in wanted.into_keys() {
            if self.probes.contains_key(&k) {
                continue;
            }
            let up = Arc::new(AtomicBool::new(true));
            let task = smol::spawn(run(k.clone(), up.clone(), self.trigger.clone()));
            self.probes.insert(k, Probe { up, _task: task });
        }
    }

    /// False only for a backend whose probe says it is down.
    pub fn is_up(&self, service: &Service, backend: SocketAddr) -> bool {
        if service.health.check == HealthCheckKind::None {
            return true;
        }
        let key = ProbeKey {
            backend,
            check: service.health.clone(),
        };
        self.probes
            .get(&key)
            .is_none_or(|p| p.up.load(Ordering::Relaxed))
    }

    /// Backends currently down (for logs and tests).
    pub fn down(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = self
            .probes
            .iter()
            .filter(|(_, p)| !p.up.load(Ordering::Relaxed))
            .map(|(k, _)| k.backend)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

async fn run(key: ProbeKey, up: Arc<AtomicBool>, trigger: Trigger) {
    let (mut oks, mut fails) = (0u32, 0u32);
    loop {
        let ok = probe(&key).await;
        if ok {
            oks += 1;
            fails = 0;
            if !up.load(Ordering::Relaxed) && oks >= key.check.rise {
                up.store(true, Ordering::Relaxed);
                log::info!("service backend {} is up", key.backend);
                trigger.fire();
            }
        } else {
            fails += 1;
            oks = 0;
            if up.load(Ordering::Relaxed) && fails >= key.check.fall {
                up.store(false, Ordering::Relaxed);
                log::warn!("service backend {} is down", key.backend);
                trigger.fire();
            }
        }
        smol::Timer::after(key.check.interval).await;
    }
}

async fn probe(key: &ProbeKey) -> bool {
    let timeout = key.check.timeout;
    let attempt = async {
        let mut stream = smol::net::TcpStream::connect(key.backend).await.ok()?;
        match &key.check.check {
            HealthCheckKind::Http { path, expect } => {
                let host = key.backend.ip();
                let req = format!(
                    "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: edgenetd\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(req.as_bytes()).await.ok()?;
                let mut head = [0u8; 64];
                let mut n = 0;
                while n < 12 {
                    let m = stream.read(&mut head[n..]).await.ok()?;
                    if m == 0 {
                        break;
                    }
                    n += m;
                }
                let status = parse_status(&head[..n])?;
                Some(status >= expect.0 && status <= expect.1)
            }
            _ => Some(true),
        }
    };
    let timed_out = async {
        smol::Timer::after(timeout).await;
        None
    };
    attempt.or(timed_out).await.unwrap_or(false)
}

/// The status code of an HTTP response head (`HTTP/1.x 200 ...`).
fn parse_status(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head).ok()?;
    let mut parts = text.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

/// How long a backend takes at most to be taken out: `fall` probes plus their waits.
pub fn detection_time(check: &HealthCheck) -> Duration {
    (check.interval + check.timeout) * check.fall
}

#[cfg(test)]
mod tests {
    use super::parse_status;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.0 200 OK\r\n"), Some(200));
        assert_eq!(parse_status(b"HTTP/1.1 503 Service"), Some(503));
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH"), None);
        assert_eq!(parse_status(b""), None);
    }
}
