//! edgenetd's own kube-proxy conformance suite: kube-proxy's packet-flow tables
//! (kubernetes/kubernetes `pkg/proxy/nftables/proxier_test.go`, `runPacketFlowTests`) and a
//! handful of e2e tests (`test/e2e/network/service.go`, `conntrack.go`, `dual_stack.go`),
//! ported row by row to real packets through the real daemon fed by the fake API server.
//!
//! Each `netns_test!` is one upstream test: its Services and EndpointSlices as the API writes
//! them, its addresses (10.180.0.x pods, 172.30.0.x cluster IPs, node 192.168.0.2, load
//! balancers 1.2.3.4 and 5.6.7.8, external clients 203.0.113.x, all inside the test's own
//! namespaces), and its rows, named `<UpstreamTest>/<upstream case>`. Every row runs; the test
//! fails at the end with a table of every case, HOLDS or FAILS and why (see `report`). The
//! tables are also written under `$CARGO_TARGET_TMPDIR/kube_proxy_conformance/`.
//!
//! Rows whose expectation relies on a `[kubernetes]` key (`service_cidrs`, `cluster_cidrs`,
//! `node_port_addresses`) say so; a build that refuses the key runs the test without it and
//! fails exactly those rows. Where edgenetd deliberately differs from kube-proxy the row's
//! note says so (and docs/kubernetes.md, "Deviations from kube-proxy", lists them).

mod common;

#[path = "kube_proxy_conformance/flow.rs"]
mod flow;
#[path = "kube_proxy_conformance/lab.rs"]
mod lab;
#[path = "kube_proxy_conformance/objects.rs"]
mod objects;
#[path = "kube_proxy_conformance/report.rs"]
mod report;

#[path = "kube_proxy_conformance/cluster_ip.rs"]
mod cluster_ip;
#[path = "kube_proxy_conformance/e2e.rs"]
mod e2e;
#[path = "kube_proxy_conformance/load_balancer.rs"]
mod load_balancer;
#[path = "kube_proxy_conformance/node_ports.rs"]
mod node_ports;
#[path = "kube_proxy_conformance/self_check.rs"]
mod self_check;
#[path = "kube_proxy_conformance/terminating.rs"]
mod terminating;
#[path = "kube_proxy_conformance/traffic_policy.rs"]
mod traffic_policy;
