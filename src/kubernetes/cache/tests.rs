use std::time::Duration;

use super::*;
use crate::config::policy::pods::{
    Allow, Isolation, L4Protocol, PodPolicies, PodPolicy, PortRange, TierAction, TierPolicy,
    TierRule,
};
use crate::config::route::TABLE_MAIN;
use crate::config::route::{NextHopConfig, Route, RouteKind};
use crate::config::service::{
    Affinity, Backend, BackendCheck, BackendCheckKind, HealthCheckPort, Protocol, Service,
    WhenEmpty,
};

/// A fresh directory of this test's own.
fn dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("edgenetd-k8s-cache-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A state that uses every field and every variant the records must carry.
fn state() -> ClusterState {
    let service = |name: &str, protocol, affinity, when_empty, check| Service {
        name: format!("k8s:{name}"),
        address: "10.96.0.10".parse().unwrap(),
        port: 443,
        protocol,
        backends: vec![
            Backend {
                address: "10.244.1.5:8443".parse().unwrap(),
                weight: 1,
            },
            Backend {
                address: "10.244.2.5:8443".parse().unwrap(),
                weight: 0,
            },
        ],
        affinity,
        masquerade: crate::config::service::Masquerade::Always,
        source_ranges: vec!["10.0.0.0/8".parse().unwrap()],
        internal_backends: Some(vec![Backend {
            address: "10.1.0.9:80".parse().unwrap(),
            weight: 1,
        }]),
        reject_unserved_ports: true,
        when_empty,
        fallback: None,
        backend_check: BackendCheck {
            check,
            interval: Duration::from_millis(1500),
            timeout: Duration::from_millis(700),
            rise: 4,
            fall: 5,
            initial: Default::default(),
        },
    };
    let http = BackendCheckKind::Http {
        path: "/ready".into(),
        expect: (200, 299),
    };
    let route = |to: &str, kind| Route {
        to: to.parse().unwrap(),
        via: Some("192.168.1.12".parse().unwrap()),
        dev: Some("eth1".into()),
        metric: Some(10),
        table: TABLE_MAIN,
        kind,
        src: Some("192.168.1.1".parse().unwrap()),
        onlink: true,
        mtu: Some(1400),
        nexthops: Vec::new(),
    };
    let multipath = Route {
        via: None,
        dev: None,
        nexthops: vec![NextHopConfig {
            via: Some("fd00:1::12".parse().unwrap()),
            dev: Some("eth1".into()),
            weight: 3,
            onlink: false,
        }],
        ..route("fd10:2::/64", RouteKind::Unicast)
    };
    ClusterState {
        services: vec![
            service(
                "a/x:https",
                Protocol::Tcp,
                Affinity::SourceIp,
                WhenEmpty::Drop,
                http,
            ),
            service(
                "a/y:53",
                Protocol::Udp,
                Affinity::None,
                WhenEmpty::Reject,
                BackendCheckKind::Tcp,
            ),
            service(
                "a/sig:3868",
                Protocol::Sctp,
                Affinity::None,
                WhenEmpty::Reject,
                BackendCheckKind::None,
            ),
            service(
                "a/z:53",
                Protocol::Udp,
                Affinity::Sticky {
                    timeout: std::time::Duration::from_secs(600),
                },
                WhenEmpty::Reject,
                BackendCheckKind::None,
            ),
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        routes: vec![
            route("10.244.2.0/24", RouteKind::Unicast),
            route("10.244.3.0/24", RouteKind::Blackhole),
            route("10.244.4.0/24", RouteKind::Unreachable),
            route("10.244.5.0/24", RouteKind::Prohibit),
            route("10.244.6.0/24", RouteKind::Throw),
            multipath,
        ],
        pod_policies: pod_policies(),
        health_check_ports: vec![HealthCheckPort {
            service: "a/x".into(),
            port: 30_000,
            local_endpoints: 2,
            local_endpoints_v6: 1,
        }],
        service_cidrs: vec![
            "10.96.0.0/12".parse().unwrap(),
            "fd00:96::/108".parse().unwrap(),
        ],
        cluster_cidrs: vec!["10.42.0.0/16".parse().unwrap()],
    }
}

/// Pod isolation with every field and protocol the records must carry.
fn pod_policies() -> PodPolicies {
    let range = |protocol, first, last| PortRange {
        protocol,
        first,
        last,
    };
    PodPolicies {
        policies: vec![
            PodPolicy {
                name: "k8s:db/a".into(),
                ingress: Some(Isolation {
                    pods: vec!["10.1.0.6".parse().unwrap(), "fd00::6".parse().unwrap()],
                    allow: vec![
                        Allow {
                            pods: Some(vec!["10.1.0.6".parse().unwrap()]),
                            peers: Some(vec!["10.2.0.0/25".parse().unwrap()]),
                            ports: vec![
                                range(L4Protocol::Tcp, 80, 80),
                                range(L4Protocol::Udp, 53, 60),
                                range(L4Protocol::Sctp, 0, u16::MAX),
                            ],
                        },
                        Allow::default(),
                    ],
                }),
                egress: None,
            },
            PodPolicy {
                name: "k8s:db/b".into(),
                ingress: None,
                egress: Some(Isolation::default()),
            },
        ],
        admin: vec![TierPolicy {
            name: "k8s:cnp/a".into(),
            priority: 3,
            pods: vec!["10.1.0.6".parse().unwrap()],
            ingress: vec![
                TierRule {
                    action: TierAction::Pass,
                    matches: Allow {
                        pods: None,
                        peers: Some(vec!["10.2.0.0/25".parse().unwrap()]),
                        ports: vec![range(L4Protocol::Udp, 53, 53)],
                    },
                },
                TierRule::default(),
            ],
            egress: vec![TierRule {
                action: TierAction::Accept,
                matches: Allow::default(),
            }],
        }],
        baseline: vec![TierPolicy {
            name: "k8s:cnp/default".into(),
            priority: 0,
            pods: vec!["fd00::6".parse().unwrap()],
            ingress: Vec::new(),
            egress: vec![TierRule::default()],
        }],
    }
}

/// A moment to stamp files with (whole seconds: the file keeps seconds).
fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

#[test]
fn a_stored_state_reads_back_equal_with_its_stamp() {
    let cache = Cache::new(dir("roundtrip").join("sub/kubernetes-state.json"));
    assert!(cache.read().unwrap().is_none(), "no file yet: no cache");
    cache.store(&state(), Some(at(0))).unwrap();
    let want = Loaded {
        state: state(),
        as_of: Some(at(0)),
    };
    assert_eq!(cache.load(None, at(10)), Some(want));
    let tmp = cache.path().with_extension("json.tmp");
    assert!(!tmp.exists(), "the temporary file was renamed");
    cache.store(&ClusterState::default(), None).unwrap();
    let unstamped = cache.load(None, at(10)).unwrap();
    assert_eq!(
        (unstamped.state, unstamped.as_of),
        (ClusterState::default(), None)
    );
}

#[test]
fn a_cache_older_than_the_max_age_or_of_unknown_age_is_not_used() {
    let cache = Cache::new(dir("max-age").join("kubernetes-state.json"));
    let hour = Duration::from_secs(3600);
    cache.store(&state(), Some(at(0))).unwrap();
    let young = cache
        .load(Some(hour), at(3600))
        .expect("exactly the max age: used");
    assert_eq!(young.state, state());
    assert_eq!(cache.load(Some(hour), at(3601)), None, "one second over");
    assert!(cache.load(None, at(10 * 86_400)).is_some(), "no limit");
    // A clock behind the stamp (no real-time clock, no time yet): age zero, used.
    assert!(cache.load(Some(hour), at(0) - hour * 24).is_some());
    cache.store(&state(), None).unwrap();
    assert_eq!(
        cache.load(Some(hour), at(0)),
        None,
        "unknown age, a limit asked"
    );
    assert!(cache.load(None, at(0)).is_some());
}

#[test]
fn why_a_cache_is_not_used_is_said_with_its_age() {
    let day = Duration::from_secs(86_400);
    let e = judge(Some(at(0)), Some(day), at(93_784)).unwrap_err();
    assert_eq!(e, "it is 26h3m4s old, more than cache_max_age 24h");
    let e = judge(None, Some(day), at(0)).unwrap_err();
    assert!(
        e.contains("no stamp") && e.contains("cache_max_age 24h"),
        "{e}"
    );
    assert_eq!(
        judge(Some(at(5)), None, at(65)),
        Ok(Some(Duration::from_secs(60)))
    );
    assert_eq!(said(Duration::ZERO), "0s");
    assert_eq!(said(Duration::from_secs(3600)), "1h");
}

/// Files from before stamps have no `as_of`: they load, of unknown age; new files carry it
/// in seconds since the epoch.
#[test]
fn a_cache_from_before_stamps_reads_and_new_files_are_stamped() {
    let cache = Cache::new(dir("before-stamps").join("kubernetes-state.json"));
    fs::write(
        cache.path(),
        "{\"version\":1,\"services\":[],\"routes\":[]}",
    )
    .unwrap();
    let loaded = cache.read_stamped().unwrap().unwrap();
    assert_eq!(loaded.as_of, None);
    cache.store(&loaded.state, Some(at(42))).unwrap();
    let written = fs::read_to_string(cache.path()).unwrap();
    assert!(written.contains("\"as_of\":1700000042"), "{written}");
}

#[test]
fn a_corrupt_cache_is_ignored() {
    let dir = dir("corrupt");
    let cache = Cache::new(dir.join("kubernetes-state.json"));
    let cases: &[(&str, &str)] = &[
        ("{\"version\":1,\"services\":[", "EOF"),
        ("not json", "expected"),
        (
            "{\"version\":2,\"services\":[],\"routes\":[]}",
            "format version 2",
        ),
        (
            "{\"version\":1,\"services\":[],\"routes\":[{\"to\":\"10.0.0.0/33\",\"via\":null,\"dev\":null,\"metric\":null,\"table\":254,\"kind\":\"unicast\",\"src\":null,\"onlink\":false,\"mtu\":null,\"nexthops\":[]}]}",
            "bad route destination",
        ),
        (
            "{\"version\":1,\"services\":[],\"routes\":[],\"extra\":1}",
            "unknown field",
        ),
    ];
    for (text, why) in cases {
        fs::write(cache.path(), text).unwrap();
        let err = cache.read().unwrap_err();
        assert!(
            matches!(&err, CacheError::Corrupt { .. }) && err.to_string().contains(why),
            "{text}: {err}"
        );
        assert_eq!(cache.load(None, at(0)), None, "{text}");
    }
}

#[test]
fn the_old_cache_stays_until_the_rename() {
    let cache = Cache::new(dir("atomic").join("kubernetes-state.json"));
    let old = ClusterState {
        routes: state().routes,
        ..ClusterState::default()
    };
    cache.store(&old, Some(at(0))).unwrap();
    let staged = cache.stage(&state(), Some(at(1))).unwrap();
    assert_eq!(
        cache.read().unwrap(),
        Some(old.clone()),
        "staged, not committed"
    );
    staged.commit().unwrap();
    assert_eq!(cache.read().unwrap(), Some(state()));
}

#[test]
fn a_failed_write_leaves_the_old_cache() {
    let cache = Cache::new(dir("failed").join("kubernetes-state.json"));
    cache.store(&state(), Some(at(0))).unwrap();
    // A directory where the temporary file goes: creating it fails.
    fs::create_dir(cache.path().with_extension("json.tmp")).unwrap();
    let err = cache
        .store(&ClusterState::default(), Some(at(0)))
        .unwrap_err();
    assert!(matches!(err, CacheError::Io { op: "create", .. }), "{err}");
    assert_eq!(cache.read().unwrap(), Some(state()));
}

#[test]
fn a_cache_from_before_pod_policies_reads_with_none() {
    let cache = Cache::new(dir("before-pods").join("kubernetes-state.json"));
    fs::write(
        cache.path(),
        "{\"version\":1,\"services\":[],\"routes\":[]}",
    )
    .unwrap();
    assert_eq!(cache.read().unwrap(), Some(ClusterState::default()));
}

/// Files written while the pod policy model still carried the `inject_kernel_reject` test
/// hook hold it in every unit: they read back (the key ignored), and new files do not write
/// it.
#[test]
fn a_cache_with_the_old_inject_kernel_reject_key_reads_and_is_not_written_again() {
    let cache = Cache::new(dir("old-inject-key").join("kubernetes-state.json"));
    fs::write(
        cache.path(),
        r#"{"version":1,"services":[],"routes":[],"pod_policies":[{"name":"k8s:db/a","ingress":{"pods":["10.1.0.6"],"allow":[]},"egress":null,"inject_kernel_reject":false},{"name":"k8s:db/b","ingress":null,"egress":null,"inject_kernel_reject":true}]}"#,
    )
    .unwrap();
    let state = cache.read().unwrap().unwrap();
    let names: Vec<&str> = state
        .pod_policies
        .policies
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["k8s:db/a", "k8s:db/b"]);
    assert_eq!(
        state.pod_policies.policies[0]
            .ingress
            .as_ref()
            .unwrap()
            .pods,
        ["10.1.0.6".parse::<std::net::IpAddr>().unwrap()]
    );
    cache.store(&state, Some(at(0))).unwrap();
    let written = fs::read_to_string(cache.path()).unwrap();
    assert!(!written.contains("inject_kernel_reject"), "{written}");
    assert_eq!(cache.read().unwrap(), Some(state));
}

#[test]
fn a_cache_from_before_health_check_ports_reads_with_none() {
    let cache = Cache::new(dir("before-health-ports").join("kubernetes-state.json"));
    fs::write(
        cache.path(),
        "{\"version\":1,\"services\":[],\"routes\":[],\"pod_policies\":[]}",
    )
    .unwrap();
    let state = cache.read().unwrap().unwrap();
    assert!(state.health_check_ports.is_empty(), "{state:?}");
}

/// A file of before masquerade-per-address, source ranges and the service prefixes: its
/// services read back with the defaults of those fields, and no prefixes.
#[test]
fn a_cache_from_before_service_cidrs_and_masquerade_modes_reads_with_the_defaults() {
    let cache = Cache::new(dir("before-cidrs").join("kubernetes-state.json"));
    fs::write(
        cache.path(),
        r#"{"version":1,"services":[{"name":"k8s:a/web:http","address":"10.96.0.10","port":80,"protocol":"tcp","backends":[["10.244.1.5:8080",1]],"affinity":"none","masquerade":true,"when_empty":"reject","health":{"check":"none","http":null,"interval_ms":2000,"timeout_ms":1000,"rise":2,"fall":3}}],"routes":[]}"#,
    )
    .unwrap();
    let state = cache.read().unwrap().unwrap();
    assert!(state.service_cidrs.is_empty() && state.cluster_cidrs.is_empty());
    let s = &state.services[0];
    assert_eq!(s.masquerade, crate::config::service::Masquerade::Always);
    assert!(s.source_ranges.is_empty() && s.internal_backends.is_none());
    assert!(!s.reject_unserved_ports);
}
