//! `edgenetd explain` against the kernel for included rules (`[[policy.include]]`, fw4's
//! `config include`): the machinery of [`super::differential`] over a config whose
//! snippets decide — a table-pre chain reached by a jump (accept by port, drop by source,
//! a port range, falling back to input when nothing matches), chain-pre and chain-post
//! rules of input and forward (by port, by address prefix, IPv4 and IPv6, by interface, a
//! counter rule that decides nothing, reject with a TCP reset). Each case is directed: it
//! names what it proves. One included rule explain does not read (`ip protocol`) makes the
//! verdicts of the packets that reach it uncertain, which the report says.

use crate::common;
use crate::netns_test;

use super::differential::{
    Case, Directed, Prediction, Receivers, against_kernel, first, predict_directed, program,
    receive, topology, warm_up,
};
use common::controller::load;
use common::scratch::ScratchDir;

use edgenetd::explain::{explain, query};

const CONFIG: &str = include_str!("data/include_config.toml");

/// The snippets: (file, text).
const SNIPPETS: [(&str, &str); 5] = [
    (
        "wan_in.nft",
        "chain inc_wan_in {\n\
         \ttcp dport 2222 accept\n\
         \tip saddr 192.0.2.3 tcp dport 7000 drop\n\
         \tudp dport 5000-5010 accept\n\
         }\n",
    ),
    (
        "input_pre.nft",
        "iifname \"veth-wan\" jump inc_wan_in\n\
         tcp dport 8080 counter\n\
         ip saddr 10.0.0.0/29 tcp dport 9000 drop\n\
         ip6 saddr fd00::/64 tcp dport 9000 accept\n",
    ),
    (
        "input_post.nft",
        "tcp dport 9000 accept\n\
         iifname \"veth-lan\" udp dport 53 accept\n\
         ip saddr 10.0.0.0/24 tcp dport 8080 reject with tcp reset\n",
    ),
    (
        "forward_pre.nft",
        "oifname \"veth-wan\" tcp dport 23 reject with tcp reset\n\
         ip daddr 192.0.2.3 udp dport 53 drop\n\
         iifname \"veth-wan\" ip daddr 10.0.0.10 tcp dport 80 accept\n",
    ),
    (
        "forward_post.nft",
        "ip protocol 47 drop\n\
         iifname \"veth-wan\" oifname \"veth-lan\" tcp dport 8200 accept\n",
    ),
];

const ROUTER: &str = "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64,veth-wan=192.0.2.1/24,\
     veth-wan=2001:db8::1/64,veth-wan2=100.64.0.1/24,veth-wan2=100.64.0.7/24";
const ROUTER_ADDRS: [&str; 4] = ["10.0.0.1", "192.0.2.1", "fd00::1", "2001:db8::1"];
const LAN: [&str; 4] = ["10.0.0.2", "10.0.0.10", "10.0.0.11", "fd00::2"];
const WAN: [&str; 3] = ["192.0.2.2", "192.0.2.3", "2001:db8::2"];

/// What each case proves, and the verdict explain must give it.
const CASES: [Directed<&str>; 18] = [
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "192.0.2.1",
        2222,
        "the jumped-to table-pre chain accepts by port",
        "accept",
    ),
    (
        "wan",
        "tcp",
        "192.0.2.3",
        "192.0.2.1",
        7000,
        "the jumped-to chain drops by source",
        "drop",
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "192.0.2.1",
        7000,
        "the jumped-to chain falls back to input: its default",
        "drop",
    ),
    (
        "wan",
        "udp",
        "192.0.2.2",
        "192.0.2.1",
        5005,
        "a port range in the jumped-to chain",
        "accept",
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "10.0.0.1",
        9000,
        "a chain-pre drop by an IPv4 prefix",
        "drop",
    ),
    (
        "lan",
        "tcp",
        "10.0.0.10",
        "10.0.0.1",
        9000,
        "outside the prefix: the chain-post accept",
        "accept",
    ),
    (
        "lan",
        "tcp",
        "fd00::2",
        "fd00::1",
        9000,
        "a chain-pre accept by an IPv6 prefix",
        "accept",
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "10.0.0.1",
        8080,
        "a counter rule decides nothing; a chain-post reject",
        "reject",
    ),
    (
        "lan",
        "udp",
        "10.0.0.2",
        "10.0.0.1",
        53,
        "a chain-post accept by interface",
        "accept",
    ),
    (
        "wan",
        "udp",
        "192.0.2.2",
        "192.0.2.1",
        53,
        "not that interface: input's default",
        "drop",
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "10.0.0.1",
        22,
        "no included rule matches: input's default",
        "drop",
    ),
    (
        "lan",
        "tcp",
        "10.0.0.2",
        "192.0.2.2",
        23,
        "a forward chain-pre reject by interface and port",
        "reject",
    ),
    (
        "lan",
        "udp",
        "10.0.0.2",
        "192.0.2.3",
        53,
        "a forward chain-pre drop by destination",
        "drop",
    ),
    (
        "lan",
        "udp",
        "10.0.0.2",
        "192.0.2.2",
        53,
        "past the includes: edgenetd's forward accept",
        "accept",
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "10.0.0.10",
        80,
        "a forward chain-pre accept by interface, address and port",
        "accept",
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "10.0.0.2",
        80,
        "a chain-post rule that does not match: forward's default",
        "drop",
    ),
    (
        "wan",
        "tcp",
        "192.0.2.2",
        "10.0.0.2",
        8200,
        "a forward chain-post accept",
        "accept",
    ),
    (
        "wan",
        "tcp",
        "2001:db8::2",
        "fd00::2",
        8200,
        "the same chain-post accept over IPv6",
        "accept",
    ),
];

/// The config, its includes at `dir`.
fn config(dir: &ScratchDir) -> String {
    for (file, text) in SNIPPETS {
        dir.write(file, text);
    }
    CONFIG.replace("{dir}", &dir.path().display().to_string())
}

/// What explain reports as uncertain for case `c`.
fn uncertain(desired: &edgenetd::config::DesiredState, c: &Case) -> Vec<String> {
    let args: Vec<String> = [
        "--in",
        c.iif,
        "--from",
        c.src,
        "--to",
        c.dst,
        "--proto",
        c.proto,
        "--dport",
        &c.dport.to_string(),
        "--sport",
        &first(c).to_string(),
        "--addresses",
        ROUTER,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let q = query::parse(&args, "unused").unwrap();
    explain(desired, &q).unwrap().uncertain
}

netns_test! {
    fn explain_agrees_with_the_kernel_on_included_rules() {
        let t = topology();
        warm_up(&t);
        let dir = ScratchDir::new("explain-includes");
        let desired = load(&config(&dir));
        program(&desired);
        let receivers = Receivers(vec![
            receive(&t, t.router(), &ROUTER_ADDRS),
            receive(&t, t.host("lan"), &LAN),
            receive(&t, t.host("wan"), &WAN),
        ]);
        let proves = |accepted: &&str, p: &Prediction| p.verdict == *accepted;
        let (cases, predictions) = predict_directed(&desired, ROUTER, &CASES, proves);
        // The rule explain cannot read is named where a packet meets it, and only there.
        let met = &cases[15];
        let said = uncertain(&desired, met);
        assert!(
            said.len() == 1 && said[0].contains("ip protocol gre drop") && said[0].contains("forward"),
            "{said:?}"
        );
        assert!(uncertain(&desired, &cases[11]).is_empty(), "decided before it");
        assert!(uncertain(&desired, &cases[0]).is_empty(), "in another chain");

        let at_least = CASES.len() / 2;
        against_kernel("includes", &t, &desired, ROUTER, receivers, &cases, &predictions, at_least);
    }
}
