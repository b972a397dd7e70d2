use std::net::SocketAddr;

use metrics_exporter_prometheus::PrometheusBuilder;

use super::*;
use crate::config::policy::pods::PodPolicy;
use crate::config::service::{Affinity, Backend, BackendCheck, WhenEmpty};
use crate::kubernetes::translate::nodes::pod_route;

const TOML: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.5:8080"]

[[route]]
to = "10.244.1.0/24"
via = "192.168.1.1"
"#;

fn toml(text: &str) -> Arc<DesiredState> {
    Arc::new(crate::config::load_str(&[("edgenetd.toml", text)]).unwrap())
}

fn service(name: &str, vip: &str, port: u16, backend: &str) -> Service {
    Service {
        name: format!("{NAME_PREFIX}{name}"),
        address: vip.parse().unwrap(),
        port,
        protocol: Protocol::Tcp,
        backends: vec![Backend {
            address: backend.parse::<SocketAddr>().unwrap(),
            weight: 1,
        }],
        affinity: Affinity::None,
        masquerade: crate::config::service::Masquerade::Never,
        source_ranges: Vec::new(),
        internal_backends: None,
        reject_unserved_ports: false,
        when_empty: WhenEmpty::Reject,
        fallback: None,
        backend_check: BackendCheck::default(),
    }
}

fn route(to: &str, via: &str) -> Route {
    pod_route(to.parse().unwrap(), via.parse().unwrap())
}

/// Units that isolate nothing, by name (enough to tell sets of them apart).
fn pods(names: &[&str]) -> PodPolicies {
    PodPolicies {
        policies: names
            .iter()
            .map(|n| PodPolicy {
                name: n.to_string(),
                ..PodPolicy::default()
            })
            .collect(),
        ..PodPolicies::default()
    }
}

fn names(state: &DesiredState) -> Vec<&str> {
    state
        .services
        .services
        .iter()
        .map(|s| s.name.as_str())
        .collect()
}

fn destinations(state: &DesiredState) -> Vec<String> {
    state
        .routing
        .routes
        .iter()
        .map(|r| format!("{} via {}", r.to, r.via.unwrap()))
        .collect()
}

/// Runs `f` with a recorder of its own and returns the rendered metrics.
fn recorded<F: FnOnce()>(f: F) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        describe_metrics();
        f();
    });
    handle.render()
}

fn conflicts(out: &str, kind: &str) -> f64 {
    let prefix = format!("{CONFLICTS_METRIC}{{kind=\"{kind}\"}} ");
    out.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{out}"))
}

#[test]
fn cluster_entries_are_added_after_the_toml_ones() {
    let mut c = Composer::new(toml(TOML));
    c.set_cluster(ClusterPart::services(vec![
        service("b/db:5432", "10.96.0.21", 5432, "10.244.2.9:5432"),
        service("a/api:http", "10.96.0.20", 80, "10.244.2.8:8080"),
    ]));
    c.set_cluster(ClusterPart::Routes(vec![route(
        "10.244.2.0/24",
        "192.168.1.12",
    )]));
    let state = c
        .take_if_changed()
        .expect("a first cluster state is a change");
    assert_eq!(names(&state), ["web", "k8s:a/api:http", "k8s:b/db:5432"]);
    assert_eq!(
        destinations(&state),
        [
            "10.244.1.0/24 via 192.168.1.1",
            "10.244.2.0/24 via 192.168.1.12"
        ]
    );
    assert!(c.take_if_changed().is_none(), "nothing set since");
}

#[test]
fn toml_wins_a_clash_which_is_logged_and_counted_once() {
    let out = recorded(|| {
        let mut c = Composer::new(toml(TOML));
        let clashing = vec![
            // Same VIP:port/protocol as TOML's `web`.
            service("a/web:http", "10.96.0.10", 80, "10.244.2.8:8080"),
            service("a/other:http", "10.96.0.11", 80, "10.244.2.8:8080"),
        ];
        // Same destination, table and metric as the TOML route, another gateway.
        let routes = vec![route("10.244.1.0/24", "192.168.1.11")];
        c.set_cluster(ClusterPart::services(clashing.clone()));
        c.set_cluster(ClusterPart::Routes(routes));
        let state = c.take_if_changed().unwrap();
        assert_eq!(names(&state), ["web", "k8s:a/other:http"]);
        assert_eq!(state.services.services[0].backends[0].address.port(), 8080);
        assert_eq!(destinations(&state), ["10.244.1.0/24 via 192.168.1.1"]);
        // The clash lasts through more composes: a new TOML load and a cluster change.
        c.set_toml(toml(TOML));
        let mut more = clashing.clone();
        more.push(service("a/third:http", "10.96.0.12", 80, "10.244.2.8:8080"));
        c.set_cluster(ClusterPart::services(more));
        let state = c.take_if_changed().unwrap();
        assert_eq!(names(&state).len(), 3, "{:?}", names(&state));
        c.set_toml(toml(TOML));
        assert!(c.take_if_changed().is_some());
    });
    assert_eq!(conflicts(&out, "services"), 1.0, "{out}");
    assert_eq!(conflicts(&out, "routes"), 1.0, "{out}");
}

#[test]
fn a_clash_that_goes_away_brings_the_cluster_entry_back_and_counts_again_if_it_returns() {
    let out = recorded(|| {
        let mut c = Composer::new(toml(TOML));
        c.set_cluster(ClusterPart::services(vec![service(
            "a/web:http",
            "10.96.0.10",
            80,
            "10.244.2.8:8080",
        )]));
        assert!(
            c.take_if_changed().is_none(),
            "an entry TOML shadows changes nothing"
        );
        c.set_toml(toml(""));
        assert_eq!(names(&c.take_if_changed().unwrap()), ["k8s:a/web:http"]);
        c.set_toml(toml(TOML));
        assert_eq!(names(&c.take_if_changed().unwrap()), ["web"]);
    });
    assert_eq!(conflicts(&out, "services"), 2.0, "{out}");
}

#[test]
fn two_cluster_entries_that_clash_keep_the_first() {
    let mut c = Composer::new(toml(""));
    c.set_cluster(ClusterPart::services(vec![
        service("b/y:80", "10.96.0.30", 80, "10.244.2.8:80"),
        service("a/x:80", "10.96.0.30", 80, "10.244.2.9:80"),
    ]));
    c.set_cluster(ClusterPart::Routes(vec![
        route("10.244.5.0/24", "192.168.1.16"),
        route("10.244.5.0/24", "192.168.1.15"),
    ]));
    let state = c.take_if_changed().unwrap();
    assert_eq!(names(&state), ["k8s:a/x:80"]);
    assert_eq!(destinations(&state), ["10.244.5.0/24 via 192.168.1.15"]);
}

#[test]
fn unchanged_input_publishes_nothing() {
    let first = toml(TOML);
    let mut c = Composer::new(Arc::clone(&first));
    assert!(
        c.take_if_changed().is_none(),
        "the TOML state is already out"
    );
    c.set_toml(Arc::clone(&first));
    assert!(c.take_if_changed().is_none(), "the same snapshot again");
    let services = vec![
        service("a/x:80", "10.96.0.30", 80, "10.244.2.8:80"),
        service("b/y:80", "10.96.0.31", 80, "10.244.2.9:80"),
    ];
    c.set_cluster(ClusterPart::services(services.clone()));
    assert!(c.take_if_changed().is_some());
    let mut reordered = services.clone();
    reordered.reverse();
    c.set_cluster(ClusterPart::services(reordered));
    assert!(!c.is_dirty(), "the same entries in another order");
    assert!(c.take_if_changed().is_none());
    // A change and its undo before the compose: the result equals what was published.
    let mut changed = services.clone();
    changed[0].backends[0].weight = 5;
    c.set_cluster(ClusterPart::services(changed));
    c.set_cluster(ClusterPart::services(services));
    assert!(c.take_if_changed().is_none());
    // An entry the TOML shadows can change without changing the result.
    c.set_cluster(ClusterPart::services(vec![service(
        "a/web:http",
        "10.96.0.10",
        80,
        "10.244.2.8:8080",
    )]));
    assert!(c.take_if_changed().is_some(), "x and y went");
    c.set_cluster(ClusterPart::services(vec![service(
        "a/web:http",
        "10.96.0.10",
        80,
        "10.244.2.99:8080",
    )]));
    assert!(c.is_dirty());
    assert!(
        c.take_if_changed().is_none(),
        "only a left-out entry changed"
    );
}

#[test]
fn a_thousand_updates_and_one_take_make_one_publish() {
    let mut c = Composer::new(toml(TOML));
    let mut publishes = 0;
    for i in 0..1000u16 {
        let backend = format!("10.244.{}.{}:8080", i / 250, i % 250 + 1);
        c.set_cluster(ClusterPart::services(vec![service(
            "a/api:http",
            "10.96.0.20",
            80,
            &backend,
        )]));
    }
    while let Some(state) = c.take_if_changed() {
        publishes += 1;
        let last = &state.services.services[1];
        assert_eq!(last.backends[0].address.to_string(), "10.244.3.250:8080");
    }
    assert_eq!(publishes, 1);
}

#[test]
fn the_cluster_state_is_kept_whole_for_the_cache() {
    let mut c = Composer::new(toml(TOML));
    let state = ClusterState {
        services: vec![service("a/web:http", "10.96.0.10", 80, "10.244.2.8:8080").into()],
        routes: vec![route("10.244.9.0/24", "192.168.1.19")],
        pod_policies: pods(&["k8s:a/deny"]),
        health_check_ports: vec![health_port("a/web", 30_000)],
        ..ClusterState::default()
    };
    c.restore(state.clone());
    assert_eq!(c.cluster(), &state, "clashing entries included");
    let composed = c.take_if_changed().unwrap();
    assert_eq!(names(&composed), ["web"]);
    assert_eq!(composed.routing.routes.len(), 2);
    assert_eq!(composed.pod_policies, pods(&["k8s:a/deny"]));
    assert_eq!(
        composed.services.health_check_ports,
        [health_port("a/web", 30_000)],
        "a TOML service keeping the traffic leaves the node's health answer to the cluster"
    );
}

fn health_port(service: &str, port: u16) -> HealthCheckPort {
    HealthCheckPort {
        service: service.into(),
        port,
        local_endpoints: 1,
        local_endpoints_v6: 1,
    }
}

/// A services part with only health-check node ports.
fn ports_part(health_check_ports: Vec<HealthCheckPort>) -> ClusterPart {
    ClusterPart::Services(ServicesConfig {
        health_check_ports,
        ..ServicesConfig::default()
    })
}

#[test]
fn health_check_ports_are_published_in_order_and_the_same_ports_change_nothing() {
    let mut c = Composer::new(toml(TOML));
    let ports = vec![health_port("b/y", 30_001), health_port("a/x", 30_002)];
    c.set_cluster(ports_part(ports.clone()));
    assert!(
        c.ready(&[Kind::Services]),
        "made from the services' objects"
    );
    let composed = c.take_if_changed().unwrap();
    let services: Vec<&str> = composed
        .services
        .health_check_ports
        .iter()
        .map(|p| p.service.as_str())
        .collect();
    assert_eq!(services, ["a/x", "b/y"]);
    c.set_cluster(ports_part(ports.into_iter().rev().collect()));
    assert!(
        c.take_if_changed().is_none(),
        "the same ports in another order"
    );
    let mut fewer = health_port("a/x", 30_002);
    fewer.local_endpoints = 0;
    c.set_cluster(ports_part(vec![fewer]));
    let composed = c.take_if_changed().expect("a count change is a change");
    assert_eq!(composed.services.health_check_ports[0].local_endpoints, 0);
}

#[test]
fn ready_once_every_enabled_kind_was_listed_or_the_cache_restored() {
    let mut c = Composer::new(toml(""));
    assert!(c.ready(&[]), "no kind enabled");
    assert!(!c.ready(&Kind::ALL));
    c.set_cluster(ClusterPart::services(Vec::new()));
    assert!(!c.ready(&Kind::ALL), "routes not listed yet");
    assert!(c.ready(&[Kind::Services]));
    c.set_cluster(ClusterPart::Routes(Vec::new()));
    assert!(!c.ready(&Kind::ALL), "network policies not listed yet");
    c.set_cluster(ClusterPart::NetworkPolicies(PodPolicies::default()));
    assert!(c.ready(&Kind::ALL), "an empty list is a list");
    let mut restored = Composer::new(toml(""));
    restored.restore(ClusterState::default());
    assert!(restored.ready(&Kind::ALL));
}

#[test]
fn the_first_snapshot_holds_the_cached_cluster_state() {
    let cached = ClusterState {
        services: vec![service("a/api:http", "10.96.0.20", 80, "10.244.2.8:8080").into()],
        routes: vec![route("10.244.9.0/24", "192.168.1.19")],
        pod_policies: pods(&["k8s:a/deny"]),
        health_check_ports: vec![health_port("a/api", 30_000)],
        ..ClusterState::default()
    };
    let (mut c, first) = Composer::start(toml(TOML), Some(cached));
    assert_eq!(names(&first), ["web", "k8s:a/api:http"]);
    assert_eq!(first.pod_policies, pods(&["k8s:a/deny"]));
    assert_eq!(first.routing.routes.len(), 2);
    assert_eq!(
        first.services.health_check_ports,
        [health_port("a/api", 30_000)]
    );
    assert!(c.take_if_changed().is_none(), "already out");
    let toml_only = toml(TOML);
    let (_, first) = Composer::start(Arc::clone(&toml_only), None);
    assert!(
        Arc::ptr_eq(&first, &toml_only),
        "no cache: the TOML snapshot itself"
    );
}

#[test]
fn network_policies_are_published_beside_the_toml_state_in_any_order() {
    let mut c = Composer::new(toml(TOML));
    c.set_cluster(ClusterPart::NetworkPolicies(pods(&["k8s:b/x", "k8s:a/y"])));
    assert!(c.ready(&[Kind::NetworkPolicies]));
    let composed = c.take_if_changed().unwrap();
    assert_eq!(
        composed.pod_policies,
        pods(&["k8s:a/y", "k8s:b/x"]),
        "sorted by name"
    );
    assert_eq!(names(&composed), ["web"], "the TOML services stay");
    c.set_cluster(ClusterPart::NetworkPolicies(pods(&["k8s:a/y", "k8s:b/x"])));
    assert!(
        !c.is_dirty(),
        "the same units in another order are no change"
    );
    assert!(c.take_if_changed().is_none());
    c.set_cluster(ClusterPart::NetworkPolicies(PodPolicies::default()));
    let composed = c.take_if_changed().unwrap();
    assert!(composed.pod_policies.is_empty(), "deleted policies go");
    let reloaded = toml(TOML);
    c.set_cluster(ClusterPart::NetworkPolicies(pods(&["k8s:a/y"])));
    c.set_toml(reloaded);
    let composed = c.take_if_changed().unwrap();
    assert_eq!(
        composed.pod_policies,
        pods(&["k8s:a/y"]),
        "kept across a TOML reload"
    );
}

#[test]
fn network_policies_label_is_the_feeds_word() {
    assert_eq!(Kind::NetworkPolicies.label(), "network_policies");
    assert_eq!(
        ClusterPart::NetworkPolicies(PodPolicies::default()).kind(),
        Kind::NetworkPolicies
    );
}

/// The bug: every address of one Service port after the first was "another service named
/// ..." and dropped, with a WARN per port. All of them share the port's name; only an entry
/// on the same VIP, port and protocol is a clash.
#[test]
fn only_one_address_of_a_service_port_is_served() {
    let out = recorded(|| {
        let mut c = Composer::new(toml(TOML));
        let name = "a/shop:http";
        let mut udp = service(name, "10.96.0.50", 80, "10.244.2.8:8080");
        udp.protocol = Protocol::Udp;
        c.set_cluster(ClusterPart::services(vec![
            service(name, "10.96.0.50", 80, "10.244.2.8:8080"),
            service(name, "fd00::50", 80, "[fd10::8]:8080"),
            service(name, "198.51.100.1", 80, "10.244.2.8:8080"),
            service(name, "192.0.2.7", 80, "10.244.2.8:8080"),
            service(name, "192.168.1.1", 30080, "10.244.2.8:8080"),
            service(name, "2001:db8::1", 30080, "[fd10::8]:8080"),
            udp,
        ]));
        let state = c.take_if_changed().unwrap();
        let served: Vec<String> = state.services.services[1..]
            .iter()
            .map(|s| {
                format!(
                    "{} {}/{}",
                    s.name,
                    SocketAddr::new(s.address, s.port),
                    s.protocol.name()
                )
            })
            .collect();
        assert_eq!(
            served,
            [
                "k8s:a/shop:http 10.96.0.50:80/tcp",
                "k8s:a/shop:http 10.96.0.50:80/udp",
                "k8s:a/shop:http 192.0.2.7:80/tcp",
                "k8s:a/shop:http 192.168.1.1:30080/tcp",
                "k8s:a/shop:http 198.51.100.1:80/tcp",
                "k8s:a/shop:http [2001:db8::1]:30080/tcp",
                "k8s:a/shop:http [fd00::50]:80/tcp",
            ],
            "dual-stack cluster IPs, the LB IP, the external IP and both node ports, TCP and UDP"
        );
        // A cluster entry on a TOML service's VIP, port and protocol is still a clash,
        // counted once however many composes it lasts.
        c.set_cluster(ClusterPart::services(vec![
            service(name, "10.96.0.10", 80, "10.244.2.8:8080"),
            service(name, "10.96.0.50", 80, "10.244.2.8:8080"),
        ]));
        let state = c.take_if_changed().unwrap();
        assert_eq!(names(&state), ["web", "k8s:a/shop:http"]);
        c.set_toml(toml(TOML));
        assert!(c.take_if_changed().is_some());
    });
    assert_eq!(conflicts(&out, "services"), 1.0, "{out}");
}

#[test]
fn the_services_part_brings_its_prefixes_into_the_composed_state() {
    let mut c = Composer::new(toml(TOML));
    let nets = |v: &[&str]| -> Vec<IpNet> { v.iter().map(|n| n.parse().unwrap()).collect() };
    c.set_cluster(ClusterPart::Services(ServicesConfig {
        services: vec![service("a/api:http", "10.96.0.20", 80, "10.244.2.8:8080").into()],
        service_cidrs: nets(&["fd00:96::/108", "10.96.0.0/12", "10.96.0.0/12"]),
        cluster_cidrs: nets(&["10.42.1.0/24"]),
        health_check_ports: Vec::new(),
    }));
    let state = c.take_if_changed().unwrap();
    assert_eq!(
        state.services.service_cidrs,
        nets(&["10.96.0.0/12", "fd00:96::/108"])
    );
    assert_eq!(state.services.cluster_cidrs, nets(&["10.42.1.0/24"]));
    assert_eq!(
        c.cluster().service_cidrs,
        nets(&["10.96.0.0/12", "fd00:96::/108"])
    );
    // The same prefixes in another order change nothing; another prefix does.
    c.set_cluster(ClusterPart::Services(ServicesConfig {
        services: vec![service("a/api:http", "10.96.0.20", 80, "10.244.2.8:8080").into()],
        service_cidrs: nets(&["10.96.0.0/12", "fd00:96::/108"]),
        cluster_cidrs: nets(&["10.42.1.0/24"]),
        health_check_ports: Vec::new(),
    }));
    assert!(c.take_if_changed().is_none());
    c.set_cluster(ClusterPart::Services(ServicesConfig {
        services: vec![service("a/api:http", "10.96.0.20", 80, "10.244.2.8:8080").into()],
        service_cidrs: nets(&["10.96.0.0/12"]),
        cluster_cidrs: nets(&["10.42.1.0/24"]),
        health_check_ports: Vec::new(),
    }));
    assert_eq!(
        c.take_if_changed().unwrap().services.service_cidrs,
        nets(&["10.96.0.0/12"])
    );
}

#[test]
fn a_snapshot_that_changed_only_services_says_so() {
    let mut c = Composer::new(toml(TOML));
    c.set_cluster(ClusterPart::Routes(vec![route(
        "10.244.2.0/24",
        "192.168.1.2",
    )]));
    c.set_cluster(ClusterPart::services(vec![service(
        "a",
        "10.96.0.20",
        80,
        "10.0.1.1:80",
    )]));
    assert!(c.take_if_changed().is_some());
    assert!(!c.services_only(), "the routes changed too");
    c.set_cluster(ClusterPart::services(vec![service(
        "a",
        "10.96.0.20",
        80,
        "10.0.1.2:80",
    )]));
    assert!(c.take_if_changed().is_some());
    assert!(c.services_only(), "an endpoint moved: only services");
    c.set_cluster(ClusterPart::NetworkPolicies(pods(&["p"])));
    c.set_cluster(ClusterPart::services(vec![service(
        "a",
        "10.96.0.20",
        80,
        "10.0.1.3:80",
    )]));
    assert!(c.take_if_changed().is_some());
    assert!(!c.services_only(), "the pod isolation changed too");
    c.set_toml(toml(TOML));
    assert!(c.take_if_changed().is_some(), "every reload is published");
    assert!(!c.services_only(), "a reload wakes every loop");
}

/// The bug: the composer kept a copy of the entries it last published, beside the cluster
/// state and the snapshot itself (three copies of every service at 5,000 Services). It now
/// keeps the published snapshot (shared with the daemon) and compares with that.
#[test]
fn the_composer_keeps_the_published_snapshot_itself_not_a_copy_of_its_entries() {
    let mut c = Composer::new(toml(""));
    c.set_cluster(ClusterPart::services(vec![service(
        "a/x:80",
        "10.96.0.30",
        80,
        "10.244.2.8:80",
    )]));
    let first = c.take_if_changed().unwrap();
    assert_eq!(Arc::strong_count(&first), 2, "the composer holds it too");
    let generation = c.generation();
    c.set_cluster(ClusterPart::services(vec![service(
        "a/x:80",
        "10.96.0.30",
        80,
        "10.244.2.8:80",
    )]));
    assert_eq!(
        c.generation(),
        generation,
        "the same state: the cache stays"
    );
    c.set_cluster(ClusterPart::services(vec![service(
        "a/x:80",
        "10.96.0.30",
        80,
        "10.244.2.9:80",
    )]));
    assert_ne!(c.generation(), generation, "a change: the cache is written");
    let second = c.take_if_changed().unwrap();
    assert_eq!(Arc::strong_count(&first), 1, "the last snapshot let go");
    assert_eq!(
        second.services.services[0].backends[0].address.to_string(),
        "10.244.2.9:80"
    );
}
