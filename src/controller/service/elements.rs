//! The elements that stand for a model, as a stream (for a cold install's batch) or a whole
//! table (for text), and the way back from an element to its service.

use std::collections::BTreeMap;

use crate::dataplane::nft::ir::{Element, Table};
use crate::dataplane::nft::{Batch, Op, TableRef, render};

use super::layout::{self, SetId};
use super::model::{Model, VipKey};
use super::plan::{ServiceChange, masq_refs};

pub(super) fn vip_of(set: SetId, el: &Element) -> Option<VipKey> {
    use crate::config::service::Protocol;
    use crate::dataplane::nft::ir::{ElemKey, Value};
    if matches!(set, SetId::Masquerade4 | SetId::Masquerade6) {
        return None;
    }
    let ElemKey::Value(Value::Concat(parts)) = &el.key else {
        return None;
    };
    let addr = match parts.first()? {
        Value::Ipv4(a) => (*a).into(),
        Value::Ipv6(a) => (*a).into(),
        _ => return None,
    };
    let proto = match parts.get(1)? {
        Value::Proto(6) => Protocol::Tcp,
        Value::Proto(17) => Protocol::Udp,
        _ => return None,
    };
    let Value::Port(port) = parts.get(2)? else {
        return None;
    };
    Some(VipKey {
        addr,
        proto,
        port: *port,
    })
}

pub(super) fn group<'a>(
    groups: &'a mut BTreeMap<Option<VipKey>, ServiceChange>,
    key: Option<VipKey>,
    desired: &Model,
) -> &'a mut ServiceChange {
    groups.entry(key).or_insert_with(|| ServiceChange {
        key,
        name: match key {
            Some(k) => desired
                .get(&k)
                .map(|e| e.name.clone())
                .unwrap_or_else(|| "(removed)".into()),
            None => "masquerade".into(),
        },
        ..Default::default()
    })
}

/// Every element of `model`, set by set, in model order.
pub(super) fn each_element(model: &Model, mut f: impl FnMut(SetId, Element)) {
    for (k, e) in model {
        let (s, el) = layout::service_element(k, e);
        f(s, el);
        if let Some((s, el)) = layout::sticky_vip_element(k, e) {
            f(s, el);
        }
        if let super::model::Action::Balance { slots, .. } = &e.action {
            for (i, b) in slots.iter().enumerate() {
                let (s, el) = layout::slot_element(k, i as u32, *b);
                f(s, el);
            }
        }
    }
    for m in masq_refs(model).keys() {
        let (s, el) = layout::masquerade_element(m);
        f(s, el);
    }
}

/// Adds every element of `model` to `batch` in chunks, so a cold install never holds all of
/// them as IR at once. Returns the element count.
pub(super) fn stream_elements(
    batch: &mut Batch,
    table: &TableRef,
    model: &Model,
) -> Result<usize, crate::dataplane::nft::CompileError> {
    const CHUNK: usize = 2000;
    let defs: Vec<_> = SetId::ALL.iter().map(|s| s.definition()).collect();
    let mut pending: Vec<Vec<Element>> = vec![Vec::new(); SetId::ALL.len()];
    let mut count = 0;
    let mut result = Ok(());
    each_element(model, |s, el| {
        count += 1;
        let list = &mut pending[s.index()];
        list.push(el);
        if list.len() >= CHUNK && result.is_ok() {
            result = batch.elements(table, &defs[s.index()], list, Op::Add);
            list.clear();
        }
    });
    result?;
    for (i, list) in pending.iter().enumerate() {
        if !list.is_empty() {
            batch.elements(table, &defs[i], list, Op::Add)?;
        }
    }
    Ok(count)
}

/// The skeleton with every desired element and the loopback exemption `local` (the text a
/// cold install is equivalent to).
pub fn full_table(name: &str, model: &Model, local: Option<super::local::Local>) -> Table {
    let mut t = layout::skeleton_with(name, &super::model::recorders(model), local);
    each_element(model, |s, el| t.sets[s.index()].elements.push(el));
    t
}

/// The table as loadable `nft -f` text (the renderer declares the `backends` maps, looked
/// up with a numgen/jhash slot, with `typeof`).
pub fn render_text(table: &Table) -> String {
    render::render_table(table)
}
