//! `edgenetd explain` against the kernel for NAT (issue 23): the machinery of
//! [`super::differential`] (receivers that answer with the address, port and source a
//! packet arrives with; probers; the kernel's trace) over a config of source NAT
//! (`[[policy.nat]]` accept / snat / masquerade, `masq_src`, `masq_dest`), port forwards
//! (reflection internal and external, `to_addresses`, no destination port) and redirects
//! to the router (`to = "self:PORT"`, with and without `port`). Each case is directed: it
//! names what it proves.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;

use super::differential::{
    Case, Prediction, Receivers, Tracer, agrees, directed, first, outcome_disagreements,
    predict_with, probe, program, receive, rule_disagreements, topology, warm_up,
};
use common::controller::load;

const CONFIG: &str = include_str!("data/nat_config.toml");

/// The router's addresses: the differential topology's, and a second wan address (the
/// `snat` entry's and the external reflection's).
const ROUTER: &str = "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64,veth-wan=192.0.2.1/24,\
     veth-wan=192.0.2.9/24,veth-wan=2001:db8::1/64,veth-wan2=100.64.0.1/24,\
     veth-wan2=100.64.0.7/24";
const ROUTER_ADDRS: [&str; 5] = [
    "10.0.0.1",
    "192.0.2.1",
    "192.0.2.9",
    "fd00::1",
    "2001:db8::1",
];
const LAN: [&str; 4] = ["10.0.0.2", "10.0.0.10", "10.0.0.11", "fd00::2"];
const WAN: [&str; 3] = ["192.0.2.2", "192.0.2.3", "2001:db8::2"];

/// (sender, proto, source, destination, port, what it proves, the address and port it
/// must arrive at and the source it must arrive with; `None`: refused).
type Directed = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u16,
    &'static str,
    Option<(&'static str, u16, &'static str)>,
);

const CASES: [Directed; 23] = [
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.2",
        80,
        "zone masquerade",
        Some(("192.0.2.2", 80, "192.0.2.1")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.10",
        "192.0.2.2",
        80,
        "masq_src leaves the host out",
        Some(("192.0.2.2", 80, "10.0.0.10")),
    ),
    (
        "lan",
        "udp",
        "10.0.0.10",
        "192.0.2.2",
        10000,
        "a masquerade entry before the zone's",
        Some(("192.0.2.2", 10000, "192.0.2.1")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.3",
        80,
        "masq_dest leaves the destination out",
        Some(("192.0.2.3", 80, "10.0.0.2")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.2",
        9000,
        "an accept entry: no source NAT",
        Some(("192.0.2.2", 9000, "10.0.0.2")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.2",
        22,
        "the accept entry's other ports masquerade",
        Some(("192.0.2.2", 22, "192.0.2.1")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.11",
        "192.0.2.2",
        80,
        "an snat entry",
        Some(("192.0.2.2", 80, "192.0.2.9")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.1",
        8080,
        "reflection, internal source",
        Some(("10.0.0.10", 80, "10.0.0.1")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.9",
        8080,
        "reflection of any wan address",
        Some(("10.0.0.10", 80, "10.0.0.1")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.9",
        8050,
        "reflection, external source from to_addresses",
        Some(("10.0.0.11", 80, "192.0.2.9")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.1",
        8050,
        "to_addresses: not that address",
        None,
    ),
    (
        "lan",
        "tcp",
        "10.0.0.10",
        "192.0.2.1",
        8200,
        "reflection of a forward without a port",
        Some(("10.0.0.2", 8200, "10.0.0.1")),
    ),
    (
        "lan",
        "udp",
        "10.0.0.2",
        "192.0.2.2",
        53,
        "a redirect to the router's port",
        Some(("10.0.0.1", 5353, "10.0.0.2")),
    ),
    (
        "lan",
        "udp",
        "10.0.0.10",
        "198.51.100.10",
        53,
        "a redirect of any destination",
        Some(("10.0.0.1", 5353, "10.0.0.10")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "198.51.100.80",
        22,
        "a redirect of every port, to_addresses",
        Some(("10.0.0.1", 7000, "10.0.0.2")),
    ),
    (
        "lan",
        "tcp",
        "10.0.0.11",
        "198.51.100.80",
        9000,
        "a redirect of every port, another",
        Some(("10.0.0.1", 7000, "10.0.0.11")),
    ),
    (
        "lan",
        "tcp",
        "fd00::2",
        "2001:db8::2",
        80,
        "IPv6 is not masqueraded",
        Some(("2001:db8::2", 80, "fd00::2")),
    ),
    (
        "lan",
        "udp",
        "fd00::2",
        "2001:db8::2",
        53,
        "an IPv6 redirect, to the incoming interface's address",
        Some(("fd00::1", 5353, "fd00::2")),
    ),
    (
        "lan",
        "tcp",
        "fd00::2",
        "2001:db8::2",
        9000,
        "the redirect of every port takes only its to_addresses",
        Some(("2001:db8::2", 9000, "fd00::2")),
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "192.0.2.9",
        8080,
        "a port forward from the wan",
        Some(("10.0.0.10", 80, "192.0.2.2")),
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "192.0.2.9",
        8050,
        "a port forward to its to_addresses",
        Some(("10.0.0.11", 80, "192.0.2.2")),
    ),
    (
        "wan",
        "tcp",
        "192.0.2.3",
        "192.0.2.1",
        8200,
        "a port forward without a port",
        Some(("10.0.0.2", 8200, "192.0.2.3")),
    ),
    (
        "wan",
        "udp",
        "192.0.2.2",
        "192.0.2.1",
        53,
        "no redirect from the wan",
        None,
    ),
];

/// The expectation of case `d` holds for `p`: a refusal, or the arrival it names.
fn expected(d: &Directed, p: &Prediction) -> bool {
    match d.6 {
        None => p.verdict != "accept",
        Some((to, port, from)) => p.arrival.as_ref().is_some_and(|(at, src)| {
            at.iter().any(|(a, pt)| a.to_string() == to && *pt == port) && src.to_string() == from
        }),
    }
}

netns_test! {
    fn explain_agrees_with_the_kernel_on_nat_port_forwards_and_redirects() {
        let t = topology();
        t.router().sh("ip addr add 192.0.2.9/24 dev veth-wan");
        warm_up(&t);
        let desired = load(CONFIG);
        program(&desired);
        let receivers = Receivers(vec![
            receive(&t, t.router(), &ROUTER_ADDRS),
            receive(&t, t.host("lan"), &LAN),
            receive(&t, t.host("wan"), &WAN),
        ]);
        let mut cases: Vec<Case> = Vec::new();
        let plain: Vec<_> = CASES.iter().map(|d| (d.0, d.1, d.2, d.3, d.4)).collect();
        directed(&mut cases, &plain);
        let predictions: Vec<Prediction> = cases
            .iter()
            .map(|c| predict_with(&desired, c, first(c), ROUTER))
            .collect();
        // What explain says is what each case was written to prove (else the test proves
        // less than its names claim, whatever the kernel does).
        let wrong: Vec<String> = CASES
            .iter()
            .zip(&predictions)
            .filter(|(d, p)| !expected(d, p))
            .map(|(d, p)| format!("{}: explain says {p:?}", d.5))
            .collect();
        assert!(wrong.is_empty(), "explain predicts otherwise:\n{}", wrong.join("\n"));

        let tracer = Tracer::start(&t);
        let mut observed = BTreeMap::new();
        for sender in ["lan", "wan"] {
            let mine: Vec<&Case> = cases.iter().filter(|c| c.sender == sender).collect();
            observed.extend(probe(&t, t.host(sender), &mine, first, 1.5));
        }
        let rules = rule_disagreements(&cases, &predictions, &tracer.decisions(), CASES.len() / 2);
        assert!(rules.is_empty(), "explain and the kernel's trace name different rules:\n{}", rules.join("\n"));
        let agreed = cases
            .iter()
            .filter(|c| {
                let (o, a) = &observed[&c.id];
                agrees(&predictions[c.id], o, a)
            })
            .count();
        eprintln!("explain nat differential: {agreed} of {} cases agreed at once", cases.len());
        let fates = outcome_disagreements(&t, &desired, ROUTER, &cases, &predictions, &observed);
        drop(receivers);
        assert!(
            fates.is_empty(),
            "explain and the kernel disagree on {} of {} cases:\n{}",
            fates.len(),
            cases.len(),
            fates.join("\n")
        );
    }
}
