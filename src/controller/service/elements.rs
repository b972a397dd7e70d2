//! The elements that stand for a model, as a stream (for a cold install's batch) or a whole
//! table (for text), and the way back from an element to its service.

use std::collections::BTreeMap;

use crate::dataplane::nft::ir::{Element, Table};
use crate::dataplane::nft::{Batch, Op, TableRef, text};

use super::layout::{self, SetId};
use super::model::{Model, VipKey};
use super::plan::{ServiceChange, all_slots, shared_refs};

/// The entry an element belongs to; `None` for shared and prefix elements.
pub(super) fn vip_of(set: SetId, el: &Element) -> Option<VipKey> {
    use crate::config::service::Protocol;
    use crate::dataplane::nft::ir::{ElemKey, Value};
    if set.role() != layout::SetRole::Entry {
        return None;
    }
    let ElemKey::Value(Value::Concat(parts)) = &el.key else {
        return None;
    };
    // `ranges` and `hosts` keys start with the source, then the entry's address.
    let parts = if matches!(
        set,
        SetId::Ranges4 | SetId::Ranges6 | SetId::Hosts4 | SetId::Hosts6
    ) {
        &parts[1..]
    } else {
        &parts[..]
    };
    let addr = match parts.first()? {
        Value::Ipv4(a) => (*a).into(),
        Value::Ipv6(a) => (*a).into(),
        _ => return None,
    };
    let Value::Proto(number) = parts.get(1)? else {
        return None;
    };
    let proto = Protocol::from_number(*number)?;
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
            None => "shared".into(),
        },
        ..Default::default()
    })
}

/// Every element of `model`, set by set, in model order.
pub(super) fn each_element(model: &Model, mut f: impl FnMut(SetId, Element)) {
    for (k, e) in model.iter() {
        for (s, el) in layout::entry_elements(k, e) {
            f(s, el);
        }
        for (slot, b) in all_slots(e) {
            let (s, el) = layout::slot_element(k, slot, b);
            f(s, el);
        }
    }
    for m in shared_refs(model).keys() {
        let (s, el) = m.element();
        f(s, el);
    }
    for n in &model.cluster_cidrs {
        let (s, el) = layout::cidr_element(true, *n);
        f(s, el);
    }
    for n in &model.service_cidrs {
        let (s, el) = layout::cidr_element(false, *n);
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
    // Up to a chunk per set is held as IR beside the batch: at 2,000 that was 1.2 MB of a
    // 5,000-Service install's peak (issue 24); a message per 256 elements costs nothing.
    const CHUNK: usize = 256;
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
    let mut t = layout::skeleton_with(name, &super::model::on_demand(model), local);
    each_element(model, |s, el| t.sets[s.index()].elements.push(el));
    t
}

/// The table as loadable `nft -f` text (the renderer declares the `backends` maps, looked
/// up with a numgen/jhash slot, with `typeof`).
pub fn render_text(table: &Table) -> String {
    text::render_table(table)
}
