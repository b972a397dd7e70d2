//! `[[policy.rule]]` entries: the action, the mark, the rate and the log (the keys that
//! select packets are [`RuleMatch`]'s), and the port and ICMP type values rules and port
//! forwards share.

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::matches::mark_set;
use super::model::*;
use super::raw::*;
use super::rule_match::RuleMatch;
use crate::names::{icmp_type_by_name, icmpv6_type_by_name};

pub(super) fn parse_port(text: &str) -> Option<u16> {
    text.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

pub(super) fn port_range(p: &Spanned<RawPort>, diags: &mut Diagnostics) -> Option<(u16, u16)> {
    let bad = |diags: &mut Diagnostics| {
        diags.error(
            p.span(),
            "invalid port: expected a number 1-65535 or a range \"from-to\", e.g. 22 or \"8000-8100\"",
        );
        None
    };
    match p.get_ref() {
        RawPort::Number(n) => match u16::try_from(*n) {
            Ok(n) if n > 0 => Some((n, n)),
            _ => bad(diags),
        },
        RawPort::Text(t) => {
            let (a, b) = t.split_once('-').unwrap_or((t, t));
            match (parse_port(a), parse_port(b)) {
                (Some(a), Some(b)) if a <= b => Some((a, b)),
                _ => bad(diags),
            }
        }
    }
}

pub(super) fn icmp_type(
    p: &Spanned<RawPort>,
    protocol: Protocol,
    diags: &mut Diagnostics,
) -> Option<u8> {
    let found = match p.get_ref() {
        RawPort::Number(n) => u8::try_from(*n).ok(),
        RawPort::Text(t) if protocol == Protocol::Icmpv6 => icmpv6_type_by_name(t),
        RawPort::Text(t) => icmp_type_by_name(t),
    };
    if found.is_none() {
        diags.error(
            p.span(),
            "invalid ICMP type: expected a number 0-255 or a name such as \"echo-request\"",
        );
    }
    found
}

/// A verdict by name.
pub(super) fn parse_action(s: &str) -> Option<Action> {
    match s {
        "accept" => Some(Action::Accept),
        "drop" => Some(Action::Drop),
        "reject" => Some(Action::Reject),
        _ => None,
    }
}

pub(super) fn parse_limit(text: &str) -> Option<Rate> {
    let (n, unit) = text.split_once('/')?;
    let count: u64 = n.trim().parse().ok().filter(|c| *c > 0)?;
    let per_seconds = match unit.trim() {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86400,
        _ => return None,
    };
    Some(Rate { count, per_seconds })
}

pub(super) fn validate_rule(
    raw: RawRule,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<PolicyRule> {
    // Every step reports its own problems; the rule is kept only when all of them passed.
    let matches = RuleMatch::parse(&raw, cfg, diags);
    let set_mark = rule_mark(&raw, diags);
    let set_dscp = set_dscp(raw.set_dscp.as_ref(), diags);
    let marking = mark_place(&raw, diags);
    let notrack = raw.action.as_ref().is_some_and(|a| a.get_ref() == NOTRACK);
    let alone = !notrack || notrack_alone(&raw, diags);
    let action = match notrack {
        true => Some(None),
        false => action(raw.action.as_ref(), diags),
    };
    let log_limit = limit("log_limit", raw.log_limit.as_ref(), diags);
    let limit = limit("limit", raw.limit.as_ref(), diags);
    let log_prefix = log_prefix(raw.log_prefix.as_ref(), diags);
    // The test hook goes to the fault module's side table, not into the rule.
    crate::fault_hook!(
        crate::fault::kernel_reject::refuse_rule(raw.name.get_ref(), raw.inject_kernel_reject),
        ()
    );
    let (matches, limit, log_prefix, set_mark) = (matches?, limit?, log_prefix?, set_mark?);
    let set_dscp = set_dscp?;
    let (action, log_limit) = (action?, log_limit?);
    if !marking || !alone || !matches.can_match(&raw.name, cfg, diags) {
        return None;
    }
    Some(PolicyRule {
        name: raw.name.into_inner(),
        matches,
        set_mark,
        set_dscp,
        action,
        log: raw.log || log_prefix.is_some() || log_limit.is_some(),
        log_prefix,
        log_limit,
        limit,
        notrack,
    })
}

/// The `action` of fw4's `NOTRACK` target.
const NOTRACK: &str = "notrack";

/// A notrack rule runs before conntrack and routing, in a raw chain: it selects packets by
/// what is known there and does nothing but exempt them. False when it is asked for more
/// (each key reported at its place).
fn notrack_alone(raw: &RawRule, diags: &mut Diagnostics) -> bool {
    let why = "a notrack rule only exempts packets from connection tracking, before routing";
    let mut alone = true;
    if let Some(to) = &raw.to {
        diags.error(
            to.span(),
            format!("{why}, when their way out is not known yet: expected no `to` (select destinations with `to_addresses`)"),
        );
        alone = false;
    }
    let spans = [
        ("set_mark", raw.set_mark.as_ref().map(|k| k.span())),
        ("set_xmark", raw.set_xmark.as_ref().map(|k| k.span())),
        ("set_dscp", raw.set_dscp.as_ref().map(|k| k.span())),
        ("limit", raw.limit.as_ref().map(|k| k.span())),
        ("log_limit", raw.log_limit.as_ref().map(|k| k.span())),
        ("log_prefix", raw.log_prefix.as_ref().map(|k| k.span())),
    ];
    for (key, span) in spans {
        if let Some(span) = span {
            diags.error(span, format!("{why}: expected no `{key}`"));
            alone = false;
        }
    }
    if raw.log {
        diags.error(raw.name.span(), format!("{why}: expected no `log`"));
        alone = false;
    }
    alone
}

/// The rule's `action`: `Some(None)` when absent (the rule only counts, logs or marks, and
/// evaluation goes on: fw4's rule without `target`), `None` when invalid (reported).
fn action(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Option<Action>> {
    match raw {
        Some(a) => rule_action(a, diags).map(Some),
        None => Some(None),
    }
}

/// The rule's `set_mark` or `set_xmark` (one of them: both is an error at the second).
fn rule_mark(raw: &RawRule, diags: &mut Diagnostics) -> Option<Option<MarkSet>> {
    let set = mark_set(raw.set_mark.as_ref(), false, diags);
    let xset = mark_set(raw.set_xmark.as_ref(), true, diags);
    if let (Some(_), Some(x)) = (&raw.set_mark, &raw.set_xmark) {
        diags.error(
            x.span(),
            "a rule has one mark change: expected `set_mark` or `set_xmark`, not both",
        );
        return None;
    }
    Some(set?.or(xset?))
}

/// A rule with `set_mark` (or `set_xmark`) marks in prerouting, before routing: it cannot
/// select the outgoing zone (`to`), nor the router's own traffic. False when that is asked
/// (reported).
fn mark_place(raw: &RawRule, diags: &mut Diagnostics) -> bool {
    let (key, mark) = match (&raw.set_mark, &raw.set_xmark) {
        (Some(m), _) => ("set_mark", m),
        (None, Some(m)) => ("set_xmark", m),
        (None, None) => return true,
    };
    if let Some(to) = &raw.to {
        diags.error(
            to.span(),
            format!("a rule with `{key}` marks packets before routing, when their way out is not known yet: expected no `to` (select destinations with `to_addresses`)"),
        );
        return false;
    }
    // `from = "self"`, the one spelling of [`Source::Router`].
    if matches!(raw.from.as_ref().map(|f| f.get_ref()), Some(RawFrom::One(s)) if s == "self") {
        diags.error(
            mark.span(),
            format!("`{key}` marks packets arriving at the router (prerouting): expected a `from` other than \"self\""),
        );
        return false;
    }
    true
}

/// `set_dscp`: a number 0-63 or a DSCP name (`"af41"`, `"ef"`, any case). `Some(None)` when
/// absent, `None` when invalid (reported at the value).
fn set_dscp(raw: Option<&Spanned<RawPort>>, diags: &mut Diagnostics) -> Option<Option<u8>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let (found, shown) = match raw.get_ref() {
        RawPort::Number(n) => (u8::try_from(*n).ok().filter(|d| *d <= 63), n.to_string()),
        RawPort::Text(t) => (crate::names::dscp_by_name(t.trim()), format!("\"{t}\"")),
    };
    if found.is_none() {
        diags.error(
            raw.span(),
            format!(
                "invalid set_dscp {shown}: expected a number 0-63 or a name: cs0-cs7, af11-af43, ef, le, va"
            ),
        );
        return None;
    }
    Some(found)
}

fn rule_action(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<Action> {
    let action = parse_action(raw.get_ref());
    if action.is_none() {
        diags.error(
            raw.span(),
            format!(
                "invalid action `{}`: expected \"accept\", \"drop\", \"reject\" or \"notrack\"",
                raw.get_ref()
            ),
        );
    }
    action
}

/// A rate key (`limit`, `log_limit`): `Some(None)` when absent, `None` when invalid
/// (reported).
pub(super) fn limit(
    key: &str,
    raw: Option<&Spanned<String>>,
    diags: &mut Diagnostics,
) -> Option<Option<Rate>> {
    let Some(l) = raw else {
        return Some(None);
    };
    let rate = parse_limit(l.get_ref());
    if rate.is_none() {
        diags.error(
            l.span(),
            format!("invalid {key} `{}`: expected \"<count>/<second|minute|hour|day>\", e.g. \"10/second\"", l.get_ref()),
        );
    }
    rate.map(Some)
}

/// The longest log prefix the kernel keeps (NF_LOG_PREFIXLEN is 128 with the NUL).
const LOG_PREFIX_MAX: usize = 127;

/// `log_prefix`: `Some(None)` when absent, `None` when invalid (reported).
fn log_prefix(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Option<String>> {
    let Some(p) = raw else {
        return Some(None);
    };
    let text = p.get_ref();
    let printable = text
        .chars()
        .all(|c| (' '..='~').contains(&c) && c != '"' && c != '\\');
    if text.is_empty() || text.len() > LOG_PREFIX_MAX || !printable {
        diags.error(
            p.span(),
            format!("invalid log_prefix `{text}`: expected 1-{LOG_PREFIX_MAX} printable ASCII characters, no `\"` or `\\`"),
        );
        return None;
    }
    Some(Some(text.clone()))
}
