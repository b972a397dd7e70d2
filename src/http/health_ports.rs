//! kube-proxy's service health server (`pkg/proxy/healthcheck/service_health.go`): one
//! listener per health-check node port, on every address of both families, answering every
//! request on it (any path, any method; HEAD without the body) with the Service's name and
//! this node's count of local endpoints, so load balancers send traffic only to nodes that
//! have one:
//!
//! - status 200 when the count is above 0 and the daemon's loops are live (the verdict of
//!   /healthz, as kube-proxy's `serviceProxyHealthy` is its /healthz's), else 503;
//! - `Content-Type: application/json`, `X-Content-Type-Options: nosniff`,
//!   `X-Load-Balancing-Endpoint-Weight: <count>`;
//! - kube-proxy's body byte for byte: `service.namespace`, `service.name`, `localEndpoints`,
//!   `serviceProxyHealthy`, tab-indented, no final newline;
//! - the count of the family the probe came over (kube-proxy counts per IP family).
//!
//! The listeners run on the HTTP server's thread and executor, with its head deadline, size
//! cap and admission (one slot table for all of them, apart from the main server's, so a
//! flood of probes never locks out /healthz); `metrics_allow` does not apply, as kube-proxy
//! answers every source. The table of answers is read at every request, so a new count is
//! in force the moment it is set; only a change in the set of ports wakes the task that
//! opens and closes listeners. A port that cannot be bound is logged once, counted, and
//! tried again with every new snapshot (as kube-proxy tries at every sync); the others keep
//! serving.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_channel::{Receiver, Sender};
use smol::Async;

use super::admission::{Admission, LIMITS};
use super::server::{LISTEN_BACKLOG, Site, accept_loop};
use super::{Method, Reply};
use crate::liveness::Liveness;

/// Counter of failed binds of health-check node ports.
pub const BIND_FAILURES: &str = "edgenetd_health_check_port_bind_failures_total";
/// Gauge of health-check node ports being served.
pub const LISTENING: &str = "edgenetd_health_check_ports";

/// Describes the metrics and creates their series at 0.
pub fn describe_metrics() {
    metrics::describe_counter!(
        BIND_FAILURES,
        "Attempts to listen on a Service's health-check node port that failed (the port is tried again with every new desired state; the others keep serving)."
    );
    metrics::describe_gauge!(
        LISTENING,
        "Health-check node ports (kube-proxy's service health server) being served."
    );
    metrics::counter!(BIND_FAILURES).absolute(0);
    metrics::gauge!(LISTENING).set(0.0);
}

/// One port and what it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthPort {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The TCP port.
    pub port: u16,
    /// This node's endpoints that take new connections, for probes over IPv4.
    pub local_endpoints: u32,
    /// The same for probes over IPv6.
    pub local_endpoints_v6: u32,
}

/// The ports to serve and their answers, shared by whoever sets them and the HTTP thread.
pub struct HealthPorts {
    /// The answers, by port.
    table: Mutex<BTreeMap<u16, HealthPort>>,
    /// Wakes the listener task after the set of ports changed (capacity one).
    wake: Sender<()>,
    /// The listener task's end, taken by the HTTP thread.
    woken: Receiver<()>,
    /// A port could not be bound at the last pass: every `set` wakes the task to try again.
    failing: AtomicBool,
}

impl Default for HealthPorts {
    fn default() -> HealthPorts {
        let (wake, woken) = async_channel::bounded(1);
        HealthPorts {
            table: Mutex::new(BTreeMap::new()),
            wake,
            woken,
            failing: AtomicBool::new(false),
        }
    }
}

impl HealthPorts {
    /// Replaces every port and answer; the first entry of a port wins (the API server never
    /// gives two Services one node port).
    pub fn set(&self, ports: impl IntoIterator<Item = HealthPort>) {
        let mut next = BTreeMap::new();
        for p in ports {
            next.entry(p.port).or_insert(p);
        }
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let moved = owners(&table) != owners(&next);
        *table = next;
        drop(table);
        if moved || self.failing.load(Ordering::Relaxed) {
            let _ = self.wake.try_send(());
        }
    }

    /// The answer of `port`, if it is served.
    fn get(&self, port: u16) -> Option<HealthPort> {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        table.get(&port).cloned()
    }

    /// Which Service each port is for.
    fn wanted(&self) -> BTreeMap<u16, String> {
        owners(&self.table.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// `port -> <namespace>/<name>`.
fn owners(table: &BTreeMap<u16, HealthPort>) -> BTreeMap<u16, String> {
    table
        .iter()
        .map(|(port, p)| (*port, format!("{}/{}", p.namespace, p.name)))
        .collect()
}

/// kube-proxy's answer for `port` to a probe over IPv6 (`v6`) or IPv4, with the daemon's
/// liveness `healthy`.
pub fn answer(port: &HealthPort, v6: bool, healthy: bool) -> Reply {
    let count = if v6 {
        port.local_endpoints_v6
    } else {
        port.local_endpoints
    };
    let quote = |s: &str| serde_json::to_string(s).expect("a string serializes");
    let body = format!(
        "{{\n\t\"service\": {{\n\t\t\"namespace\": {},\n\t\t\"name\": {}\n\t}},\n\t\"localEndpoints\": {count},\n\t\"serviceProxyHealthy\": {healthy}\n}}",
        quote(&port.namespace),
        quote(&port.name),
    );
    Reply {
        status: if count != 0 && healthy { 200 } else { 503 },
        content_type: "application/json",
        body,
        headers: vec![
            ("X-Content-Type-Options", "nosniff".into()),
            ("X-Load-Balancing-Endpoint-Weight", count.to_string()),
        ],
    }
}

/// What one listener answers with.
struct PortSite {
    /// Its port.
    port: u16,
    /// The answers.
    ports: Arc<HealthPorts>,
    /// The daemon's liveness.
    liveness: Arc<Liveness>,
}

impl Site for PortSite {
    fn allow(&self) -> Option<&[ipnet::IpNet]> {
        None
    }

    fn answer(&self, _method: &Method, _path: &str, peer: IpAddr) -> Reply {
        match self.ports.get(self.port) {
            Some(port) => answer(&port, peer.is_ipv6(), self.liveness.report().all_live()),
            // Closed between the accept and the answer.
            None => Reply::text(503, "this health check port is being closed\n"),
        }
    }
}

/// An open listener: its Service, and the task accepting on it.
struct Open {
    /// `<namespace>/<name>`.
    service: String,
    /// Cancelled to close the port.
    task: smol::Task<()>,
}

/// Opens, moves and closes the listeners as the ports change, on the HTTP thread, for as
/// long as it runs; it sleeps on the wake-up channel in between (no timer).
pub(crate) async fn serve(
    ex: Rc<smol::LocalExecutor<'static>>,
    ports: Arc<HealthPorts>,
    liveness: Arc<Liveness>,
) {
    let table = Rc::new(RefCell::new(Admission::new(LIMITS)));
    ex.spawn(super::held::reap(Rc::clone(&table))).detach();
    let mut open: BTreeMap<u16, Open> = BTreeMap::new();
    // Ports whose bind failed, and for which Service: logged once until it works or goes.
    let mut failing: BTreeMap<u16, String> = BTreeMap::new();
    let woken = ports.woken.clone();
    loop {
        let wanted = ports.wanted();
        let stale: Vec<u16> = open
            .iter()
            .filter(|(port, o)| wanted.get(port) != Some(&o.service))
            .map(|(port, _)| *port)
            .collect();
        for port in stale {
            if let Some(o) = open.remove(&port) {
                // Awaited, so the socket is closed before the port is bound again.
                o.task.cancel().await;
                log::info!(
                    "health check of service {} on port {port} closed",
                    o.service
                );
            }
        }
        for (port, service) in &wanted {
            if open.contains_key(port) {
                continue;
            }
            match listen(*port) {
                Ok(listener) => {
                    let site = Arc::new(PortSite {
                        port: *port,
                        ports: Arc::clone(&ports),
                        liveness: Arc::clone(&liveness),
                    });
                    let task = ex.spawn(accept_loop(
                        Rc::clone(&ex),
                        listener,
                        site,
                        Rc::clone(&table),
                    ));
                    log::info!("serving the health check of service {service} on port {port}");
                    failing.remove(port);
                    open.insert(
                        *port,
                        Open {
                            service: service.clone(),
                            task,
                        },
                    );
                }
                Err(e) => {
                    metrics::counter!(BIND_FAILURES).increment(1);
                    if failing.get(port) == Some(service) {
                        log::debug!("health check of service {service}: port {port}: {e}");
                    } else {
                        log::warn!(
                            "cannot serve the health check of service {service} on port {port}: {e}; load balancers probing it will take this node for down"
                        );
                        failing.insert(*port, service.clone());
                    }
                }
            }
        }
        failing.retain(|port, _| wanted.contains_key(port) && !open.contains_key(port));
        ports.failing.store(!failing.is_empty(), Ordering::Relaxed);
        metrics::gauge!(LISTENING).set(open.len() as f64);
        // Never closed: `ports` holds the sending end too. Changes made during a pass leave
        // one wake-up pending (capacity one), so a burst costs at most one more pass.
        if woken.recv().await.is_err() {
            return;
        }
    }
}

/// Binds `port` on every address: both families on one socket, or IPv4 alone where the
/// kernel has no IPv6.
fn listen(port: u16) -> std::io::Result<Async<std::net::TcpListener>> {
    let listener = match crate::sys::dual_stack_listener(port, LISTEN_BACKLOG) {
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            let l = std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, port))?;
            crate::sys::set_listen_backlog(&l, LISTEN_BACKLOG)?;
            l
        }
        other => other?,
    };
    Async::new(listener)
}

#[cfg(test)]
mod tests;
