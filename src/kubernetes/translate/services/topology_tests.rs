//! kube-proxy's `TestCategorizeEndpoints` (pkg/proxy/topology_test.go), case by case under
//! upstream's names, plus the `PreferSameNode` cases of the node hints. Upstream's cases
//! that toggle feature gates long since removed (TopologyAwareHints, ProxyTerminating
//! Endpoints) are taken with the gates on, as every supported kube-proxy runs; its
//! `hintsAnnotation` cases follow today's kube-proxy, which reads the hints alone.
//!
//! `cluster` and `local` list the backends that take new connections (weight above 0).

use std::collections::BTreeSet;

use super::*;

/// One endpoint: address, zone hints, node hints, ready, serving, terminating, on this node.
type Ep = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    bool,
    bool,
    bool,
    bool,
);

const fn ready(address: &'static str, zones: &'static [&'static str], local: bool) -> Ep {
    (address, zones, &[], true, true, false, local)
}

const fn unready(address: &'static str, zones: &'static [&'static str]) -> Ep {
    (address, zones, &[], false, false, false, false)
}

const fn serving_terminating(address: &'static str, local: bool) -> Ep {
    (address, &[], &[], false, true, true, local)
}

struct Case {
    name: &'static str,
    zone: Option<&'static str>,
    endpoints: &'static [Ep],
    cluster: &'static [&'static str],
    local: &'static [&'static str],
    any: bool,
}

const A: &[&str] = &["zone-a"];
const B: &[&str] = &["zone-b"];
const C: &[&str] = &["zone-c"];
const NONE: &[&str] = &[];

const FOUR_ZONED: &[Ep] = &[
    ready("10.1.2.3:80", A, false),
    ready("10.1.2.4:80", B, false),
    ready("10.1.2.5:80", C, false),
    ready("10.1.2.6:80", A, false),
];
const ALL_FOUR: &[&str] = &["10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"];

const CASES: &[Case] = &[
    Case {
        name: "hints enabled, hints annotation == auto",
        zone: Some("zone-a"),
        endpoints: FOUR_ZONED,
        cluster: &["10.1.2.3:80", "10.1.2.6:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "externalTrafficPolicy: Local, topology ignored for Local endpoints",
        zone: Some("zone-a"),
        endpoints: &[
            ready("10.1.2.3:80", A, true),
            ready("10.1.2.4:80", B, true),
            ready("10.1.2.5:80", C, false),
            ready("10.1.2.6:80", A, false),
        ],
        cluster: &["10.1.2.3:80", "10.1.2.6:80"],
        local: &["10.1.2.3:80", "10.1.2.4:80"],
        any: true,
    },
    Case {
        name: "empty node labels",
        zone: None,
        endpoints: &[ready("10.1.2.3:80", A, false)],
        cluster: &["10.1.2.3:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "empty zone label",
        zone: Some(""),
        endpoints: &[ready("10.1.2.3:80", A, false)],
        cluster: &["10.1.2.3:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "node in different zone, no endpoint filtering",
        zone: Some("zone-b"),
        endpoints: &[ready("10.1.2.3:80", A, false)],
        cluster: &["10.1.2.3:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "unready endpoint",
        zone: Some("zone-a"),
        endpoints: &[
            ready("10.1.2.3:80", A, false),
            ready("10.1.2.4:80", B, false),
            ready("10.1.2.5:80", C, false),
            unready("10.1.2.6:80", A),
        ],
        cluster: &["10.1.2.3:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "only unready endpoints in same zone (should not filter)",
        zone: Some("zone-a"),
        endpoints: &[
            unready("10.1.2.3:80", A),
            ready("10.1.2.4:80", B, false),
            ready("10.1.2.5:80", C, false),
            unready("10.1.2.6:80", A),
        ],
        cluster: &["10.1.2.4:80", "10.1.2.5:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "missing hints, no filtering applied",
        zone: Some("zone-a"),
        endpoints: &[
            ready("10.1.2.3:80", A, false),
            ready("10.1.2.4:80", B, false),
            ready("10.1.2.5:80", NONE, false),
            ready("10.1.2.6:80", A, false),
        ],
        cluster: ALL_FOUR,
        local: &[],
        any: true,
    },
    Case {
        name: "multiple hints per endpoint, filtering includes any endpoint with zone included",
        zone: Some("zone-c"),
        endpoints: &[
            ready("10.1.2.3:80", &["zone-a", "zone-b", "zone-c"], false),
            ready("10.1.2.4:80", &["zone-b", "zone-c"], false),
            ready("10.1.2.5:80", &["zone-b", "zone-d"], false),
            ready("10.1.2.6:80", C, false),
        ],
        cluster: &["10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "conflicting topology and localness require merging allEndpoints",
        zone: Some("zone-a"),
        endpoints: &[
            ready("10.0.0.0:80", A, true),
            ready("10.0.0.1:80", B, true),
            ready("10.0.0.2:80", A, false),
            ready("10.0.0.3:80", B, false),
        ],
        cluster: &["10.0.0.0:80", "10.0.0.2:80"],
        local: &["10.0.0.0:80", "10.0.0.1:80"],
        any: true,
    },
    Case {
        name: "internalTrafficPolicy: Local, with empty endpoints",
        zone: None,
        endpoints: &[],
        cluster: &[],
        local: &[],
        any: false,
    },
    Case {
        name: "internalTrafficPolicy: Local, but all endpoints are remote",
        zone: None,
        endpoints: &[
            ready("10.0.0.0:80", NONE, false),
            ready("10.0.0.1:80", NONE, false),
        ],
        cluster: &["10.0.0.0:80", "10.0.0.1:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "internalTrafficPolicy: Local, some endpoints are local",
        zone: None,
        endpoints: &[
            ready("10.0.0.0:80", NONE, true),
            ready("10.0.0.1:80", NONE, false),
        ],
        cluster: &["10.0.0.0:80", "10.0.0.1:80"],
        local: &["10.0.0.0:80"],
        any: true,
    },
    Case {
        name: "Cluster traffic policy, endpoints not Ready",
        zone: None,
        endpoints: &[unready("10.0.0.0:80", NONE), unready("10.0.0.1:80", NONE)],
        cluster: &[],
        local: &[],
        any: false,
    },
    Case {
        name: "Cluster traffic policy, some endpoints are Ready",
        zone: None,
        endpoints: &[
            unready("10.0.0.0:80", NONE),
            ready("10.0.0.1:80", NONE, false),
        ],
        cluster: &["10.0.0.1:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "Cluster traffic policy, PTE enabled, all endpoints are terminating",
        zone: None,
        endpoints: &[
            serving_terminating("10.0.0.0:80", true),
            serving_terminating("10.0.0.1:80", false),
        ],
        cluster: &["10.0.0.0:80", "10.0.0.1:80"],
        local: &["10.0.0.0:80"],
        any: true,
    },
    Case {
        name: "iTP: Local, eTP: Local, PTE enabled, all endpoints remote and terminating",
        zone: None,
        endpoints: &[
            serving_terminating("10.0.0.0:80", false),
            serving_terminating("10.0.0.1:80", false),
        ],
        cluster: &["10.0.0.0:80", "10.0.0.1:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "iTP: Cluster, eTP: Local, PTE enabled, with terminating endpoints",
        zone: None,
        endpoints: &[
            ready("10.0.0.0:80", NONE, false),
            ("10.0.0.1:80", NONE, NONE, false, false, false, true),
            serving_terminating("10.0.0.2:80", true),
            serving_terminating("10.0.0.3:80", false),
        ],
        cluster: &["10.0.0.0:80"],
        local: &["10.0.0.2:80"],
        any: true,
    },
    Case {
        name: "PreferSameNode: node hints for this node select its endpoints",
        zone: Some("zone-a"),
        endpoints: &[
            ("10.0.0.0:80", A, &["edge-1"], true, true, false, true),
            ("10.0.0.1:80", A, &["edge-2"], true, true, false, false),
            ("10.0.0.2:80", B, &["edge-3"], true, true, false, false),
        ],
        cluster: &["10.0.0.0:80"],
        local: &["10.0.0.0:80"],
        any: true,
    },
    Case {
        name: "PreferSameNode: no endpoint hinted for this node falls back to zone hints",
        zone: Some("zone-a"),
        endpoints: &[
            ("10.0.0.1:80", A, &["edge-2"], true, true, false, false),
            ("10.0.0.2:80", B, &["edge-3"], true, true, false, false),
        ],
        cluster: &["10.0.0.1:80"],
        local: &[],
        any: true,
    },
    Case {
        name: "PreferSameNode: an endpoint without node hints falls back to zone hints",
        zone: Some("zone-b"),
        endpoints: &[
            ("10.0.0.0:80", A, &["edge-1"], true, true, false, true),
            ("10.0.0.2:80", B, NONE, true, true, false, false),
        ],
        cluster: &["10.0.0.2:80"],
        local: &["10.0.0.0:80"],
        any: true,
    },
];

#[test]
fn categorize_endpoints() {
    for case in CASES {
        let zones: Vec<Vec<String>> = case
            .endpoints
            .iter()
            .map(|e| e.1.iter().map(|z| z.to_string()).collect())
            .collect();
        let nodes: Vec<Vec<String>> = case
            .endpoints
            .iter()
            .map(|e| e.2.iter().map(|n| n.to_string()).collect())
            .collect();
        let endpoints: Vec<Endpoint<'_>> = case
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| Endpoint {
                address: e.0.parse().unwrap(),
                ready: e.3,
                serving: e.4,
                terminating: e.5,
                node_name: Some(if e.6 { "edge-1" } else { "edge-9" }),
                zone_hints: &zones[i],
                node_hints: &nodes[i],
            })
            .collect();
        let here = Here {
            node: "edge-1",
            zone: case.zone.filter(|z| !z.is_empty()),
        };
        let serving = |b: Vec<Backend>| -> BTreeSet<String> {
            b.iter()
                .filter(|b| b.weight > 0)
                .map(|b| b.address.to_string())
                .collect()
        };
        let want = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
        assert_eq!(
            serving(cluster(&endpoints, here)),
            want(case.cluster),
            "{}: cluster",
            case.name
        );
        assert_eq!(
            serving(local(&endpoints, here)),
            want(case.local),
            "{}: local",
            case.name
        );
        assert_eq!(
            any_usable(&endpoints),
            case.any,
            "{}: hasAnyEndpoints",
            case.name
        );
    }
}

#[test]
fn terminating_endpoints_drain_at_weight_zero_while_ready_ones_serve() {
    let zones = vec!["zone-a".to_string()];
    let endpoints = [
        Endpoint {
            address: "10.0.0.1:80".parse().unwrap(),
            ready: true,
            serving: true,
            terminating: false,
            node_name: Some("edge-1"),
            zone_hints: &zones,
            node_hints: &[],
        },
        Endpoint {
            address: "10.0.0.2:80".parse().unwrap(),
            ready: false,
            serving: true,
            terminating: true,
            node_name: Some("edge-2"),
            zone_hints: &[],
            node_hints: &[],
        },
    ];
    let here = Here {
        node: "edge-1",
        zone: Some("zone-a"),
    };
    assert_eq!(
        mode(&endpoints, here),
        Mode::SameZone,
        "only ready endpoints need hints"
    );
    let weights: Vec<(String, u32)> = cluster(&endpoints, here)
        .iter()
        .map(|b| (b.address.to_string(), b.weight))
        .collect();
    assert_eq!(
        weights,
        [
            ("10.0.0.1:80".to_string(), 1),
            ("10.0.0.2:80".to_string(), 0)
        ]
    );
}
