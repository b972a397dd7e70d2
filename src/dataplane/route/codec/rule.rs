//! Routing rules (`struct fib_rule_hdr` and its attributes): `RTM_NEWRULE`/`RTM_DELRULE`
//! requests from a [`RuleSpec`], the `RTM_GETRULE` dump request, and a dumped rule back to its
//! spec.

use ipnet::IpNet;

use super::header::{self, NLM_F_DUMP};
use super::nla::{Attrs, as_addr, as_string, as_u8, as_u32, put_addr, put_attr, put_attr_u32};
use super::nla::{put_string, put_u32};
use super::route::header_table;
use super::{AF_INET, AF_INET6, Malformed};
use crate::dataplane::route::spec::{Family, RuleAction, RuleSpec};

/// `RTM_NEWRULE`.
pub const RTM_NEWRULE: u16 = 32;
/// `RTM_DELRULE`.
pub const RTM_DELRULE: u16 = 33;
/// `RTM_GETRULE`.
pub const RTM_GETRULE: u16 = 34;
const FIB_RULE_HDR_LEN: usize = 12;
const FRA_DST: u16 = 1;
const FRA_SRC: u16 = 2;
const FRA_IIFNAME: u16 = 3;
const FRA_PRIORITY: u16 = 6;
const FRA_FWMARK: u16 = 10;
const FRA_TABLE: u16 = 15;
const FRA_FWMASK: u16 = 16;
const FRA_OIFNAME: u16 = 17;
const FRA_PROTOCOL: u16 = 21;
/// `FR_ACT_TO_TBL`: look up a table.
const FR_ACT_TO_TBL: u8 = 1;

fn family_byte(family: Family) -> u8 {
    match family {
        Family::Ipv4 => AF_INET,
        Family::Ipv6 => AF_INET6,
    }
}

/// Appends the `RTM_NEWRULE` (`flags`: e.g. exclusive) or `RTM_DELRULE` request for `spec`.
/// A delete matches every attribute given, the protocol included, so it never removes another
/// owner's rule.
pub fn put(buf: &mut Vec<u8>, kind: u16, spec: &RuleSpec, flags: u16, seq: u32) {
    let start = header::begin(buf, kind, flags, seq);
    let action = match spec.action {
        RuleAction::Lookup => FR_ACT_TO_TBL,
        RuleAction::Other(a) => a,
    };
    buf.extend_from_slice(&[
        family_byte(spec.family),
        spec.to.map_or(0, |n| n.prefix_len()),
        spec.from.map_or(0, |n| n.prefix_len()),
        0,
        header_table(spec.table),
        0,
        0,
        action,
    ]);
    put_u32(buf, 0);
    put_attr_u32(buf, FRA_PRIORITY, spec.priority);
    if let Some(from) = spec.from {
        put_addr(buf, FRA_SRC, from.addr());
    }
    if let Some(to) = spec.to {
        put_addr(buf, FRA_DST, to.addr());
    }
    if let Some(iif) = &spec.iif {
        put_string(buf, FRA_IIFNAME, iif);
    }
    if let Some(oif) = &spec.oif {
        put_string(buf, FRA_OIFNAME, oif);
    }
    if let Some(mark) = spec.fwmark {
        put_attr_u32(buf, FRA_FWMARK, mark);
    }
    if let Some(mask) = spec.fwmask {
        put_attr_u32(buf, FRA_FWMASK, mask);
    }
    if spec.action == RuleAction::Lookup {
        put_attr_u32(buf, FRA_TABLE, spec.table);
    }
    put_attr(buf, FRA_PROTOCOL, &[spec.protocol]);
    header::end(buf, start);
}

/// Appends the `RTM_GETRULE` dump request for `family` (the kernel cannot filter rule dumps).
pub fn put_dump(buf: &mut Vec<u8>, family: Family, seq: u32) {
    let start = header::begin(buf, RTM_GETRULE, NLM_F_DUMP, seq);
    buf.extend_from_slice(&[family_byte(family), 0, 0, 0, 0, 0, 0, 0]);
    put_u32(buf, 0);
    header::end(buf, start);
}

/// The protocol (`FRA_PROTOCOL`) of a rule message body; 0 (unspecified) when it has none.
pub fn protocol(body: &[u8]) -> Result<u8, Malformed> {
    if body.len() < FIB_RULE_HDR_LEN {
        return Err(Malformed("fib_rule_hdr"));
    }
    for attr in Attrs::new(&body[FIB_RULE_HDR_LEN..]) {
        let (kind, value) = attr?;
        if kind == FRA_PROTOCOL {
            return as_u8(value);
        }
    }
    Ok(0)
}

/// The spec of a dumped rule (an `RTM_NEWRULE` body), normalized; `None` for a family other
/// than IPv4/IPv6.
pub fn parse(body: &[u8]) -> Result<Option<RuleSpec>, Malformed> {
    if body.len() < FIB_RULE_HDR_LEN {
        return Err(Malformed("fib_rule_hdr"));
    }
    let family = match body[0] {
        AF_INET => Family::Ipv4,
        AF_INET6 => Family::Ipv6,
        _ => return Ok(None),
    };
    let (dst_len, src_len) = (body[1], body[2]);
    let mut spec = RuleSpec::new(family, 0, u32::from(body[4]), 0);
    spec.action = match body[7] {
        FR_ACT_TO_TBL => RuleAction::Lookup,
        other => RuleAction::Other(other),
    };
    let prefix = |value: &[u8], len: u8| -> Result<IpNet, Malformed> {
        IpNet::new(as_addr(value)?, len).map_err(|_| Malformed("rule prefix length"))
    };
    for attr in Attrs::new(&body[FIB_RULE_HDR_LEN..]) {
        let (kind, value) = attr?;
        match kind {
            FRA_PRIORITY => spec.priority = as_u32(value)?,
            FRA_SRC => spec.from = Some(prefix(value, src_len)?),
            FRA_DST => spec.to = Some(prefix(value, dst_len)?),
            FRA_IIFNAME => spec.iif = Some(as_string(value)?),
            FRA_OIFNAME => spec.oif = Some(as_string(value)?),
            FRA_FWMARK => spec.fwmark = Some(as_u32(value)?),
            FRA_FWMASK => spec.fwmask = Some(as_u32(value)?),
            FRA_TABLE => spec.table = as_u32(value)?,
            FRA_PROTOCOL => spec.protocol = as_u8(value)?,
            _ => {}
        }
    }
    if spec.action != RuleAction::Lookup {
        spec.table = 0;
    }
    Ok(Some(spec.normalized()))
}
