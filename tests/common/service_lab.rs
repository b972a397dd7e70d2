//! The service tests' topology: a client and three backends around the router (the test's
//! namespace), each joined to it by a veth pair.

use super::topology::{Link, ServerId, Topology};

/// Which address families the hosts get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only.
    V4,
    /// IPv4 and IPv6.
    Dual,
}

/// Client `cl` at 192.168.10.2 (and fd10::2) behind the router's `c0` (192.168.10.1,
/// fd10::1), and backends b1..b3 at 10.0.i.2 (and fd0i::2) behind the router's `bi`, each
/// answering with its name on port 8080; forwarding on. Returns the topology and the
/// backends' servers, b1 first, once every link is up.
pub fn client_and_three_backends(family: Family) -> (Topology, Vec<ServerId>) {
    let mut net = Topology::new();
    net.forwarding();
    add_host(&mut net, "cl", "c0", ("192.168.10", "fd10"), family);
    let servers = (1..=3)
        .map(|i| {
            let name = format!("b{i}");
            add_host(
                &mut net,
                &name,
                &name,
                (&format!("10.0.{i}"), &format!("fd0{i}")),
                family,
            );
            net.serve_named(net.host(&name), &name, 8080)
        })
        .collect();
    // Until a veth has carrier its queue drops what is sent: a test's first IPv6 connection
    // lost its neighbour solicitations and timed out on a loaded machine.
    super::links::wait_until_up(&["c0", "b1", "b2", "b3"]);
    (net, servers)
}

/// Adds host `role` on the router's `router_if`: the router is .1 (::1) and the host .2
/// (::2) of the /24 (/64) `prefixes`, the host's default routes via the router.
fn add_host(
    net: &mut Topology,
    role: &str,
    router_if: &str,
    prefixes: (&str, &str),
    family: Family,
) {
    let (v4, v6) = prefixes;
    let mut router = vec![format!("{v4}.1/24")];
    let mut host = vec![format!("{v4}.2/24")];
    let mut routes = vec![format!("default via {v4}.1")];
    if family == Family::Dual {
        router.push(format!("{v6}::1/64"));
        host.push(format!("{v6}::2/64"));
        routes.push(format!("default via {v6}::1"));
    }
    net.add_host(
        role,
        Link {
            router_if,
            router_addrs: &strs(&router),
            host_if: "eth0",
            host_addrs: &strs(&host),
            host_routes: &strs(&routes),
        },
    );
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
