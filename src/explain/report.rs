//! The answer, for a person (the path step by step) or for a program (`--json`: one object
//! whose keys `verdict`, `rule`, `dnat`, `snat` and `route` are a contract).

use std::fmt::Write;
use std::net::IpAddr;

use serde_json::{Value as Json, json};

use crate::config::route::RouteKind;
use crate::dataplane::nft::ir::Reject;

use super::eval::{Final, NatEvent, RuleRef};
use super::packet::Packet;
use super::pods;
use super::route::Decision;
use super::walk::{Decider, Explanation};

/// `accept`, `drop` or `reject`.
pub fn verdict_word(f: Final) -> &'static str {
    match f {
        Final::Accept => "accept",
        Final::Drop => "drop",
        Final::Reject(_) => "reject",
    }
}

/// The config object's name in an edgenetd rule comment: `rule ssh #1a2b3c4d` -> `ssh`;
/// other objects keep their kind (`port-forward web`, `forward lan->wan`, `base`).
pub fn rule_name(rule: &RuleRef) -> String {
    let comment = rule.comment.as_deref().unwrap_or("");
    let label = match comment.rsplit_once(" #") {
        Some((label, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => label,
        _ => comment,
    };
    let label = label.strip_prefix("rule ").unwrap_or(label);
    if label.is_empty() {
        format!("{} {}", rule.table, rule.chain)
    } else {
        label.to_string()
    }
}

fn endpoint(addr: IpAddr, port: Option<u16>) -> String {
    match (addr, port) {
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
        (a, Some(p)) => format!("{a}:{p}"),
        (a, None) => a.to_string(),
    }
}

fn nat_json(n: &NatEvent) -> Json {
    let backends: Vec<Json> = n
        .shares
        .iter()
        .map(|(a, p, s)| json!({"to": endpoint(*a, *p), "addr": a.to_string(), "port": p, "share": s}))
        .collect();
    json!({
        "to": n.addr.map(|a| endpoint(a, n.port)),
        "addr": n.addr.map(|a| a.to_string()),
        "port": n.port,
        "masquerade": n.masquerade,
        "rule": rule_name(&n.rule),
        "table": n.rule.table,
        "chain": n.rule.chain,
        "backends": backends,
    })
}

fn route_kind(k: RouteKind) -> &'static str {
    match k {
        RouteKind::Unicast => "forward",
        RouteKind::Blackhole => "blackhole",
        RouteKind::Unreachable => "unreachable",
        RouteKind::Prohibit => "prohibit",
        RouteKind::Throw => "throw",
    }
}

fn route_json(d: &Decision) -> Json {
    match d {
        Decision::Local => json!({"decision": "local", "table": 255, "rule": "local"}),
        Decision::NoRoute => json!({"decision": "no route"}),
        Decision::Route(c) => json!({
            "decision": route_kind(c.kind),
            "table": c.table,
            "rule": c.rule,
            "to": c.to.to_string(),
            "via": c.via.map(|v| v.to_string()),
            "dev": c.dev,
            "nexthops": c.nexthops.iter().map(|(via, dev, w)| json!({
                "via": via.map(|v| v.to_string()), "dev": dev, "weight": w
            })).collect::<Vec<_>>(),
        }),
    }
}

/// The `--json` object.
pub fn json(e: &Explanation) -> Json {
    let (rule, table, chain) = decider_names(&e.decider);
    let text = match &e.decider {
        Decider::Rule(r) => Some(r.text.clone()),
        _ => None,
    };
    json!({
        "verdict": verdict_word(e.verdict),
        "rule": rule,
        "hook": e.hook,
        "table": table,
        "chain": chain,
        "rule_text": text,
        "dnat": e.dnat.as_ref().map(|n| {
            let mut j = nat_json(n);
            j["service"] = json!(e.service);
            j
        }),
        "snat": e.snat.as_ref().map(nat_json),
        "route": e.route.as_ref().map(route_json),
        "steps": e.steps,
        "uncertain": e.uncertain,
        "pods": e.pods.as_ref().map(pods::json),
        "enforced": e.enforced.as_ref().map(|x| {
            let (rule, table, chain) = decider_names(&x.decider);
            json!({
                "verdict": verdict_word(x.verdict),
                "rule": rule,
                "table": table,
                "chain": chain,
                "pods": x.pods.as_ref().map(pods::json),
            })
        }),
    })
}

/// A decider's rule name (`default` for a chain's policy or the routing), table and chain.
fn decider_names(d: &Decider) -> (String, String, String) {
    match d {
        Decider::Rule(r) => (rule_name(r), r.table.clone(), r.chain.clone()),
        Decider::Default(t, c) => ("default".to_string(), t.clone(), c.clone()),
        Decider::Routing => ("default".to_string(), String::new(), "routing".into()),
    }
}

fn packet_line(p: &Packet) -> String {
    let (from, to) = if p.proto.has_ports() {
        (
            endpoint(p.saddr, Some(p.sport)),
            endpoint(p.daddr, Some(p.dport)),
        )
    } else if p.proto.is_icmp() {
        (
            p.saddr.to_string(),
            format!("{} (type {})", p.daddr, p.icmp_type),
        )
    } else {
        (p.saddr.to_string(), p.daddr.to_string())
    };
    let state = if p.established() {
        "established"
    } else {
        "new"
    };
    format!(
        "{} {from} -> {to}, {state}, in on {}",
        p.proto.name(),
        p.iif
    )
}

fn nat_line(out: &mut String, what: &str, n: &NatEvent) {
    let to = match (n.addr, n.masquerade) {
        (Some(a), _) => endpoint(a, n.port),
        (None, true) => "the outgoing interface's address (unknown: see --addresses)".into(),
        (None, false) => "?".into(),
    };
    let how = if n.masquerade { "masquerade" } else { what };
    let _ = writeln!(
        out,
        "{what:<12} {how} to {to} by {} ({} {})",
        rule_name(&n.rule),
        n.rule.table,
        n.rule.chain
    );
    for (a, p, share) in &n.shares {
        let _ = writeln!(
            out,
            "{:<12}   backend {} share {:.1}%",
            "",
            endpoint(*a, *p),
            share * 100.0
        );
    }
}

fn route_line(out: &mut String, d: &Decision) {
    let text = match d {
        Decision::Local => "local: the router's own address (table local)".to_string(),
        Decision::NoRoute => "no route: the kernel answers ICMP unreachable".to_string(),
        Decision::Route(c) => {
            let mut s = format!(
                "{} {} table {} (picked by {})",
                route_kind(c.kind),
                c.to,
                c.table,
                c.rule
            );
            if let Some(v) = c.via {
                let _ = write!(s, " via {v}");
            }
            if let Some(d) = &c.dev {
                let _ = write!(s, " dev {d}");
            }
            for (via, dev, w) in &c.nexthops {
                let _ = write!(
                    s,
                    "\n{:<12}   nexthop via {} dev {} weight {w}",
                    "",
                    via.map_or("-".into(), |v| v.to_string()),
                    dev.as_deref().unwrap_or("-")
                );
            }
            s
        }
    };
    let _ = writeln!(out, "{:<12} {text}", "route");
}

/// The path for a person.
pub fn human(e: &Explanation, original: &Packet) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<12} {}", "packet", packet_line(original));
    if let Some(n) = &e.dnat {
        nat_line(&mut out, "dnat", n);
        if let Some(s) = &e.service {
            let _ = writeln!(out, "{:<12}   (service {s})", "");
        }
    }
    if let Some(r) = &e.route {
        route_line(&mut out, r);
    }
    for step in &e.steps {
        let _ = writeln!(out, "{:<12} {step}", "");
    }
    let word = verdict_word(e.verdict);
    let _ = writeln!(out, "{:<12} {word} by {}", e.hook, decided_by(&e.decider));
    if let Some(n) = &e.snat {
        nat_line(&mut out, "snat", n);
    }
    let how = match e.verdict {
        Final::Reject(Reject::TcpReset) => " (TCP reset)",
        Final::Reject(_) => " (ICMP unreachable)",
        _ => "",
    };
    let _ = writeln!(out, "{:<12} {word}{how}", "verdict");
    for why in &e.uncertain {
        let _ = writeln!(out, "{:<12} the verdict is uncertain: {why}", "uncertain");
    }
    if let Some(p) = &e.pods {
        pods::human(&mut out, "pods", p);
    }
    if let Some(x) = &e.enforced {
        let _ = writeln!(
            out,
            "{:<12} with every audit policy enforced: {} by {}",
            "enforced",
            verdict_word(x.verdict),
            decided_by(&x.decider)
        );
        if let Some(p) = &x.pods {
            pods::human(&mut out, "", p);
        }
    }
    out
}

/// `rule NAME (table chain): TEXT`, or the default or routing that decided.
fn decided_by(d: &Decider) -> String {
    match d {
        Decider::Rule(r) => format!(
            "rule {} ({} {}): {}",
            rule_name(r),
            r.table,
            r.chain,
            r.text
        ),
        Decider::Default(t, c) if t.is_empty() => format!("the default of {c}"),
        Decider::Default(t, c) => format!("the default policy of {t} {c}"),
        Decider::Routing => "the routing decision".into(),
    }
}
