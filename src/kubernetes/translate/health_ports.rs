//! Services + EndpointSlices -> the health-check node ports this node answers on
//! (kube-proxy's service health server, `pkg/proxy/healthcheck/service_health.go`), and the
//! count each answers with.
//!
//! - **Which Services**: `type: LoadBalancer` with `externalTrafficPolicy: Local` and a
//!   `healthCheckNodePort` (the API server allocates one for exactly those), among the
//!   Services kube-proxy serves at all (not headless, not labelled for another proxy).
//! - **The count** is kube-proxy's `LocalReadyEndpoints`: the distinct addresses of the
//!   endpoints whose `nodeName` is this node and that take new connections (`ready`, which
//!   defaults to true; an endpoint that also says `terminating` counts as terminating, as
//!   the service translation reads it), over every EndpointSlice of the Service that has a
//!   usable port. An address serving two ports is one endpoint.
//! - **Dual-stack**: kube-proxy has one proxier per IP family, each counting only the slices
//!   of its address type and serving the port for the Services of its family, and a probe
//!   gets the count of the family it came over. A single-stack Service has one count, which
//!   every probe gets.

use std::collections::BTreeSet;

use crate::config::service::HealthCheckPort;
use crate::kubernetes::objects::{self, EndpointSlice};
use crate::kubernetes::order;
use crate::kubernetes::translate::services::{SERVICE_NAME_LABEL, skip_reason};

/// The health-check node port of every Service that has one, with this node's counts,
/// ordered by Service (`<namespace>/<name>`).
pub fn translate<'a>(
    services: impl IntoIterator<Item = &'a objects::Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    node_name: &str,
) -> Vec<HealthCheckPort> {
    let slices: Vec<&EndpointSlice> = slices.into_iter().collect();
    let mut out: Vec<HealthCheckPort> = services
        .into_iter()
        .filter_map(|svc| {
            let mine = |s: &&&EndpointSlice| {
                s.metadata.namespace == svc.metadata.namespace
                    && s.metadata.labels.get(SERVICE_NAME_LABEL) == Some(&svc.metadata.name)
            };
            let own: Vec<&EndpointSlice> = slices.iter().filter(mine).copied().collect();
            one(svc, &own, node_name)
        })
        .collect();
    order::sort_by(&mut out, |a, b| a.service.cmp(&b.service));
    out
}

/// The health-check node port of one Service, if it has one, counted over `own`: the
/// EndpointSlices labelled with its name in its namespace (what [`translate`] makes of it).
pub fn one(
    svc: &objects::Service,
    own: &[&EndpointSlice],
    node_name: &str,
) -> Option<HealthCheckPort> {
    let port = health_check_port(svc)?;
    let v4 = local_ready(own, "IPv4", node_name);
    let v6 = local_ready(own, "IPv6", node_name);
    let (local_endpoints, local_endpoints_v6) = match families(svc) {
        (true, false) => (v4, v4),
        (false, true) => (v6, v6),
        _ => (v4, v6),
    };
    Some(HealthCheckPort {
        service: format!("{}/{}", svc.metadata.namespace, svc.metadata.name),
        port,
        local_endpoints,
        local_endpoints_v6,
    })
}

/// The Service's health-check node port, if kube-proxy would serve one for it.
fn health_check_port(svc: &objects::Service) -> Option<u16> {
    let spec = &svc.spec;
    let wanted = spec.type_.as_deref() == Some("LoadBalancer")
        && spec.external_traffic_policy.as_deref() == Some("Local")
        && skip_reason(svc).is_none();
    if !wanted {
        return None;
    }
    spec.health_check_node_port
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
}

/// Whether the Service has an IPv4 and an IPv6 cluster IP (`clusterIPs`, else `clusterIP`).
fn families(svc: &objects::Service) -> (bool, bool) {
    let spec = &svc.spec;
    let ips = if spec.cluster_ips.is_empty() {
        spec.cluster_ip.iter().collect::<Vec<_>>()
    } else {
        spec.cluster_ips.iter().collect()
    };
    let parsed: Vec<std::net::IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
    (
        parsed.iter().any(|ip| ip.is_ipv4()),
        parsed.iter().any(|ip| ip.is_ipv6()),
    )
}

/// Distinct addresses of this node's endpoints that take new connections, in the slices of
/// `address_type` that have a usable port.
fn local_ready(slices: &[&EndpointSlice], address_type: &str, node_name: &str) -> u32 {
    let mut addresses: BTreeSet<&str> = BTreeSet::new();
    for slice in slices.iter().filter(|s| s.address_type == address_type) {
        // kube-proxy keys endpoints by service port: a slice without a port number gives none.
        if !slice.ports.iter().any(|p| p.port.is_some_and(|n| n != 0)) {
            continue;
        }
        for ep in &slice.endpoints {
            let c = &ep.conditions;
            let local = ep.node_name.as_deref() == Some(node_name);
            if local && c.is_ready() && !c.is_terminating() {
                addresses.extend(ep.addresses.first().map(String::as_str));
            }
        }
    }
    addresses.len() as u32
}

#[cfg(test)]
mod tests;
