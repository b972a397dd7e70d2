//! What the translations need to know about this machine: its host name (the default Node
//! name) and the subnets it is directly connected to (a pod route's gateway must be on one).
//!
//! "Directly connected" is read from the main routing table the way the kernel resolves a
//! gateway: the routes without a gateway (the prefix routes of the interfaces' addresses and
//! any other on-link route), from `/proc/thread-self/net`, which shows this thread's network
//! namespace. Default routes and loopback are not subnets anyone is connected to.
//!
//! The interfaces' own addresses (where `node_port_addresses = ["all"]` or prefixes serve
//! NodePorts) come from the kernel's local routing table (`fib_trie`, IPv4) and `if_inet6`
//! (IPv6, global scope only), loopback and link-local left out: kube-proxy's nftables mode
//! never serves NodePorts on loopback either.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// This node's name: `[kubernetes] node_name` when set, else the host name (the daemon and
/// `explain` take it alike, so explain reads the keys the daemon kept for this node).
pub fn node_name(configured: Option<&str>) -> Result<String, &'static str> {
    match configured {
        Some(name) => Ok(name.to_string()),
        None => host_name().ok_or("node_name is not set and the host name cannot be read"),
    }
}

/// The host name (`[kubernetes] node_name` absent = this), lowercased as Node names are.
pub fn host_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = text.trim().to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// The directly connected subnets of this thread's network namespace, sorted.
pub fn connected_subnets() -> std::io::Result<Vec<IpNet>> {
    let v4 = std::fs::read_to_string("/proc/thread-self/net/route")?;
    // A kernel without IPv6 has no ipv6_route: no IPv6 subnets, not an error.
    let v6 = std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default();
    let mut out: Vec<IpNet> = parse_v4(&v4).chain(parse_v6(&v6)).collect();
    crate::kubernetes::order::sort(&mut out);
    out.dedup();
    Ok(out)
}

/// This thread's network namespace's interface addresses (not loopback, not link-local),
/// sorted, each once.
pub fn interface_addresses() -> std::io::Result<Vec<IpAddr>> {
    let v4 = std::fs::read_to_string("/proc/thread-self/net/fib_trie")?;
    let v6 = std::fs::read_to_string("/proc/thread-self/net/if_inet6").unwrap_or_default();
    let mut out: Vec<IpAddr> = local_v4(&v4).chain(local_v6(&v6)).collect();
    crate::kubernetes::order::sort(&mut out);
    out.dedup();
    Ok(out)
}

/// `/proc/net/fib_trie`: a leaf line `|-- ADDR` followed by `/32 host LOCAL` is an address of
/// this host.
fn local_v4(text: &str) -> impl Iterator<Item = IpAddr> + '_ {
    let mut leaf: Option<Ipv4Addr> = None;
    text.lines().filter_map(move |line| {
        let line = line.trim_start_matches([' ', '|', '+', '-']);
        if let Ok(addr) = line.trim().parse::<Ipv4Addr>() {
            leaf = Some(addr);
            return None;
        }
        let local = line.trim().starts_with("/32 host LOCAL");
        let addr = leaf.filter(|a| local && !a.is_loopback() && !a.is_link_local())?;
        Some(IpAddr::V4(addr))
    })
}

/// `/proc/net/if_inet6`: `address ifindex prefixlen scope flags name`; global scope only.
fn local_v6(text: &str) -> impl Iterator<Item = IpAddr> + '_ {
    text.lines().filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let addr = Ipv6Addr::from(u128::from_str_radix(f.first()?, 16).ok()?);
        let scope = u8::from_str_radix(f.get(3)?, 16).ok()?;
        (scope == 0 && !addr.is_loopback()).then_some(IpAddr::V6(addr))
    })
}

/// `/proc/net/route`: `Iface Destination Gateway Flags RefCnt Use Metric Mask ...`, the
/// addresses in hex, in the host's byte order.
fn parse_v4(text: &str) -> impl Iterator<Item = IpNet> + '_ {
    text.lines().skip(1).filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| u32::from_str_radix(f.get(i)?, 16).ok();
        let (iface, dest, gateway, mask) = (*f.first()?, hex(1)?, hex(2)?, hex(7)?);
        // The kernel prints the address's bytes as one native-endian word.
        let dest = Ipv4Addr::from(dest.to_ne_bytes());
        let prefix = u32::from(Ipv4Addr::from(mask.to_ne_bytes())).leading_ones();
        let connected = iface != "lo" && gateway == 0 && prefix > 0;
        connected
            .then(|| IpNet::new(IpAddr::V4(dest), prefix as u8).ok())
            .flatten()
    })
}

/// `/proc/net/ipv6_route`: `dest plen src splen nexthop metric refcnt use flags iface`.
fn parse_v6(text: &str) -> impl Iterator<Item = IpNet> + '_ {
    text.lines().filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let dest = u128::from_str_radix(f.first()?, 16).ok()?;
        let prefix = u8::from_str_radix(f.get(1)?, 16).ok()?;
        let gateway = u128::from_str_radix(f.get(4)?, 16).ok()?;
        let iface = *f.get(9)?;
        let connected = iface != "lo" && gateway == 0 && prefix > 0;
        connected
            .then(|| IpNet::new(IpAddr::V6(Ipv6Addr::from(dest)), prefix).ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_subnets_are_the_gatewayless_routes() {
        // 192.168.1.0/24 on eth0, a default via 192.168.1.1, 10.9.0.0/16 via a gateway.
        let v4 = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
            eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
            eth0\t0000090A\t0101A8C0\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let got: Vec<IpNet> = parse_v4(v4).collect();
        assert_eq!(got, ["192.168.1.0/24".parse::<IpNet>().unwrap()]);
        let v6 = "fd000001000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000001000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n\
            00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000001 00000000 00000001       lo\n";
        let got: Vec<IpNet> = parse_v6(v6).collect();
        assert_eq!(got, ["fd00:1::/64".parse::<IpNet>().unwrap()]);
    }

    #[test]
    fn interface_addresses_are_the_local_table_and_global_ipv6_without_loopback() {
        let v4 = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n\
            Local:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 127.0.0.1\n        /32 host LOCAL\n\
            |-- 192.168.1.1\n        /32 host LOCAL\n     |-- 192.168.1.255\n        /32 link BROADCAST\n\
            |-- 192.168.1.0\n        /24 link UNICAST\n     |-- 10.0.0.5\n        /32 host LOCAL\n";
        let got: Vec<IpAddr> = local_v4(v4).collect();
        let want: Vec<IpAddr> = ["192.168.1.1", "10.0.0.5"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        let v6 = "00000000000000000000000000000001 01 80 10 80       lo\n\
            fe800000000000000000000000000001 02 40 20 80     eth0\n\
            20010db8000000000000000000000001 02 40 00 80     eth0\n";
        let got: Vec<IpAddr> = local_v6(v6).collect();
        assert_eq!(got, ["2001:db8::1".parse::<IpAddr>().unwrap()]);
    }
}
