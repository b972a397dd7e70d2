//! `[policy] log_drops` with the real daemon and real packets: what a dropping rule or a
//! dropping default drops is reported by the daemon itself (nflog): a log line naming the
//! rule and the zones, and `edgenetd_denied_packets_total{rule,direction}`; what is accepted
//! never is.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::service_lab::{Family, client_and_three_backends};
use common::topology::failed;
use common::wait::wait_until;

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);

netns_test! {
    /// `[policy] log_drops`: a dropping rule and the forward default report what they drop,
    /// by the rule's name and the zones; an accepting rule reports nothing.
    fn policy_log_drops_reports_a_rules_drops_and_the_defaults_by_name() {
        let (t, _servers) = client_and_three_backends(Family::V4);
        let config = r#"
[policy]
input = "accept"
forward = "drop"
log_drops = true

[policy.zone.lan]
interfaces = ["c0"]

[policy.zone.dmz]
interfaces = ["b1", "b2", "b3"]

[[policy.rule]]
name = "no-b2"
from = "lan"
to = "dmz"
to_addresses = ["10.0.2.2"]
action = "drop"

[[policy.rule]]
name = "lan-to-b1"
from = "lan"
to = "dmz"
to_addresses = ["10.0.1.2"]
action = "accept"
"#;
        let d = Daemon::start("policy-log-drops", config);
        d.wait_ready();
        let cl = t.host("cl");
        let rule = |name: &str| {
            d.metric("edgenetd_denied_packets_total", &[("rule", name), ("direction", "forward")])
                .unwrap_or(0.0)
        };
        assert_eq!(t.hits_within(cl, "tcp", "10.0.1.2", 8080, 3, 1.0).get("b1"), Some(&3));
        assert!(failed(&t.connect(cl, "tcp", "10.0.2.2", 8080)));
        assert!(failed(&t.connect(cl, "tcp", "10.0.3.2", 8080)));
        wait_until("the rule's drops counted", STEP, || rule("no-b2") >= 1.0);
        wait_until("the default's drops counted", STEP, || rule("default") >= 1.0);
        let log = d.log();
        assert!(
            log.lines().any(|l| l.contains("denied: rule no-b2 (forward) tcp 192.168.10.2:")
                && l.contains("-> 10.0.2.2:8080, zones lan -> dmz")),
            "{log}"
        );
        assert!(log.contains("denied: forward default tcp 192.168.10.2:"), "{log}");
        assert!(!log.contains("-> 10.0.1.2:8080"), "the accepted flow is not reported:\n{log}");
        assert_eq!(rule("lan-to-b1"), 0.0);
    }
}
