//! `edgenetd explain` against the kernel for NAT (issue 23): the machinery of
//! [`super::differential`] (receivers that answer with the address, port and source a
//! packet arrives with; probers; the kernel's trace) over a config of source NAT
//! (`[[policy.nat]]` accept / snat / masquerade, `masq_src`, `masq_dest`), port forwards
//! (reflection internal and external, `to_addresses`, no destination port) and redirects
//! to the router (`to = "self:PORT"`, with and without `port`). Each case is directed: it
//! names what it proves.

use crate::common;
use crate::netns_test;

use super::differential::{
    Directed, Prediction, Receivers, against_kernel, predict_directed, program, receive, topology,
    warm_up,
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

/// What a case must do: arrive at an address and port with a source address; `None`:
/// be refused.
type Arrival = Option<(&'static str, u16, &'static str)>;

const CASES: [Directed<Arrival>; 23] = [
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

/// The expectation `e` holds for `p`: a refusal, or the arrival it names.
fn expected(e: &Arrival, p: &Prediction) -> bool {
    match *e {
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
        let (cases, predictions) = predict_directed(&desired, ROUTER, &CASES, expected);
        let at_least = CASES.len() / 2;
        against_kernel("nat", &t, &desired, ROUTER, receivers, &cases, &predictions, at_least);
    }
}
