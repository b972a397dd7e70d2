//! The reference: kube-proxy's nftables layout for the benchmark's services, loaded with
//! `nft -f` as kube-proxy loads it (its knftables runs one `nft -f -` per transaction). The
//! layout follows what kube-proxy's own `proxier_test.go` expects (pkg/proxy/nftables): a
//! `service-ips` verdict map to one chain per service, whose `numgen random mod N vmap`
//! jumps to one chain per endpoint that DNATs (written here from that shape, not from its
//! code). Only the dataplane writes are timed: kube-proxy's own Go work (decoding, its
//! change tracker, building the transaction) is not in these figures, so they flatter it.
//!
//! Figures: the whole table in one transaction (kube-proxy's first sync), one endpoint
//! change (its partial sync: the new endpoint's chain, the service chain rewritten, the old
//! endpoint's chain deleted), the rollout (every endpoint of 100 services), and the kernel
//! objects the table holds.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::monitor::nft_f;
use crate::{data, kernel, ms};

/// The pod network the masquerade rule exempts (kube-proxy's cluster CIDR).
const CLUSTER_CIDR: &str = "10.192.0.0/10";
/// Changes timed for the one-change figure (median reported).
const CHANGES: usize = 11;
/// Services the rollout replaces every endpoint of.
const ROLLOUT: usize = 100;

/// An 8-letter stand-in for kube-proxy's hashed chain-name prefix (its names are as long).
fn tag(seed: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..8)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
            (b'A' + (x % 26) as u8) as char
        })
        .collect()
}

/// Service `i`'s chain.
fn service_chain(i: usize) -> String {
    let (ns, name) = data::service_name(i);
    format!("service-{}-{ns}/{name}/tcp/http", tag(i))
}

/// The chain of service `i`'s endpoint at `addr`.
fn endpoint_chain(i: usize, addr: Ipv4Addr) -> String {
    let (ns, name) = data::service_name(i);
    format!(
        "endpoint-{}-{ns}/{name}/tcp/http__{addr}/{}",
        tag(i ^ (u32::from(addr) as usize)),
        data::TARGET_PORT
    )
}

/// The table's fixed part (hooks, the masquerade chains, the service map).
fn base() -> String {
    "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n\
     add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n\
     add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }\n\
     add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }\n\
     add chain ip kube-proxy mark-for-masquerade\n\
     add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000\n\
     add chain ip kube-proxy masquerading\n\
     add rule ip kube-proxy masquerading mark and 0x4000 == 0 return\n\
     add rule ip kube-proxy masquerading mark set mark xor 0x4000\n\
     add rule ip kube-proxy masquerading masquerade fully-random\n\
     add set ip kube-proxy cluster-ips { type ipv4_addr ; }\n\
     add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }\n\
     add chain ip kube-proxy services\n\
     add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n\
     add rule ip kube-proxy nat-prerouting jump services\n\
     add rule ip kube-proxy nat-output jump services\n\
     add rule ip kube-proxy nat-postrouting jump masquerading\n"
        .into()
}

/// Service `i`'s chain rules (the chain exists), pointing at `endpoints`.
fn service_rules(out: &mut String, i: usize, endpoints: &[Ipv4Addr]) {
    let chain = service_chain(i);
    let _ = writeln!(
        out,
        "add rule ip kube-proxy {chain} ip daddr {} tcp dport {} ip saddr != {CLUSTER_CIDR} jump mark-for-masquerade",
        data::vip(i),
        data::PORT
    );
    let vmap: Vec<String> = endpoints
        .iter()
        .enumerate()
        .map(|(k, a)| format!("{k} : goto {}", endpoint_chain(i, *a)))
        .collect();
    let _ = writeln!(
        out,
        "add rule ip kube-proxy {chain} numgen random mod {} vmap {{ {} }}",
        endpoints.len(),
        vmap.join(", ")
    );
}

/// The chain of service `i`'s endpoint at `a`, with its rules.
fn endpoint(out: &mut String, i: usize, a: Ipv4Addr) {
    let chain = endpoint_chain(i, a);
    let _ = writeln!(out, "add chain ip kube-proxy {chain}");
    let _ = writeln!(
        out,
        "add rule ip kube-proxy {chain} ip saddr {a} jump mark-for-masquerade"
    );
    let _ = writeln!(
        out,
        "add rule ip kube-proxy {chain} meta l4proto tcp dnat to {a}:{}",
        data::TARGET_PORT
    );
}

/// Every service, as kube-proxy's first sync writes them.
fn full() -> String {
    let mut out = base();
    for i in 0..data::services() {
        let addrs = data::addresses(i);
        let chain = service_chain(i);
        let _ = writeln!(out, "add chain ip kube-proxy {chain}");
        for &a in &addrs {
            endpoint(&mut out, i, a);
        }
        service_rules(&mut out, i, &addrs);
        let _ = writeln!(
            out,
            "add element ip kube-proxy cluster-ips {{ {} }}",
            data::vip(i)
        );
        let _ = writeln!(
            out,
            "add element ip kube-proxy service-ips {{ {} . tcp . {} : goto {chain} }}",
            data::vip(i),
            data::PORT
        );
    }
    out
}

/// Service `i`'s endpoints go from `old` to `new`: kube-proxy's partial sync of it.
fn change(out: &mut String, i: usize, old: &[Ipv4Addr], new: &[Ipv4Addr]) {
    for a in new.iter().filter(|a| !old.contains(a)) {
        endpoint(out, i, *a);
    }
    let _ = writeln!(out, "flush chain ip kube-proxy {}", service_chain(i));
    service_rules(out, i, new);
    for a in old.iter().filter(|a| !new.contains(a)) {
        let chain = endpoint_chain(i, *a);
        let _ = writeln!(out, "flush chain ip kube-proxy {chain}");
        let _ = writeln!(out, "delete chain ip kube-proxy {chain}");
    }
}

/// `nft -f` of `text`, timed (the process as a whole, as kube-proxy pays it).
fn timed_load(text: &str, what: &str) -> Duration {
    let t = Instant::now();
    nft_f(text).unwrap_or_else(|e| panic!("nft -f of kube-proxy's {what}: {e}"));
    t.elapsed()
}

/// Loads the layout in the benchmark's namespace and prints its figures.
pub fn run(netns: &str) {
    assert!(
        crate::in_netns(netns),
        "the kube-proxy reference writes nftables: run it in a throwaway namespace"
    );
    // The daemons' tables are gone with them, or removed here, so nft's cache reads only
    // kube-proxy's table.
    for t in ["edgenetd-service", "edgenetd-policy"] {
        let _ = nft_f(&format!("delete table inet {t}\n"));
    }
    let _ = nft_f("delete table ip kube-proxy\n");
    let whole = full();
    let cold = timed_load(&whole, "table");
    println!(
        "  nft -f of the whole table (first sync)    {} ({:.1} MB of nft text)",
        ms(cold),
        whole.len() as f64 / 1e6
    );
    let objects = kernel::count("ip", "kube-proxy");
    println!(
        "  kernel objects of the table               {:>9} ({:.1} per service; {objects})",
        objects.total(),
        objects.total() as f64 / data::services() as f64
    );
    let mut runs = Vec::new();
    let mut current = data::addresses(0);
    for n in 0..CHANGES {
        let mut new = current.clone();
        new[0] = data::moved_ip(n + 1);
        let mut text = String::new();
        change(&mut text, 0, &current, &new);
        runs.push(timed_load(&text, "endpoint change"));
        current = new;
    }
    runs.sort();
    println!(
        "  one endpoint change (partial sync)        {} (median of {CHANGES}; worst {})",
        ms(runs[CHANGES / 2]),
        ms(runs[CHANGES - 1]).trim()
    );
    let first = data::services() / 5;
    let mut text = String::new();
    let rolled = first..(first + ROLLOUT).min(data::services());
    let services = rolled.len();
    for i in rolled {
        let new: Vec<Ipv4Addr> = (0..data::ENDPOINTS)
            .map(|j| data::rolled_ip(i, j))
            .collect();
        change(&mut text, i, &data::addresses(i), &new);
    }
    let took = timed_load(&text, "rollout");
    println!(
        "  rollout: every endpoint of {services:>3} services  {} (one transaction)",
        ms(took)
    );
    let _ = nft_f("delete table ip kube-proxy\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_stable_and_distinct() {
        assert_eq!(service_chain(7), service_chain(7));
        assert_ne!(service_chain(7), service_chain(8));
        let a = data::endpoint_ip(3, 0);
        let b = data::endpoint_ip(3, 1);
        assert_ne!(endpoint_chain(3, a), endpoint_chain(3, b));
    }

    #[test]
    fn a_change_adds_the_new_endpoint_and_deletes_the_old_one() {
        let old = data::addresses(1);
        let mut new = old.clone();
        new[0] = data::moved_ip(1);
        let mut text = String::new();
        change(&mut text, 1, &old, &new);
        assert!(text.contains(&format!(
            "add chain ip kube-proxy {}",
            endpoint_chain(1, new[0])
        )));
        assert!(text.contains(&format!(
            "delete chain ip kube-proxy {}",
            endpoint_chain(1, old[0])
        )));
        assert!(text.contains("numgen random mod 4 vmap"));
    }
}
