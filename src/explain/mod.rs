//! `edgenetd explain`: which rule decides a packet, from the config (and, on the router, the
//! kernel's addresses).
//!
//! The config is turned into the very nftables IR the controllers program (the policy
//! table from `controller::policy::program`, the service table from
//! `controller::service::elements`), and an interpreter runs the packet through it hook by
//! hook, with the routing decision from the route config in between. Because it reads the
//! IR, not the config, it cannot drift from what is programmed. Its matches over the IR are
//! exhaustive, so a statement, expression or header field added later does not compile
//! until `explain` handles it; what has no single value (`numgen`, `jhash` outside a NAT
//! map) it reports as unsupported instead of guessing.
//!
//! - [`query`]: the command line -> the packet;
//! - [`walk`]: the hooks in order; [`eval`] (and `natmap`): one chain's rules;
//!   [`values`]: expressions and comparisons; [`route`]: the routing decision;
//! - [`report`]: text and `--json`;
//! - [`kernel`]: the router's own addresses, from the kernel where its interfaces exist.
//! - [`cluster`]: the cluster state the daemon cached; [`config_map`]: the fragments of the
//!   `[kubernetes] config_map` version it last confirmed.

pub mod cluster;
pub mod config_map;
pub mod error;
pub mod eval;
#[cfg(test)]
mod eval_tests;
pub mod kernel;
mod natmap;
pub mod packet;
pub mod pods;
pub mod query;
pub mod report;
pub mod route;
pub mod values;
pub mod walk;

use std::process::ExitCode;

use crate::config::{self, DesiredState};
use crate::controller::policy::addresses::RouterAddresses;
use crate::controller::policy::program;
use crate::controller::service::{elements, model};
use crate::dataplane::nft::ir::Table;
use crate::dataplane::route::{LinkInfo, LinkKind, LinkTable};

pub use error::ExplainError;
use route::Addresses;
use walk::{Explanation, World};

/// The tables edgenetd would program for `desired`, the router having `addrs`.
pub fn tables(desired: &DesiredState, addrs: &Addresses) -> Vec<Table> {
    let mut out = Vec::new();
    if desired.controller("policy").enabled {
        let router = RouterAddresses::from_networks(addrs.entries.clone()).with_links(links(addrs));
        let policy = program::build_with_pods(
            desired.policy.as_ref(),
            &desired.pod_policies,
            &desired.daemon.policy_table(),
            &router,
        );
        out.extend(policy.map(|p| with_includes(p).table));
    }
    if desired.controller("service").enabled {
        // Backend checks are unknown offline: every backend counts as up.
        let model = model::build(&desired.services);
        let local = crate::controller::service::local::of(desired.daemon.listen, &model);
        out.push(elements::full_table(
            &desired.daemon.service_table(),
            &model,
            local,
        ));
    }
    out
}

/// `p` with its includes compiled by nft where this process may (root, in its namespace),
/// else with one opaque line per chain include naming it, so the path shows where they are.
fn with_includes(p: program::Program) -> program::Program {
    use crate::controller::policy::includes;
    use crate::dataplane::nft::ir::{Opaque, Rule, Stmt};
    use crate::dataplane::nft::snippet::Compiled;
    if p.includes.is_empty() {
        return p;
    }
    let compiled = crate::dataplane::nft::Nft::open()
        .map_err(|e| e.to_string())
        .and_then(|mut nft| includes::resolve(&mut nft, &p).map_err(|e| e.to_string()));
    let why = match compiled {
        Ok(resolved) => return resolved,
        Err(why) => why,
    };
    let placeholders: Vec<Compiled> = p
        .includes
        .iter()
        .map(|inc| Compiled {
            chains: Vec::new(),
            rules: inc
                .chain
                .iter()
                .map(|chain| {
                    Rule::new(
                        chain,
                        vec![Stmt::Opaque(Opaque {
                            exprs: Vec::new(),
                            text: format!("(not compiled: {why})"),
                        })],
                    )
                })
                .collect(),
        })
        .collect();
    includes::splice(&p, &placeholders).unwrap_or(p)
}

/// The interfaces `--addresses` names, as plain devices: the flowtable (`flow_offload`)
/// is built over the zones' existing devices, and these are the ones explain knows exist.
fn links(addrs: &Addresses) -> LinkTable {
    let mut names: Vec<&String> = addrs.entries.iter().map(|(i, _)| i).collect();
    names.sort();
    names.dedup();
    LinkTable {
        links: (1..)
            .zip(names)
            .map(|(index, name)| LinkInfo {
                index,
                name: name.clone(),
                kind: LinkKind::Other,
                master: None,
                parent: None,
            })
            .collect(),
        pppoe_devices: Vec::new(),
    }
}

/// Explains `q`'s packet under `desired`; where an end is a pod, which pod policies decide
/// it, and, where audit policies select an end, what happens with them enforced.
pub fn explain(desired: &DesiredState, q: &query::Query) -> Result<Explanation, ExplainError> {
    let mut e = run(desired, q)?;
    let from = q.packet.saddr;
    // The pod chains see the packet after DNAT, before SNAT.
    let to = e
        .dnat
        .as_ref()
        .and_then(|n| n.addr)
        .unwrap_or(q.packet.daddr);
    let pod_policies = &desired.pod_policies;
    e.pods = pods::report(pod_policies, from, to, &e.hits, e.verdict);
    if e.pods.as_ref().is_some_and(pods::PodReport::audited) {
        let mut enforced = desired.clone();
        for unit in &mut enforced.pod_policies.policies {
            unit.audit = false;
        }
        let again = run(&enforced, q)?;
        let pods = pods::report(&enforced.pod_policies, from, to, &again.hits, again.verdict);
        e.enforced = Some(Box::new(walk::Enforced {
            verdict: again.verdict,
            decider: again.decider,
            pods,
        }));
    }
    Ok(e)
}

/// One run of `q`'s packet through the tables of `desired`.
fn run(desired: &DesiredState, q: &query::Query) -> Result<Explanation, ExplainError> {
    let tables = tables(desired, &q.addresses);
    let empty = Default::default();
    let routing = if desired.controller("route").enabled {
        &desired.routing
    } else {
        &empty
    };
    let mut e = World {
        tables: &tables,
        routing,
        addresses: &q.addresses,
    }
    .explain(q.packet.clone())?;
    let p = &q.packet;
    e.service = desired
        .services
        .services
        .iter()
        .find(|s| {
            s.address == p.daddr && s.port == p.dport && s.protocol.number() == p.proto.number()
        })
        .map(|s| s.name.clone());
    Ok(e)
}

/// `edgenetd explain` with the arguments after the verb. Exit 0 with an answer, 1 when the
/// config does not load or cannot be evaluated, 2 on a usage error.
pub fn main(args: &[String], default_config: &str, usage: &str) -> ExitCode {
    let mut q = match query::parse(args, default_config) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("edgenetd explain: {e}\n\n{usage}");
            return ExitCode::from(2);
        }
    };
    let desired = match config::load(&q.config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let (desired, config_map) = config_map::load(desired, &q.config, &q.state_dir());
    let (desired, cluster) = match cluster::compose(desired, q.cluster_state.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgenetd explain: the cluster state: {e}");
            return ExitCode::from(1);
        }
    };
    if !q.pods.is_empty() {
        if !cfg!(feature = "kubernetes") {
            eprintln!(
                "edgenetd explain: --from-pod and --to-pod name pods of a cluster: this edgenetd is built without the kubernetes feature; give the addresses with --from and --to"
            );
            return ExitCode::from(1);
        }
        if cluster.as_ref().is_none_or(|c| !c.found) {
            eprintln!(
                "edgenetd explain: --from-pod and --to-pod need the cluster state: a config with [kubernetes] on a router running it, or --cluster-state FILE"
            );
            return ExitCode::from(1);
        }
        if let Err(e) = q.name_pods(&desired.pod_policies.names) {
            eprintln!("edgenetd explain: {e}");
            return ExitCode::from(1);
        }
    }
    let given = std::mem::take(&mut q.addresses);
    let source = match kernel::resolve(&q.wanted, given, &q.packet.iif) {
        Ok((addrs, source)) => {
            q.addresses = addrs;
            source
        }
        Err(e) => {
            eprintln!("edgenetd explain: the router's addresses: {e}");
            return ExitCode::from(1);
        }
    };
    match explain(&desired, &q) {
        Ok(e) if q.json => {
            let mut j = report::json(&e);
            j["addresses"] = source.json(&q.addresses);
            if let Some(c) = &cluster {
                j["cluster"] = c.json();
            }
            if let Some(c) = &config_map {
                j["configMap"] = c.json();
            }
            println!("{j}");
            ExitCode::SUCCESS
        }
        Ok(e) => {
            if q.addresses.entries.is_empty() {
                eprintln!("edgenetd explain: no address counts as the router's own");
            }
            println!("{}", source.line());
            if let Some(c) = &cluster {
                println!("{}", c.line());
            }
            if let Some(c) = &config_map {
                println!("{}", c.line());
            }
            print!("{}", report::human(&e, &q.packet));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("edgenetd explain: {e}");
            ExitCode::from(1)
        }
    }
}
