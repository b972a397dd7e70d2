//! Upstream's `TestNodePorts`: a NodePort Service under the `--nodeport-addresses` settings,
//! IPv4 and IPv6; edgenetd's `[kubernetes] node_port_addresses` (default `["primary"]`).

use super::flow::{self, Flow, flow};
use super::lab::{
    EXTERNAL_CLIENT, EXTERNAL_CLIENT6, Key, Lab, NODE_IP, NODE_IP_ALT, NODE_IP6, NODE_IP6_ALT,
    Spec, UPSTREAM_KEYS,
};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

const NODE_PORT_ADDRESSES: &[Key] = &[Key::NodePortAddresses];

/// One upstream subcase.
struct Case {
    name: &'static str,
    v6: bool,
    node_port_addresses: Option<&'static str>,
    allow_alt_node_ip: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "ipv4",
        v6: false,
        node_port_addresses: None,
        allow_alt_node_ip: false,
    },
    Case {
        name: "ipv4, multiple nodeport-addresses",
        v6: false,
        node_port_addresses: Some(r#"["192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64"]"#),
        allow_alt_node_ip: true,
    },
    Case {
        name: "ipv6",
        v6: true,
        node_port_addresses: None,
        allow_alt_node_ip: false,
    },
    Case {
        name: "ipv6, multiple nodeport-addresses",
        v6: true,
        node_port_addresses: Some(
            r#"["192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64", "2001:db8:1::2/128"]"#,
        ),
        allow_alt_node_ip: true,
    },
];

fn rows(c: &Case) -> Vec<Flow> {
    let (pod, ext, node, alt, output) = if c.v6 {
        (
            "fd00:10::2",
            EXTERNAL_CLIENT6,
            NODE_IP6,
            NODE_IP6_ALT,
            "[fd00:10:180::1]:80, [fd00:10:180::2:1]:80",
        )
    } else {
        (
            "10.0.0.2",
            EXTERNAL_CLIENT,
            NODE_IP,
            NODE_IP_ALT,
            "10.180.0.1:80, 10.180.2.1:80",
        )
    };
    let svc = if c.v6 {
        "fd00:172:30::41"
    } else {
        "172.30.0.41"
    };
    let mut rows = vec![
        flow("pod to cluster IP", pod, svc, 80, output, false),
        flow("external to nodePort", ext, node, 3001, output, true),
        flow("node to nodePort", node, node, 3001, output, true),
    ];
    if c.allow_alt_node_ip {
        rows.push(
            flow(
                "external to nodePort on secondary IP",
                ext,
                alt,
                3001,
                output,
                true,
            )
            .needs(NODE_PORT_ADDRESSES),
        );
    } else {
        rows.push(flow(
            "secondary nodeIP ignores NodePorts",
            ext,
            alt,
            3001,
            "",
            false,
        ));
    }
    rows
}

netns_test! {
    fn test_node_ports() {
        let mut lab = Lab::new(&Spec {
            pods: vec![vec!["10.0.0.2", "fd00:10::2"], vec!["10.180.2.1", "fd00:10:180::2:1"]],
            remote: vec!["10.180.0.1", "fd00:10:180::1"],
        });
        let mut report = Report::new("TestNodePorts");
        for c in CASES {
            let (svc, ep1, ep2) = if c.v6 {
                ("fd00:172:30::41", "fd00:10:180::1", "fd00:10:180::2:1")
            } else {
                ("172.30.0.41", "10.180.0.1", "10.180.2.1")
            };
            lab.apply("services", Svc::new("ns1", "svc1", "NodePort", &[svc]).port("p80", "TCP", 80, 80, 3001).json());
            lab.apply("endpointslices", slice("ns1", "svc1", 1, &[Ep::new(ep1), Ep::local(ep2)], &[("p80", "TCP", 80)]));
            let mut keys = UPSTREAM_KEYS.to_vec();
            if let Some(a) = c.node_port_addresses {
                keys.push((Key::NodePortAddresses, a));
            }
            lab.start(&keys);
            report.note_start(&lab);
            // Upstream's subtests are "TestNodePorts/<case>/<row>".
            let test = format!("TestNodePorts/{}", c.name);
            flow::run(&lab, &mut report, &test, c.name, &rows(c));
        }
        report.finish(&lab);
    }
}
