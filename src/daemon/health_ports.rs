//! The desired state's health-check node ports as the HTTP server serves them.

use crate::config::DesiredState;
use crate::http::health_ports::HealthPort;

/// Every `services.health_check_ports` entry, split into namespace and name.
pub fn of(desired: &DesiredState) -> Vec<HealthPort> {
    desired
        .services
        .health_check_ports
        .iter()
        .map(|p| {
            let (namespace, name) = p.service.split_once('/').unwrap_or(("", &p.service));
            HealthPort {
                namespace: namespace.to_string(),
                name: name.to_string(),
                port: p.port,
                local_endpoints: p.local_endpoints,
                local_endpoints_v6: p.local_endpoints_v6,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::service::HealthCheckPort;

    #[test]
    fn entries_keep_their_counts_and_split_at_the_first_slash() {
        let mut desired = DesiredState::default();
        desired.services.health_check_ports = vec![HealthCheckPort {
            service: "ns1/svc1".into(),
            port: 30_000,
            local_endpoints: 2,
            local_endpoints_v6: 1,
        }];
        let want = HealthPort {
            namespace: "ns1".into(),
            name: "svc1".into(),
            port: 30_000,
            local_endpoints: 2,
            local_endpoints_v6: 1,
        };
        assert_eq!(of(&desired), [want]);
    }
}
