//! Issue 26 with the real daemon fed by the fake API server and real packets: pods whose
//! network comes up before the API knows them (`isolate_unknown_pods`), denied flows reported
//! by the daemon itself (`log_denied`, nflog), and policies in audit mode.
//!
//! The test's namespace is the node; `cl` (192.168.10.2) is a client on another link and
//! b1..b3 (10.0.i.2, answering with their names on 8080) are "pods" behind the node, whose
//! pod CIDR (its Node's `spec.podCIDRs`) is 10.0.0.0/16.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, admit_namespace, namespace, node, pod};
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::shell::sh_status;
use common::topology::{Topology, failed};
use common::wait::wait_until;
use serde_json::json;

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);

/// The node, its hosts, the API server and the cache directory.
pub(super) struct Lab {
    /// The namespaces and servers.
    pub(super) net: Topology,
    /// The API server.
    pub(super) fake: FakeApiServer,
    /// Holds the daemon's cluster-state cache.
    pub(super) cache: ScratchDir,
}

impl Lab {
    /// The node `edge-1` with pod CIDR 10.0.0.0/16, the namespaces `shop`, `frontend` and
    /// `other`, and the client `cl` as a pod of `frontend` on another node.
    pub(super) fn new() -> Lab {
        let (net, _servers) = client_and_three_backends(Family::V4);
        let fake = FakeApiServer::start();
        fake.apply("nodes", node(kube::NODE, "192.168.10.1", "10.0.0.0/16"));
        for ns in ["shop", "frontend", "other"] {
            fake.apply("namespaces", namespace(ns));
        }
        fake.apply(
            "pods",
            pod(
                "frontend",
                "ui-1",
                "worker-2",
                "192.168.10.2",
                json!({"app": "ui"}),
            ),
        );
        Lab {
            net,
            fake,
            cache: ScratchDir::new("k8s-cache"),
        }
    }

    /// A pod of this node: `b<i>` at 10.0.i.2.
    pub(super) fn local_pod(&self, ns: &str, name: &str, i: u8, app: &str) {
        self.fake.apply(
            "pods",
            pod(
                ns,
                name,
                kube::NODE,
                &format!("10.0.{i}.2"),
                json!({"app": app}),
            ),
        );
    }

    /// The daemon with the NetworkPolicies feed and `keys` in `[kubernetes]`.
    pub(super) fn daemon(&self, tag: &str, keys: &str) -> Daemon {
        let config = format!(
            "{}{keys}\n",
            kube::section(&self.fake, &self.cache, &["network_policies"])
        );
        let d = Daemon::start(tag, &config);
        d.wait_ready();
        d
    }

    /// The answers of 3 connections from `from` to `ip`:8080 (1 s each).
    pub(super) fn web(&self, from: &str, ip: &str) -> std::collections::BTreeMap<String, u32> {
        self.net
            .hits_within(self.net.host(from), "tcp", ip, 8080, 3, 1.0)
    }
}

netns_test! {
    /// b2's network is up before its Pod is in the API: nothing reaches it and it reaches
    /// nothing (the node itself excepted); once its Pod arrives, the policy that selects it
    /// decides at once, and the time it waited is in the histogram.
    fn a_pods_network_first_then_its_object_is_isolated_until_the_object_then_policed() {
        let lab = Lab::new();
        lab.local_pod("shop", "web-1", 1, "web");
        lab.local_pod("other", "probe-1", 3, "probe");
        lab.fake
            .apply("networkpolicies", admit_namespace("shop", "web", "frontend"));
        let d = lab.daemon("k8s-unknown-pods", "isolate_unknown_pods = true");
        wait_until("b1 admitted to cl", STEP, || lab.web("cl", "10.0.1.2").get("b1") == Some(&3));
        // b2 (10.0.2.2) is no known pod's address: dropped both ways.
        assert_eq!(lab.web("cl", "10.0.2.2").get("b2"), None, "nothing reaches an unknown pod");
        assert_eq!(lab.web("b3", "10.0.2.2").get("b2"), None);
        let (t, b2) = (&lab.net, lab.net.host("b2"));
        t.serve(t.host("cl"), "tcp", 9000);
        assert!(failed(&t.connect(b2, "tcp", "192.168.10.2", 9000)), "nor does it send");
        assert_eq!(
            t.connect(t.router(), "tcp", "10.0.2.2", 8080),
            "b2",
            "the node's own traffic (output hook) is exempt"
        );
        let table = sh_status("nft list table inet edgenetd-policy").1;
        assert!(table.contains("ip daddr != @pods.known4"), "{table}");
        assert!(table.contains("10.0.0.0/16"), "the Node's pod CIDR: {table}");
        // b2's Pod arrives (app=web: the policy admits only `frontend`).
        lab.local_pod("shop", "web-2", 2, "web");
        wait_until("b2 admitted to cl", STEP, || lab.web("cl", "10.0.2.2").get("b2") == Some(&3));
        assert_eq!(lab.web("b3", "10.0.2.2").get("b2"), None, "and only to it: the policy");
        assert_eq!(t.connect(b2, "tcp", "192.168.10.2", 9000), "10.0.2.2", "b2 sends now");
        let samples = d
            .metric("edgenetd_kubernetes_pod_enforce_seconds_count", &[])
            .unwrap_or(0.0);
        assert!(samples >= 1.0, "the new pod was timed: {samples}");
        let sum = d.metric("edgenetd_kubernetes_pod_enforce_seconds_sum", &[]).unwrap();
        assert!(sum > 0.0 && sum < STEP.as_secs_f64() * samples, "{sum}");
        // Its Pod goes: its address is unknown again.
        lab.fake.delete("pods", "shop", "web-2");
        wait_until("b2 isolated again", STEP, || !lab.web("cl", "10.0.2.2").contains_key("b2"));
    }
}

netns_test! {
    /// `pod_cidrs` replaces the Node's: an address outside it is never isolated as unknown.
    fn pod_cidrs_narrow_the_isolation_to_the_prefixes_given() {
        let lab = Lab::new();
        let _d = lab.daemon(
            "k8s-pod-cidrs",
            "isolate_unknown_pods = true\npod_cidrs = [\"10.0.2.0/24\"]",
        );
        wait_until("b2 isolated", STEP, || !lab.web("cl", "10.0.2.2").contains_key("b2"));
        assert_eq!(lab.web("cl", "10.0.1.2").get("b1"), Some(&3), "10.0.1.2 is outside");
    }
}

/// The `denied_packets_total` series of `policy` once it stopped moving (SYNs of refused
/// connections are retransmitted for a while after their client gave up).
fn settled(d: &Daemon, policy: &str, direction: &str, mode: &str) -> f64 {
    let mut last = denied(d, policy, direction, mode);
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let now = denied(d, policy, direction, mode);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// The `denied_packets_total` series of a policy in a direction and mode.
fn denied(d: &Daemon, policy: &str, direction: &str, mode: &str) -> f64 {
    d.metric(
        "edgenetd_denied_packets_total",
        &[("policy", policy), ("direction", direction), ("mode", mode)],
    )
    .unwrap_or(0.0)
}

netns_test! {
    /// `log_denied`: b3's connections to the web pod, which a policy admits only from
    /// `frontend`, are reported by the daemon (its log names the policy, the pods and the
    /// 5-tuple; the counter has them) while cl's admitted ones never are.
    fn a_denied_flow_is_logged_and_counted_with_its_policys_name_and_an_allowed_one_is_not() {
        let lab = Lab::new();
        lab.local_pod("shop", "web-1", 1, "web");
        lab.local_pod("other", "probe-1", 3, "probe");
        lab.fake
            .apply("networkpolicies", admit_namespace("shop", "web", "frontend"));
        let d = lab.daemon("k8s-log-denied", "log_denied = true");
        let policy = "k8s:shop/web-from-frontend";
        wait_until("the policy in force", STEP, || !lab.web("b3", "10.0.1.2").contains_key("b1"));
        wait_until("the denied flow counted", STEP, || denied(&d, policy, "ingress", "enforce") >= 1.0);
        let log = d.log();
        let line = log
            .lines()
            .find(|l| l.contains("denied: policy k8s:shop/web-from-frontend ingress tcp 10.0.3.2:"))
            .unwrap_or_else(|| panic!("no denied line in\n{log}"));
        assert!(line.contains("-> 10.0.1.2:8080, pods other/probe-1 -> shop/web-1"), "{line}");
        // Allowed: never reported, neither in the counter nor the log.
        let before = settled(&d, policy, "ingress", "enforce");
        assert_eq!(lab.web("cl", "10.0.1.2").get("b1"), Some(&3));
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(denied(&d, policy, "ingress", "enforce"), before, "allowed packets are not denied ones");
        assert!(!d.log().contains("192.168.10.2:"), "no line names the allowed client:\n{}", d.log());
        let table = sh_status("nft list table inet edgenetd-policy").1;
        assert!(table.contains("log prefix \"pods ingress\" group 7026 drop"), "{table}");
    }
}

netns_test! {
    /// A policy annotated `edgenetd.io/mode: audit` drops nothing: what it would drop
    /// (b3 to the web pod) passes and is counted and logged as an audit; what it allows
    /// (cl) is not reported. Without `log_denied`: an audit always reports.
    fn an_audit_policy_counts_and_logs_what_it_would_drop_without_dropping_it() {
        let lab = Lab::new();
        lab.local_pod("shop", "web-1", 1, "web");
        lab.local_pod("other", "probe-1", 3, "probe");
        let mut audited = admit_namespace("shop", "web", "frontend");
        audited["metadata"]["annotations"] = json!({"edgenetd.io/mode": "audit"});
        lab.fake.apply("networkpolicies", audited);
        let d = lab.daemon("k8s-audit", "");
        let policy = "k8s:shop/web-from-frontend";
        wait_until("the audit chain in force", STEP, || {
            sh_status("nft list table inet edgenetd-policy").1.contains("pods-audit-ingress")
        });
        assert_eq!(lab.web("b3", "10.0.1.2").get("b1"), Some(&3), "an audit policy drops nothing");
        wait_until("the would-be drops counted", STEP, || denied(&d, policy, "ingress", "audit") >= 3.0);
        assert_eq!(denied(&d, policy, "ingress", "enforce"), 0.0);
        let log = d.log();
        assert!(
            log.lines().any(|l| l.contains("audit: would deny policy k8s:shop/web-from-frontend ingress tcp 10.0.3.2:")),
            "{log}"
        );
        let before = settled(&d, policy, "ingress", "audit");
        assert_eq!(lab.web("cl", "10.0.1.2").get("b1"), Some(&3));
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(denied(&d, policy, "ingress", "audit"), before, "what it allows is not reported");
        // The annotation gone (enforce, the default mode): b3 is dropped for real.
        lab.fake
            .apply("networkpolicies", admit_namespace("shop", "web", "frontend"));
        wait_until("enforced", STEP, || !lab.web("b3", "10.0.1.2").contains_key("b1"));
    }
}

/// A ClusterNetworkPolicy of the admin tier over `shop`: ingress from `other` denied, from
/// `shop` accepted; egress to anywhere accepted.
pub(super) fn guard_shop() -> serde_json::Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
        "metadata": {"name": "guard-shop"},
        "spec": {
            "tier": "Admin", "priority": 10,
            "subject": {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
            "ingress": [
                {"name": "no-other", "action": "Deny", "from": [
                    {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}]},
                {"name": "own", "action": "Accept", "from": [
                    {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}}]}
            ],
            "egress": [{"name": "out", "action": "Accept", "to": [
                {"networks": ["0.0.0.0/0"]}]}]
        }
    })
}

netns_test! {
    /// Issue 26's items with ClusterNetworkPolicy tiers: the admin tier's `Deny` is reported
    /// by its name; an audit NetworkPolicy reports neither what the admin tier decided (denied
    /// or accepted) nor what it allows, only what it would drop where the NetworkPolicies
    /// would decide; an unknown address stays unreachable though the sender's admin `Accept`
    /// matches.
    fn with_cluster_network_policies_denials_are_named_audits_follow_the_tiers_and_unknown_pods_stay_dark() {
        let lab = Lab::new();
        lab.local_pod("shop", "web-1", 1, "web");
        lab.local_pod("other", "probe-1", 3, "probe");
        let mut audited = admit_namespace("shop", "web", "frontend");
        audited["metadata"]["annotations"] = json!({"edgenetd.io/mode": "audit"});
        lab.fake.apply("networkpolicies", audited);
        lab.fake.apply("clusternetworkpolicies", guard_shop());
        let d = lab.daemon("k8s-tiers-reports", "isolate_unknown_pods = true\nlog_denied = true");
        let (cnp, np) = ("k8s:guard-shop", "k8s:shop/web-from-frontend");
        wait_until("the admin tier in force", STEP, || !lab.web("b3", "10.0.1.2").contains_key("b1"));
        wait_until("the admin Deny counted", STEP, || denied(&d, cnp, "ingress", "enforce") >= 1.0);
        let log = d.log();
        assert!(
            log.lines().any(|l| l.contains(
                "denied: cluster network policy k8s:guard-shop (admin tier) ingress tcp 10.0.3.2:"
            ) && l.contains("pods other/probe-1 -> shop/web-1")),
            "{log}"
        );
        settled(&d, cnp, "ingress", "enforce");
        assert_eq!(denied(&d, np, "ingress", "audit"), 0.0, "what the admin tier denied is no audit's");
        assert_eq!(lab.web("cl", "10.0.1.2").get("b1"), Some(&3), "the audit policy admits frontend");
        // b2 (10.0.2.2) has no Pod: b1's egress Accept does not reach it.
        assert_eq!(lab.web("b1", "10.0.2.2").get("b2"), None, "an unknown pod stays dark");
        wait_until("the unknown drop counted", STEP, || {
            d.metric(
                "edgenetd_denied_packets_total",
                &[("rule", "isolate_unknown_pods"), ("direction", "ingress")],
            )
            .unwrap_or(0.0)
                >= 1.0
        });
        // b2 known, in `shop`: the admin tier accepts its traffic to b1, which the audit
        // policy (frontend only) would have dropped, had it been asked: no report.
        lab.local_pod("shop", "db-1", 2, "db");
        wait_until("b2 reaches b1", STEP, || lab.web("b2", "10.0.1.2").get("b1") == Some(&3));
        // nflog hands packets over in batches (flushed at least every second).
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(denied(&d, np, "ingress", "audit"), 0.0, "what the admin tier accepted is no audit's");
        // b2 now a pod of `lab`: the admin tier does not decide, the audit policy would drop
        // it (and lets it pass).
        lab.fake.apply("namespaces", namespace("lab"));
        lab.fake.delete("pods", "shop", "db-1");
        lab.local_pod("lab", "db-1", 2, "db");
        wait_until("the would-be drop counted", STEP, || {
            lab.web("b2", "10.0.1.2").get("b1") == Some(&3) && denied(&d, np, "ingress", "audit") >= 1.0
        });
        assert_eq!(denied(&d, np, "ingress", "enforce"), 0.0);
        let table = sh_status("nft list table inet edgenetd-policy").1;
        assert!(table.contains("log prefix \"cnp ingress k8s:guard-shop\" group 7026 drop"), "{table}");
        assert!(table.contains("jump pods-audit-ingress"), "{table}");
    }
}
