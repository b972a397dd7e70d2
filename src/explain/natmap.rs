//! `dnat to <key> map @map`: the target comes from a map. When the key holds a `numgen` or
//! `jhash` slot (a service's backends), every slot is looked up and each target's share
//! reported; the path goes on with the first slot's target (the kernel's pick is random, or
//! a hash of the client's address).

use std::net::IpAddr;

use crate::dataplane::nft::ir::*;

use super::error::ExplainError;
use super::eval::{Final, Flow, Run, Trace, apply_nat};
use super::packet::Packet;
use super::values::load;

/// Where the slot sits in a key, and its range.
struct Slot {
    /// Index in the concatenation (`None`: the key is the slot).
    at: Option<usize>,
    /// First slot.
    offset: u32,
    /// Number of slots.
    modulus: u32,
}

fn slot_of(key: &Expr) -> Option<Slot> {
    let range = |e: &Expr| match e {
        Expr::Numgen { modulus, offset }
        | Expr::Jhash {
            modulus, offset, ..
        } => Some((*offset, *modulus)),
        _ => None,
    };
    if let Some((offset, modulus)) = range(key) {
        return Some(Slot {
            at: None,
            offset,
            modulus,
        });
    }
    let Expr::Concat(parts) = key else {
        return None;
    };
    parts.iter().enumerate().find_map(|(i, p)| {
        range(p).map(|(offset, modulus)| Slot {
            at: Some(i),
            offset,
            modulus,
        })
    })
}

/// The key values to look up: one, or one per slot.
fn keys(key: &Expr, pkt: &Packet, run: &Run) -> Result<Option<Vec<Value>>, ExplainError> {
    let Some(slot) = slot_of(key) else {
        return Ok(load(key, pkt, run.local)?.map(|v| vec![v]));
    };
    let fixed = match (&slot.at, key) {
        (Some(at), Expr::Concat(parts)) => {
            let mut vals = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                if i == *at {
                    vals.push(Value::Mark(0));
                    continue;
                }
                match load(p, pkt, run.local)? {
                    Some(v) => vals.push(v),
                    None => return Ok(None),
                }
            }
            Some((*at, vals))
        }
        _ => None,
    };
    let slots = slot.offset..slot.offset.saturating_add(slot.modulus);
    Ok(Some(
        slots
            .map(|s| match &fixed {
                Some((at, vals)) => {
                    let mut vals = vals.clone();
                    vals[*at] = Value::Mark(s);
                    Value::Concat(vals)
                }
                None => Value::Mark(s),
            })
            .collect(),
    ))
}

/// A map's data as (address, port).
fn target(data: &Value) -> Option<(IpAddr, Option<u16>)> {
    match data {
        Value::Ipv4(a) => Some(((*a).into(), None)),
        Value::Ipv6(a) => Some(((*a).into(), None)),
        Value::Concat(parts) => match parts.as_slice() {
            [addr, Value::Port(p)] => target(addr).map(|(a, _)| (a, Some(*p))),
            _ => None,
        },
        _ => None,
    }
}

impl Run<'_> {
    /// `snat|dnat to <key> map @map`: a lookup miss ends the rule unmatched.
    pub(super) fn nat_map(
        &self,
        kind: NatKind,
        key: &Expr,
        map: &SetRef,
        rule: &Rule,
        pkt: &mut Packet,
        trace: &mut Trace,
    ) -> Result<Option<Flow>, ExplainError> {
        let Some(keys) = keys(key, pkt, self)? else {
            return Ok(Some(Flow::Next));
        };
        let total = keys.len() as f64;
        let mut shares: Vec<(IpAddr, Option<u16>, f64)> = Vec::new();
        for k in &keys {
            let Some(Some(data)) = self.lookup(map, k)? else {
                continue;
            };
            let Some((addr, port)) = target(&data) else {
                return Err(ExplainError::Unsupported(format!("NAT map data {data:?}")));
            };
            match shares.iter_mut().find(|(a, p, _)| (*a, *p) == (addr, port)) {
                Some(s) => s.2 += 1.0 / total,
                None => shares.push((addr, port, 1.0 / total)),
            }
        }
        let Some(&(addr, port, _)) = shares.first() else {
            // The lookup missed: the rule does not match (a sticky service's new client).
            return Ok(Some(Flow::Next));
        };
        if keys.len() == 1 {
            shares.clear();
        }
        let event = self.nat_event(kind, rule, Some(addr), port, shares);
        apply_nat(pkt, &event);
        trace.nat.push(event);
        Ok(Some(Flow::End(Final::Accept)))
    }
}
