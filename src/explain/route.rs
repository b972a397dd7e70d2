//! The routing decision between prerouting and input/forward, from `[[route]]`,
//! `[[route_rule]]` and `[[track]]`: the rules by priority (the kernel's own three — local,
//! main, default — included), the first whose selectors match picks a table, the longest
//! prefix (then the lowest metric) in that table wins; `throw` goes on with the next rule.
//!
//! The router's own addresses are not in the config: they come from the kernel or `--addresses` (each
//! `IFACE=ADDR/LEN` is a local address and a connected route to its prefix on IFACE).
//! Tracked routes are taken as up.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::route::{RouteKind, RouteRule, RoutingConfig, RuleFamily, TABLE_MAIN};

use super::values::Locality;

/// The local table's id.
const TABLE_LOCAL: u32 = 255;
/// The default table's id.
const TABLE_DEFAULT: u32 = 253;

/// The router's addresses by interface (`--addresses`).
#[derive(Debug, Clone, Default)]
pub struct Addresses {
    /// (interface, address with its prefix length).
    pub entries: Vec<(String, IpNet)>,
}

impl Locality for Addresses {
    fn is_local(&self, addr: IpAddr) -> bool {
        addr.is_loopback() || self.entries.iter().any(|(_, n)| n.addr() == addr)
    }
}

impl Addresses {
    /// The address masquerade uses leaving through `dev` for the family of `like`.
    pub fn on(&self, dev: &str, like: IpAddr) -> Option<IpAddr> {
        self.entries
            .iter()
            .find(|(i, n)| i == dev && n.addr().is_ipv4() == like.is_ipv4())
            .map(|(_, n)| n.addr())
    }

    /// The connected route's device for `addr`.
    fn connected(&self, addr: IpAddr) -> Option<(IpNet, &str)> {
        self.entries
            .iter()
            .filter(|(_, n)| n.trunc().contains(&addr))
            .max_by_key(|(_, n)| n.prefix_len())
            .map(|(i, n)| (n.trunc(), i.as_str()))
    }
}

/// The route a packet takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The table it is in.
    pub table: u32,
    /// The rule that picked the table, as the operator would recognise it.
    pub rule: String,
    /// The route's destination prefix.
    pub to: IpNet,
    /// Its type.
    pub kind: RouteKind,
    /// Gateway (the first next hop's for multipath).
    pub via: Option<IpAddr>,
    /// Output device, when known.
    pub dev: Option<String>,
    /// Every next hop of a multipath route: (via, dev, weight).
    pub nexthops: Vec<(Option<IpAddr>, Option<String>, u16)>,
}

/// Where routing sends a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// To the router itself (the local table).
    Local,
    /// Forwarded by this route (or dropped by a blackhole/unreachable/prohibit one).
    Route(Chosen),
    /// No table has a route.
    NoRoute,
}

/// One rule of the routing policy database.
struct Selector {
    priority: u32,
    rule: Option<RouteRule>,
    fwmark: Option<(u32, Option<u32>)>,
    table: u32,
    label: String,
}

fn selectors(cfg: &RoutingConfig) -> Vec<Selector> {
    let plain = |priority, table, label: &str| Selector {
        priority,
        rule: None,
        fwmark: None,
        table,
        label: label.to_string(),
    };
    let mut out = vec![
        plain(0, TABLE_LOCAL, "local"),
        plain(32766, TABLE_MAIN, "main"),
        plain(32767, TABLE_DEFAULT, "default"),
    ];
    for r in &cfg.rules {
        out.push(Selector {
            priority: r.priority,
            rule: Some(r.clone()),
            fwmark: r.fwmark,
            table: r.table,
            label: format!("route_rule priority {}", r.priority),
        });
    }
    for t in &cfg.tracks {
        out.push(Selector {
            priority: t.priority,
            rule: None,
            fwmark: Some((t.fwmark, None)),
            table: t.table,
            label: format!("track {} (priority {})", t.name, t.priority),
        });
    }
    out.sort_by_key(|s| s.priority);
    out
}

fn selects(s: &Selector, saddr: IpAddr, daddr: IpAddr, iif: &str, mark: u32) -> bool {
    if let Some((value, mask)) = s.fwmark {
        let mask = mask.unwrap_or(u32::MAX);
        if mark & mask != value & mask {
            return false;
        }
    }
    let Some(r) = &s.rule else {
        return true;
    };
    let family = match r.family {
        RuleFamily::Ipv4 => saddr.is_ipv4(),
        RuleFamily::Ipv6 => saddr.is_ipv6(),
        RuleFamily::Both => true,
    };
    family
        && r.from.is_none_or(|n| n.contains(&saddr))
        && r.to.is_none_or(|n| n.contains(&daddr))
        && r.iif.as_deref().is_none_or(|i| i == iif)
        // An `oif` rule selects only what the router itself sends.
        && r.oif.is_none()
}

/// The routing decision for a packet from `saddr` to `daddr` that came in on `iif`.
pub fn decide(
    cfg: &RoutingConfig,
    addrs: &Addresses,
    saddr: IpAddr,
    daddr: IpAddr,
    iif: &str,
    mark: u32,
) -> Decision {
    for s in selectors(cfg) {
        if !selects(&s, saddr, daddr, iif, mark) {
            continue;
        }
        if s.table == TABLE_LOCAL {
            if addrs.is_local(daddr) {
                return Decision::Local;
            }
            continue;
        }
        match lookup(cfg, addrs, s.table, daddr) {
            Some(mut chosen) if chosen.kind != RouteKind::Throw => {
                chosen.rule = s.label;
                return Decision::Route(chosen);
            }
            _ => continue,
        }
    }
    Decision::NoRoute
}

/// The longest-prefix match for `daddr` in `table` (connected routes are in main).
fn lookup(cfg: &RoutingConfig, addrs: &Addresses, table: u32, daddr: IpAddr) -> Option<Chosen> {
    let configured = cfg
        .routes
        .iter()
        .filter(|r| r.table == table && r.to.contains(&daddr))
        .map(|r| {
            let nexthops: Vec<_> = r
                .nexthops
                .iter()
                .map(|h| (h.via, h.dev.clone(), h.weight))
                .collect();
            let via = r.via.or_else(|| nexthops.first().and_then(|h| h.0));
            let dev = r
                .dev
                .clone()
                .or_else(|| nexthops.first().and_then(|h| h.1.clone()))
                .or_else(|| via.and_then(|v| addrs.connected(v).map(|(_, d)| d.to_string())));
            let chosen = Chosen {
                table,
                rule: String::new(),
                to: r.to,
                kind: r.kind,
                via,
                dev,
                nexthops,
            };
            ((r.to.prefix_len(), u32::MAX - r.effective_metric()), chosen)
        });
    let connected = (table == TABLE_MAIN)
        .then(|| addrs.connected(daddr))
        .flatten()
        .map(|(net, dev)| {
            let chosen = Chosen {
                table,
                rule: String::new(),
                to: net,
                kind: RouteKind::Unicast,
                via: None,
                dev: Some(dev.to_string()),
                nexthops: Vec::new(),
            };
            // The kernel's connected routes have metric 0 (IPv4) or 256 (IPv6).
            (
                (
                    net.prefix_len(),
                    u32::MAX - if daddr.is_ipv4() { 0 } else { 256 },
                ),
                chosen,
            )
        });
    configured
        .chain(connected)
        .max_by_key(|(rank, _)| *rank)
        .map(|(_, c)| c)
}
