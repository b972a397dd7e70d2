//! Renders the IR as `nft -f` text (what `edgenetd plan` prints and tests load with
//! `nft -c -f`). Protocol dependencies are left to nft, as a person would write them.

use std::fmt::Write;

use super::ir::*;
use crate::calendar;
use crate::names::{icmp_type_name, icmpv6_type_name};

/// `inet`, `ip` or `ip6`.
pub fn family_name(family: Family) -> &'static str {
    match family {
        Family::Inet => "inet",
        Family::Ip => "ip",
        Family::Ip6 => "ip6",
    }
}

/// Text that replaces `table` atomically when loaded with `nft -f`: add (so the delete cannot
/// fail), delete, then the full definition. Other tables are not mentioned.
pub fn render_replace(table: &Table) -> String {
    let fam = family_name(table.family);
    let mut out = format!(
        "add table {fam} {name}\ndelete table {fam} {name}\n",
        name = table.name
    );
    out.push_str(&render_table(table));
    out
}

/// The first line of an nft part of `edgenetd plan` output. Everything from such a line
/// through the matching [`PLAN_END`] line is `nft -f` text (a tool extracts it with
/// `sed -n '/^# nft begin:/,/^# nft end:/p'`); the lines around it are `#` comments.
pub const PLAN_BEGIN: &str = "# nft begin:";

/// The last line of an nft part of `edgenetd plan` output (see [`PLAN_BEGIN`]).
pub const PLAN_END: &str = "# nft end:";

/// [`render_replace`] between the `plan` markers: the table as a sync would leave it.
pub fn render_plan_block(table: &Table) -> String {
    let id = format!("table {} {}", family_name(table.family), table.name);
    format!(
        "{PLAN_BEGIN} {id}\n{}{PLAN_END} {id}\n",
        render_replace(table)
    )
}

/// Between the `plan` markers: text that removes table `name` if present (a sync that
/// wants no table).
pub fn render_plan_removal(family: Family, name: &str) -> String {
    let fam = family_name(family);
    let id = format!("table {fam} {name}");
    format!(
        "{PLAN_BEGIN} {id}\nadd table {fam} {name}\ndelete table {fam} {name}\n{PLAN_END} {id}\n"
    )
}

/// The `table <family> <name> { ... }` block.
pub fn render_table(table: &Table) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "table {} {} {{", family_name(table.family), table.name);
    for set in &table.sets {
        render_set(&mut out, set, slot_key_of(table, &set.name));
        out.push('\n');
    }
    for h in &table.ct_helpers {
        render_ct_helper(&mut out, table.family, h);
    }
    for l in &table.limits {
        // nft's grammar takes no quoted name here (an identifier, as for ct helpers).
        let _ = writeln!(out, "\tlimit {} {{", l.name);
        let _ = write!(out, "\t\trate {}/{}", l.rate, l.unit.name());
        if l.burst > 0 {
            let _ = write!(out, " burst {} packets", l.burst);
        }
        out.push_str("\n\t}\n");
    }
    for ft in &table.flowtables {
        render_flowtable(&mut out, ft);
        out.push('\n');
    }
    for (i, chain) in table.chains.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "\tchain {} {{", chain.name);
        if let Some(base) = &chain.base {
            let _ = writeln!(
                out,
                "\t\ttype {} hook {} priority {}; policy {};",
                chain_type_name(base.kind),
                hook_name(base.hook),
                base.priority,
                match base.policy {
                    ChainPolicy::Accept => "accept",
                    ChainPolicy::Drop => "drop",
                }
            );
        }
        for rule in table.rules.iter().filter(|r| r.chain == chain.name) {
            let _ = writeln!(out, "\t\t{}", render_rule(table.family, rule));
        }
        out.push_str("\t}\n");
    }
    out.push_str("}\n");
    out
}

fn render_ct_helper(out: &mut String, family: Family, h: &CtHelper) {
    let proto = match h.protocol {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        p => p.to_string(),
    };
    let _ = writeln!(out, "\tct helper {} {{", h.name);
    let _ = writeln!(out, "\t\ttype \"{}\" protocol {proto}", h.helper);
    let _ = writeln!(out, "\t\tl3proto {}", family_name(family));
    out.push_str("\t}\n");
}

/// `flowtable <name> { hook ingress priority <p>; devices = { ... }; [flags offload;] }`
/// (nft wants no `devices` line when there are none).
fn render_flowtable(out: &mut String, ft: &Flowtable) {
    let _ = writeln!(out, "\tflowtable {} {{", ft.name);
    let _ = write!(out, "\t\thook ingress priority {};", ft.priority);
    if !ft.devices.is_empty() {
        let quoted: Vec<String> = ft.devices.iter().map(|d| format!("\"{d}\"")).collect();
        let _ = write!(out, " devices = {{ {} }};", quoted.join(", "));
    }
    if ft.hw_offload {
        out.push_str(" flags offload;");
    }
    out.push_str("\n\t}\n");
}

fn chain_type_name(kind: ChainType) -> &'static str {
    match kind {
        ChainType::Filter => "filter",
        ChainType::Nat => "nat",
        ChainType::Route => "route",
    }
}

fn hook_name(hook: Hook) -> &'static str {
    match hook {
        Hook::Prerouting => "prerouting",
        Hook::Input => "input",
        Hook::Forward => "forward",
        Hook::Output => "output",
        Hook::Postrouting => "postrouting",
    }
}

fn render_key_type(key: &KeyType) -> String {
    key.0
        .iter()
        .map(|t| t.nft_name())
        .collect::<Vec<_>>()
        .join(" . ")
}

/// The key expression of the first rule that looks `set` up with a key holding `numgen` or
/// `jhash`, if any.
///
/// nft types those results as plain `integer`, and its text syntax has no cast: a rule that
/// looks up `ip daddr . meta l4proto . th dport . numgen random mod 16` in a map declared
/// `type ipv4_addr . inet_proto . inet_service . mark` is refused ("datatype mismatch").
/// Declaring such a set with `typeof <that key>` is accepted and loads the same rules and
/// the same element bytes; only the type id nft stores for its own listings differs
/// (`integer` where the batch says `mark`; the kernel never reads it).
fn slot_key_of<'a>(table: &'a Table, set: &str) -> Option<&'a Expr> {
    table.rules.iter().flat_map(|r| &r.stmts).find_map(|stmt| {
        let (key, map) = match stmt {
            Stmt::NatMap { key, map, .. } | Stmt::Vmap { key, map } => (key, map),
            Stmt::Lookup { left, set, .. } => (left, set),
            _ => return None,
        };
        let named = matches!(map, SetRef::Named(n) if n == set);
        (named && has_slot_expr(key)).then_some(key)
    })
}

fn has_slot_expr(e: &Expr) -> bool {
    match e {
        Expr::Numgen { .. } | Expr::Jhash { .. } => true,
        Expr::Concat(parts) => parts.iter().any(has_slot_expr),
        _ => false,
    }
}

/// A packet expression of type `t`, for a `typeof` declaration (None for verdicts).
fn typeof_expr(t: DataType) -> Option<&'static str> {
    Some(match t {
        DataType::Ipv4Addr => "ip daddr",
        DataType::Ipv6Addr => "ip6 daddr",
        DataType::InetService => "th dport",
        DataType::InetProto => "meta l4proto",
        DataType::IfName => "iifname",
        DataType::Mark => "meta mark",
        DataType::IcmpType => "icmp type",
        DataType::Icmpv6Type => "icmpv6 type",
        DataType::Field(f) => f.def().text,
        DataType::Day => "meta day",
        DataType::Verdict => return None,
    })
}

/// `typeof KEY [: DATA]` for a set looked up with a numgen/jhash key, when every data type
/// has a `typeof` form (nft 1.0.6 cannot mix `typeof` and `type` in one declaration).
fn render_typeof(key: &Expr, data: Option<&KeyType>) -> Option<String> {
    let mut out = String::from("typeof ");
    render_expr(&mut out, key);
    if let Some(data) = data {
        let parts: Option<Vec<_>> = data.0.iter().map(|t| typeof_expr(*t)).collect();
        let _ = write!(out, " : {}", parts?.join(" . "));
    }
    Some(out)
}

/// A duration in nft's notation (`1h`, `90s`, `1500ms`).
fn nft_duration(ms: u64) -> String {
    match ms {
        _ if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        _ if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        _ if ms % 1000 == 0 => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

fn render_set(out: &mut String, set: &Set, slot_key: Option<&Expr>) {
    let kw = if set.data.is_some() { "map" } else { "set" };
    let _ = writeln!(out, "\t{kw} {} {{", set.name);
    let decl = match (
        slot_key.and_then(|k| render_typeof(k, set.data.as_ref())),
        &set.data,
    ) {
        (Some(typeof_decl), _) => typeof_decl,
        (None, Some(data)) => format!(
            "type {} : {}",
            render_key_type(&set.key),
            render_key_type(data)
        ),
        (None, None) => format!("type {}", render_key_type(&set.key)),
    };
    let _ = writeln!(out, "\t\t{decl}");
    let mut flags = Vec::new();
    if set.constant {
        flags.push("constant");
    }
    if set.interval {
        flags.push("interval");
    }
    if let Some(size) = set.dynamic {
        flags.extend(["dynamic", "timeout"]);
        let _ = writeln!(out, "\t\tsize {size}");
    }
    if let Some(size) = set.size {
        let _ = writeln!(out, "\t\tsize {size}");
    }
    if set.timeout.is_some() {
        flags.push("timeout");
    }
    if !flags.is_empty() {
        let _ = writeln!(out, "\t\tflags {}", flags.join(","));
    }
    if let Some(ms) = set.timeout.filter(|ms| *ms > 0) {
        let _ = writeln!(out, "\t\ttimeout {}", nft_duration(ms));
        if !set.elements.is_empty() {
            // nft 1.0 has no words for an element that never expires in a set with a
            // default timeout; the batch sends timeout 0.
            out.push_str("\t\t# these elements never expire (timeout 0)\n");
        }
    }
    if !set.elements.is_empty() {
        out.push_str("\t\telements = { ");
        for (i, e) in set.elements.iter().enumerate() {
            if i > 0 {
                out.push_str(if i % 8 == 0 { ",\n\t\t\t     " } else { ", " });
            }
            render_element(out, e);
        }
        out.push_str(" }\n");
    }
    out.push_str("\t}\n");
}

fn render_element(out: &mut String, e: &Element) {
    match &e.key {
        ElemKey::Value(v) => render_value(out, v),
        ElemKey::Prefix(net) if net.prefix_len() == net.max_prefix_len() => {
            let _ = write!(out, "{}", net.addr());
        }
        ElemKey::Prefix(net) => {
            let _ = write!(out, "{net}");
        }
        ElemKey::Range(Value::Concat(a), Value::Concat(b)) if a.len() == b.len() => {
            for (i, (a, b)) in a.iter().zip(b).enumerate() {
                if i > 0 {
                    out.push_str(" . ");
                }
                render_span(out, a, b);
            }
        }
        ElemKey::Range(a, b) => {
            render_value(out, a);
            out.push('-');
            render_value(out, b);
        }
    }
    if let Some(data) = &e.data {
        out.push_str(" : ");
        render_value(out, data);
    }
}

/// One field of a concatenated interval element, as nft lists it: a single value, a prefix
/// when the span is one (`10.0.0.0/24`), else a range.
fn render_span(out: &mut String, a: &Value, b: &Value) {
    if a == b {
        return render_value(out, a);
    }
    let prefix = match (a, b) {
        (Value::Ipv4(x), Value::Ipv4(y)) => {
            span_prefix(u128::from(u32::from(*x)), u128::from(u32::from(*y)), 32)
        }
        (Value::Ipv6(x), Value::Ipv6(y)) => span_prefix(u128::from(*x), u128::from(*y), 128),
        _ => None,
    };
    match prefix {
        Some(len) => {
            render_value(out, a);
            let _ = write!(out, "/{len}");
        }
        None => {
            render_value(out, a);
            out.push('-');
            render_value(out, b);
        }
    }
}

/// The prefix length of the span `lo..=hi` of a `bits`-bit key when it is exactly one prefix.
fn span_prefix(lo: u128, hi: u128, bits: u32) -> Option<u32> {
    let host = lo ^ hi;
    let len = bits - (128 - host.leading_zeros());
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len) >> (128 - bits)
    };
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    (lo & !mask & all == 0 && hi == (lo | (!mask & all))).then_some(len)
}

/// Renders one rule's statements (and comment), without the chain.
pub fn render_rule(family: Family, rule: &Rule) -> String {
    let mut out = String::new();
    for (i, stmt) in rule.stmts.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        render_stmt(&mut out, family, stmt);
    }
    if let Some(c) = &rule.comment {
        let _ = write!(out, " comment \"{}\"", c.replace('"', "'"));
    }
    out
}

fn render_stmt(out: &mut String, family: Family, stmt: &Stmt) {
    match stmt {
        Stmt::Cmp { left, op, right } => {
            render_expr(out, left);
            out.push_str(if *op == CmpOp::Neq { " != " } else { " " });
            match (left, right) {
                (Expr::Meta(MetaKey::NfProto), Value::Proto(2)) => out.push_str("ipv4"),
                (Expr::Meta(MetaKey::NfProto), Value::Proto(10)) => out.push_str("ipv6"),
                _ => render_value(out, right),
            }
        }
        Stmt::Range {
            left,
            negate,
            from,
            to,
        } => {
            render_expr(out, left);
            out.push_str(if *negate { " != " } else { " " });
            render_value(out, from);
            out.push('-');
            render_value(out, to);
        }
        Stmt::Flags { left, bits, negate } => render_flags(out, left, bits, *negate),
        Stmt::Lookup { left, set, negate } => {
            render_expr(out, left);
            out.push_str(if *negate { " != " } else { " " });
            render_setref(out, set);
        }
        Stmt::Counter => out.push_str("counter"),
        Stmt::Limit {
            rate,
            unit,
            burst,
            over,
        } => render_limit(out, *rate, *unit, *burst, *over),
        Stmt::LimitRef(name) => {
            let _ = write!(out, "limit name \"{name}\"");
        }
        Stmt::Log { prefix, group } => {
            let _ = write!(out, "log prefix \"{}\"", prefix.replace('"', "'"));
            if let Some(g) = group {
                let _ = write!(out, " group {g}");
            }
        }
        Stmt::Verdict(v) => render_verdict(out, v),
        Stmt::Vmap { key, map } => {
            render_expr(out, key);
            out.push_str(" vmap ");
            render_setref(out, map);
        }
        Stmt::Reject(r) => out.push_str(match r {
            Reject::TcpReset => "reject with tcp reset",
            Reject::IcmpxPortUnreachable => "reject with icmpx port-unreachable",
            Reject::IcmpxAdminProhibited => "reject with icmpx admin-prohibited",
        }),
        Stmt::Masquerade => out.push_str("masquerade"),
        Stmt::Redirect { port: None } => out.push_str("redirect"),
        Stmt::Redirect { port: Some(p) } => {
            let _ = write!(out, "redirect to :{p}");
        }
        Stmt::Notrack => out.push_str("notrack"),
        Stmt::CtMarkOr(bits) => {
            let _ = write!(out, "ct mark set ct mark | 0x{bits:08x}");
        }
        Stmt::ClampMssToRoute => out.push_str("tcp option maxseg size set rt mtu"),
        Stmt::MaskedCmp { left, mask, right } => {
            render_expr(out, left);
            out.push_str(" & ");
            // Flag names as a mask: nft reads `a | b` only inside parentheses there.
            if let Value::TcpFlags(_) = mask {
                let mut names = String::new();
                render_value(&mut names, mask);
                let _ = write!(out, "({})", names.replace(',', " | "));
            } else {
                render_value(out, mask);
            }
            out.push_str(" == ");
            render_value(out, right);
        }
        Stmt::MetaMarkSet { and: 0, xor } => {
            let _ = write!(out, "meta mark set 0x{xor:08x}");
        }
        // Disjoint bits: XOR sets them, and `|` reads as what it does.
        Stmt::MetaMarkSet { and, xor } if and & xor == 0 => {
            let _ = write!(out, "meta mark set meta mark & 0x{and:08x} | 0x{xor:08x}");
        }
        Stmt::MetaMarkSet { and, xor } => {
            let _ = write!(out, "meta mark set meta mark & 0x{and:08x} ^ 0x{xor:08x}");
        }
        Stmt::CtHelperSet(name) => {
            let _ = write!(out, "ct helper set \"{name}\"");
        }
        Stmt::FlowOffload(name) => {
            let _ = write!(out, "flow add @{name}");
        }
        Stmt::Opaque(o) => out.push_str(&o.text),
        Stmt::FieldSet { field, value } => {
            let _ = write!(out, "{} set ", field.def().text);
            render_value(out, &Value::Field(*field, *value));
        }
        Stmt::Nat { kind, addr, port } => render_nat(out, family, *kind, addr, *port),
        Stmt::NatMap {
            kind,
            version,
            key,
            map,
            with_port,
        } => {
            out.push_str(nat_name(*kind));
            if family == Family::Inet {
                out.push_str(if *version == IpVersion::V4 {
                    " ip"
                } else {
                    " ip6"
                });
            }
            if *with_port {
                out.push_str(" addr . port");
            }
            out.push_str(" to ");
            render_expr(out, key);
            out.push_str(" map ");
            render_setref(out, map);
        }
        Stmt::MapUpdate {
            map,
            key,
            timeout_ms,
            data,
        } => {
            let _ = write!(out, "update @{map} {{ ");
            render_expr(out, key);
            if timeout_ms % 1000 == 0 {
                let _ = write!(out, " timeout {}s : ", timeout_ms / 1000);
            } else {
                let _ = write!(out, " timeout {timeout_ms}ms : ");
            }
            render_expr(out, data);
            out.push_str(" }");
        }
    }
}

/// `left bits` (any of the bits set), or `left & (a|b) == 0` (none set).
fn render_flags(out: &mut String, left: &Expr, bits: &Value, negate: bool) {
    render_expr(out, left);
    if let Value::Mark(m) = bits {
        // A mark is a number, not a flag type: nft wants the mask spelled out.
        let _ = write!(out, " & 0x{m:08x} {} 0", if negate { "==" } else { "!=" });
        return;
    }
    if negate {
        out.push_str(" & (");
        let mut s = String::new();
        render_value(&mut s, bits);
        out.push_str(&s.replace(',', "|"));
        out.push_str(") == 0");
    } else {
        out.push(' ');
        render_value(out, bits);
    }
}

/// `limit rate [over] N/unit [burst B packets]`.
fn render_limit(out: &mut String, rate: u64, unit: RateUnit, burst: u32, over: bool) {
    let _ = write!(
        out,
        "limit rate {}{rate}/{}",
        if over { "over " } else { "" },
        unit.name()
    );
    if burst > 0 {
        let _ = write!(out, " burst {burst} packets");
    }
}

/// NAT to a fixed address (and port); in an inet table the address family is named.
fn render_nat(
    out: &mut String,
    family: Family,
    kind: NatKind,
    addr: &std::net::IpAddr,
    port: Option<u16>,
) {
    out.push_str(nat_name(kind));
    if family == Family::Inet {
        out.push_str(if addr.is_ipv4() { " ip" } else { " ip6" });
    }
    out.push_str(" to ");
    match (addr, port) {
        (std::net::IpAddr::V6(a), Some(p)) => {
            let _ = write!(out, "[{a}]:{p}");
        }
        (a, Some(p)) => {
            let _ = write!(out, "{a}:{p}");
        }
        (a, None) => {
            let _ = write!(out, "{a}");
        }
    }
}

fn nat_name(kind: NatKind) -> &'static str {
    match kind {
        NatKind::Snat => "snat",
        NatKind::Dnat => "dnat",
    }
}

fn render_setref(out: &mut String, set: &SetRef) {
    match set {
        SetRef::Named(name) => {
            let _ = write!(out, "@{name}");
        }
        SetRef::Anonymous { elements, .. } => {
            out.push_str("{ ");
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render_element(out, e);
            }
            out.push_str(" }");
        }
    }
}

fn render_verdict(out: &mut String, v: &Verdict) {
    match v {
        Verdict::Accept => out.push_str("accept"),
        Verdict::Drop => out.push_str("drop"),
        Verdict::Continue => out.push_str("continue"),
        Verdict::Return => out.push_str("return"),
        Verdict::Jump(c) => {
            let _ = write!(out, "jump {c}");
        }
        Verdict::Goto(c) => {
            let _ = write!(out, "goto {c}");
        }
    }
}

/// Renders a packet expression.
pub fn render_expr(out: &mut String, e: &Expr) {
    match e {
        Expr::Meta(k) => out.push_str(match k {
            MetaKey::IifName => "iifname",
            MetaKey::OifName => "oifname",
            MetaKey::L4Proto => "meta l4proto",
            MetaKey::NfProto => "meta nfproto",
            MetaKey::Mark => "meta mark",
            MetaKey::Hour => "meta hour",
            MetaKey::Day => "meta day",
            MetaKey::Time => "meta time",
        }),
        Expr::Payload(f) => out.push_str(f.def().text),
        Expr::Ct(k) => out.push_str(match k {
            CtKey::State => "ct state",
            CtKey::Status => "ct status",
            CtKey::Mark => "ct mark",
        }),
        Expr::FibDaddrType => out.push_str("fib daddr type"),
        Expr::CtOriginal(k) => out.push_str(match k {
            CtOrigKey::IpDaddr => "ct original ip daddr",
            CtOrigKey::Ip6Daddr => "ct original ip6 daddr",
            CtOrigKey::ProtoDst => "ct original proto-dst",
        }),
        Expr::Numgen { modulus, offset } => {
            let _ = write!(out, "numgen random mod {modulus}");
            if *offset != 0 {
                let _ = write!(out, " offset {offset}");
            }
        }
        Expr::Jhash {
            input,
            modulus,
            seed,
            offset,
        } => {
            out.push_str("jhash ");
            render_expr(out, input);
            let _ = write!(out, " mod {modulus} seed 0x{seed:x}");
            if *offset != 0 {
                let _ = write!(out, " offset {offset}");
            }
        }
        Expr::Concat(parts) => {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(" . ");
                }
                render_expr(out, p);
            }
        }
        Expr::Bitwise { input, mask, xor } => {
            // Parenthesized, so it stays one operand inside a concatenation.
            out.push('(');
            render_expr(out, input);
            out.push_str(" & ");
            render_bytes_as(out, input, mask);
            if xor.iter().any(|b| *b != 0) {
                out.push_str(" | ");
                render_bytes_as(out, input, xor);
            }
            out.push(')');
        }
    }
}

/// Bytes as a constant of `like`'s type: an address for an address field, else hex.
fn render_bytes_as(out: &mut String, like: &Expr, bytes: &[u8]) {
    match (
        like.byte_len(),
        <[u8; 4]>::try_from(bytes),
        <[u8; 16]>::try_from(bytes),
    ) {
        (4, Ok(b), _) if matches!(like, Expr::Payload(_)) => {
            let _ = write!(out, "{}", std::net::Ipv4Addr::from(b));
        }
        (16, _, Ok(b)) => {
            let _ = write!(out, "{}", std::net::Ipv6Addr::from(b));
        }
        _ => {
            out.push_str("0x");
            for b in bytes {
                let _ = write!(out, "{b:02x}");
            }
        }
    }
}

/// Renders a constant.
pub fn render_value(out: &mut String, v: &Value) {
    match v {
        Value::Ipv4(a) => {
            let _ = write!(out, "{a}");
        }
        Value::Ipv6(a) => {
            let _ = write!(out, "{a}");
        }
        Value::Port(p) => {
            let _ = write!(out, "{p}");
        }
        Value::Proto(p) => match p {
            6 => out.push_str("tcp"),
            17 => out.push_str("udp"),
            1 => out.push_str("icmp"),
            p => {
                let _ = write!(out, "{p}");
            }
        },
        Value::IfName(n) => {
            let _ = write!(out, "\"{n}\"");
        }
        Value::Mark(m) => {
            let _ = write!(out, "{m}");
        }
        Value::IcmpType(t) => match icmp_type_name(*t) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "{t}");
            }
        },
        Value::Icmpv6Type(t) => match icmpv6_type_name(*t) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "{t}");
            }
        },
        Value::Verdict(v) => render_verdict(out, v),
        Value::CtState(bits) => render_bits(
            out,
            *bits,
            &[
                (CT_STATE_INVALID, "invalid"),
                (CT_STATE_ESTABLISHED, "established"),
                (CT_STATE_RELATED, "related"),
                (CT_STATE_NEW, "new"),
                (CT_STATE_UNTRACKED, "untracked"),
            ],
        ),
        Value::CtStatus(bits) => render_bits(
            out,
            *bits,
            &[(CT_STATUS_SNAT, "snat"), (CT_STATUS_DNAT, "dnat")],
        ),
        Value::TcpFlags(bits) => render_bits(
            out,
            u32::from(*bits),
            &[
                (u32::from(TCP_FIN), "fin"),
                (u32::from(TCP_SYN), "syn"),
                (u32::from(TCP_RST), "rst"),
                (0x08, "psh"),
                (u32::from(TCP_ACK), "ack"),
            ],
        ),
        Value::AddrType(t) => match *t {
            ADDRTYPE_LOCAL => out.push_str("local"),
            1 => out.push_str("unicast"),
            3 => out.push_str("broadcast"),
            5 => out.push_str("multicast"),
            t => {
                let _ = write!(out, "{t}");
            }
        },
        // nft reads these in its own time zone: the text loads to the same rule with
        // `TZ=UTC` (see docs/policy.md, "Time rules").
        Value::Hour(s) => {
            let _ = write!(out, "\"{}\"", calendar::format_time_of_day(*s));
        }
        Value::Day(d) => {
            let name = calendar::WEEKDAYS.get(usize::from(*d)).unwrap_or(&"?");
            let _ = write!(out, "\"{name}\"");
        }
        Value::Time(ns) => {
            let secs = (ns / 1_000_000_000) as i64;
            let _ = write!(out, "\"{}\"", calendar::format_date_time(secs));
        }
        Value::Concat(parts) => {
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(" . ");
                }
                render_value(out, p);
            }
        }
        Value::Field(f, n) => match f.def().numeric.and_then(|num| num.name(*n)) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "{n}");
            }
        },
    }
}

fn render_bits(out: &mut String, bits: u32, names: &[(u32, &str)]) {
    let mut first = true;
    for (bit, name) in names {
        if bits & bit != 0 {
            if !first {
                out.push(',');
            }
            out.push_str(name);
            first = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(low: Vec<Value>, high: Vec<Value>) -> String {
        let mut out = String::new();
        render_element(
            &mut out,
            &Element::key(ElemKey::Range(Value::Concat(low), Value::Concat(high))),
        );
        out
    }

    #[test]
    fn a_concatenated_interval_element_renders_each_field_as_nft_lists_it() {
        let v4 = |s: &str| Value::Ipv4(s.parse().unwrap());
        let v6 = |s: &str| Value::Ipv6(s.parse().unwrap());
        assert_eq!(
            rendered(
                vec![v4("10.0.0.0"), v4("192.0.2.7"), Value::Port(80)],
                vec![v4("10.0.0.255"), v4("192.0.2.7"), Value::Port(80)]
            ),
            "10.0.0.0/24 . 192.0.2.7 . 80"
        );
        assert_eq!(
            rendered(
                vec![v6("::"), v4("0.0.0.0"), Value::Port(1)],
                vec![
                    v6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
                    v4("255.255.255.255"),
                    Value::Port(1024)
                ]
            ),
            "::/0 . 0.0.0.0/0 . 1-1024"
        );
        // A span that is no one prefix stays a range.
        assert_eq!(
            rendered(
                vec![v4("10.0.0.1"), Value::Port(80)],
                vec![v4("10.0.0.2"), Value::Port(80)]
            ),
            "10.0.0.1-10.0.0.2 . 80"
        );
    }
}
