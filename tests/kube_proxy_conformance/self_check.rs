//! The harness checked against a ruleset written by hand, without the daemon: each verdict
//! the suite reports (an endpoint with or without masquerade, hairpin, REJECT, DROP, routed
//! on, delivered to the node) is produced on purpose and must be read back as such, so a
//! FAILS elsewhere is the daemon's, not the lab's.

use super::flow::{self, flow};
use super::lab::{EXTERNAL_CLIENT, Lab, NODE_IP, Spec};
use super::report::Report;
use crate::common::shell::sh;
use crate::netns_test;

/// kube-proxy's shape in miniature: DNAT by destination, masquerade by mark, reject, drop.
const RULES: &str = r#"
table ip selfcheck {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        ip daddr 172.30.0.41 tcp dport 80 meta mark set 0x4000 dnat to 10.180.0.1:80
        ip daddr 172.30.0.42 tcp dport 80 dnat to 10.180.2.1:80
        ip daddr 172.30.0.42 udp dport 53 dnat to 10.180.2.1:53
        ip daddr 192.168.0.2 tcp dport 3002 meta mark set 0x4000 dnat to 10.180.2.1:80
    }
    chain out {
        type nat hook output priority -100; policy accept;
        ip daddr 172.30.0.42 tcp dport 80 meta mark set 0x4000 dnat to 10.180.2.1:80
    }
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        meta mark 0x4000 masquerade
    }
    chain filter {
        type filter hook forward priority 0; policy accept;
        ip daddr 172.30.0.43 reject
        ip daddr 172.30.0.44 drop
    }
}
"#;

netns_test! {
    fn harness_self_check() {
        let lab = Lab::new(&Spec::new(&["10.180.0.1", "10.180.0.2"], &["10.180.2.1"]));
        let mut report = Report::new("harness-self-check");
        let file = std::env::temp_dir().join(format!("kpc-selfcheck-{}.nft", std::process::id()));
        std::fs::write(&file, RULES).unwrap();
        sh(&format!("nft -f {}", file.display()));
        let _ = std::fs::remove_file(&file);
        let test = "harness self-check (no daemon)";
        flow::run(&lab, &mut report, test, "hand-written rules", &[
            flow("DNAT with masquerade", "10.180.0.2", "172.30.0.41", 80, "10.180.0.1:80", true),
            flow("hairpin with masquerade", "10.180.0.1", "172.30.0.41", 80, "10.180.0.1:80", true),
            flow("DNAT to the other node, no masquerade", "10.180.0.2", "172.30.0.42", 80, "10.180.2.1:80", false),
            flow("UDP DNAT, no masquerade", "10.180.0.2", "172.30.0.42", 53, "10.180.2.1:53", false).udp(),
            flow("node-originated DNAT with masquerade", NODE_IP, "172.30.0.42", 80, "10.180.2.1:80", true),
            flow("external to a node port with masquerade", EXTERNAL_CLIENT, NODE_IP, 3002, "10.180.2.1:80", true),
            flow("reject", "10.180.0.2", "172.30.0.43", 80, "REJECT", false),
            flow("reject (UDP)", "10.180.0.2", "172.30.0.43", 80, "REJECT", false).udp(),
            flow("drop", "10.180.0.2", "172.30.0.44", 80, "DROP", false),
            flow("drop (UDP)", "10.180.0.2", "172.30.0.44", 80, "DROP", false).udp(),
            flow("no rule: routed on", "10.180.0.2", "172.30.0.45", 80, "FORWARD", false),
            flow("no rule: the node itself", EXTERNAL_CLIENT, NODE_IP, 3001, "", false),
        ]);
        // A hairpin without masquerade is the kernel's martian drop, not a hit.
        sh("nft flush chain ip selfcheck post");
        flow::run(&lab, &mut report, test, "no masquerade", &[
            flow("hairpin without masquerade is lost", "10.180.0.1", "172.30.0.41", 80, "DROP", false),
        ]);
        report.finish(&lab);
    }
}
