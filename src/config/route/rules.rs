//! `[[route_rule]]` entries: routing policy rules, each validated on its own, then checked
//! against the rules before it in the kernel's terms (a rule defined twice names both places).

use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::model::{RouteRule, RuleFamily};
use super::raw::RawRule;
use super::values::{family_name, ifname, kernel_mark, mark, number, table};

/// Validates every rule and drops (with an error) each one equal to an earlier one. Rules are
/// compared after validation, which spells each value one way (marks in the kernel's terms,
/// tables as numbers, families as decided), so `"16"` and `"0x10/0xffffffff"` are one mark.
pub(super) fn validate_rules(
    raws: Vec<Spanned<RawRule>>,
    diags: &mut Diagnostics,
) -> Vec<RouteRule> {
    let mut seen: Vec<(RouteRule, Range<usize>)> = Vec::new();
    for item in raws {
        let span = item.span();
        let errors_before = diags.len();
        let rule = validate_rule(item.into_inner(), diags);
        let Some(rule) = rule.filter(|_| diags.len() == errors_before) else {
            continue;
        };
        if let Some((_, first)) = seen.iter().find(|(r, _)| *r == rule) {
            diags.error_also(
                span,
                "this route_rule is defined twice",
                first.clone(),
                "first defined here",
            );
            continue;
        }
        seen.push((rule, span));
    }
    seen.into_iter().map(|(rule, _)| rule).collect()
}

fn validate_rule(raw: RawRule, diags: &mut Diagnostics) -> Option<RouteRule> {
    let priority = number(&raw.priority, 1..=i64::from(u32::MAX), "priority", diags)? as u32;
    let from = prefix(raw.from.as_ref(), diags);
    let to = prefix(raw.to.as_ref(), diags);
    let explicit = explicit_family(raw.family.as_ref(), diags)?;
    let family = decide_family(explicit, raw.family.as_ref(), [&from, &to], diags);
    let iif = raw.iif.as_ref().and_then(|d| ifname(d, diags));
    let oif = raw.oif.as_ref().and_then(|d| ifname(d, diags));
    let fwmark = raw
        .fwmark
        .as_ref()
        .and_then(|m| mark(m, diags))
        .and_then(kernel_mark);
    let table = table(&raw.table, diags)?;
    Some(RouteRule {
        priority,
        family,
        from: from.map(|(n, _)| n),
        to: to.map(|(n, _)| n),
        iif,
        oif,
        fwmark,
        table,
    })
}

/// A rule's `from` or `to`, with the key's name and place (they decide the family).
type Prefix = Option<(IpNet, Range<usize>, &'static str)>;

fn prefix(p: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<(IpNet, Range<usize>)> {
    let p = p?;
    parse_prefix(p.get_ref())
        .map(|net| (net, p.span()))
        .map_err(|msg| diags.error(p.span(), msg))
        .ok()
}

/// `family = ...` as written: `Some(None)` when absent, `None` when invalid.
fn explicit_family(
    raw: Option<&Spanned<String>>,
    diags: &mut Diagnostics,
) -> Option<Option<RuleFamily>> {
    match raw.map(|f| (f.span(), f.get_ref().as_str())) {
        None => Some(None),
        Some((_, "ipv4")) => Some(Some(RuleFamily::Ipv4)),
        Some((_, "ipv6")) => Some(Some(RuleFamily::Ipv6)),
        Some((_, "both")) => Some(Some(RuleFamily::Both)),
        Some((span, other)) => {
            diags.error(
                span,
                format!("unknown family `{other}`: expected `ipv4`, `ipv6` or `both`"),
            );
            None
        }
    }
}

/// The rule's families: `family` if given, else the first prefix's; a prefix of another
/// family than what decided is an error at it, with a note where the family was decided.
fn decide_family(
    explicit: Option<RuleFamily>,
    family_key: Option<&Spanned<String>>,
    [from, to]: [&Option<(IpNet, Range<usize>)>; 2],
    diags: &mut Diagnostics,
) -> RuleFamily {
    let mut family = explicit.unwrap_or(RuleFamily::Both);
    let mut decided_by: Option<(Range<usize>, &str)> = family_key.map(|f| (f.span(), "family"));
    let prefixes: [Prefix; 2] = [
        from.clone().map(|(n, s)| (n, s, "from")),
        to.clone().map(|(n, s)| (n, s, "to")),
    ];
    for (net, span, key) in prefixes.into_iter().flatten() {
        let f = match net {
            IpNet::V4(_) => RuleFamily::Ipv4,
            IpNet::V6(_) => RuleFamily::Ipv6,
        };
        match &decided_by {
            Some((first, what)) if family != f => diags.error_also(
                span,
                format!(
                    "`{key}` is {} but the rule's {what} is not",
                    family_name(&net)
                ),
                first.clone(),
                "family decided here",
            ),
            _ => {
                family = f;
                decided_by = Some((span, key));
            }
        }
    }
    family
}
