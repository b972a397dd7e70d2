//! The services part's translation kept Service by Service between parts, so that an
//! EndpointSlice event re-translates its Service alone, not every Service of the cluster
//! (issue 24: the cost of a change grows with what changed).
//!
//! What a Service translates to depends on the Service, the EndpointSlices labelled with its
//! name in its namespace, and what is global to the node: its name, zone and NodePort
//! addresses. The memo keeps each Service's result and which slices belong to which Service;
//! the stores say which keys changed ([`Changes`]), and only the Services those keys touch
//! (a slice's Service before and after the change) are translated again. A change of a
//! global input, or a store that cannot list its changes (a relist), translates everything,
//! which is also what the first part does. The result is the full translation's, entry for
//! entry and in the same order (the differential test holds both equal over random changes).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::config::service::{HealthCheckPort, Service};
use crate::kubernetes::client::{Changes, ObjectKey};
use crate::kubernetes::objects::{self, EndpointSlice};
use crate::kubernetes::order;
use crate::kubernetes::translate::health_ports;
use crate::kubernetes::translate::services::{self, SERVICE_NAME_LABEL, Skipped, ThisNode};

/// One Service's translation.
#[derive(Debug, Clone)]
struct One {
    /// Its entries, in the full translation's order (shared with the parts made from them:
    /// an entry translated once is the same allocation in every later part).
    services: Vec<Arc<Service>>,
    /// What of it was left out.
    skipped: Vec<Skipped>,
    /// Its health-check node port, if it has one.
    health: Option<HealthCheckPort>,
}

/// What every Service's translation reads of the node: a change re-translates everything.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Globals {
    /// This node's Node name.
    name: String,
    /// Its zone label.
    zone: Option<String>,
    /// The NodePort addresses.
    addresses: Vec<IpAddr>,
}

/// One store's objects and which of them changed since the last part.
#[derive(Debug)]
pub struct Changed<'a, T> {
    /// The objects now.
    pub now: &'a BTreeMap<ObjectKey, T>,
    /// Which keys changed since the memo last saw the store.
    pub changes: &'a Changes,
}

/// The services part's translation, as the Services and EndpointSlices stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Translation {
    /// Every entry, ordered by Service, then as the translation orders one Service's.
    pub services: Vec<Arc<Service>>,
    /// What was left out, in the same order.
    pub skipped: Vec<Skipped>,
    /// The health-check node ports, by Service (`<namespace>/<name>`).
    pub health_check_ports: Vec<HealthCheckPort>,
}

/// The memo (see the module docs). Empty at first: the first update translates everything.
#[derive(Debug, Default)]
pub struct ServicesMemo {
    /// The global inputs of the kept results; `None` before the first update.
    globals: Option<Globals>,
    /// Each Service's result, by Service key.
    per: BTreeMap<ObjectKey, One>,
    /// The Service (namespace, `kubernetes.io/service-name`) of each labelled slice.
    owner: BTreeMap<ObjectKey, ObjectKey>,
    /// The labelled slices of each Service key (whether that Service exists or not), sorted.
    /// A sorted list, not a set: a Service has one slice or a few, and a B-tree set of one
    /// key takes a node of eleven (3 MB at 5,000 Services, issue 24).
    slices_of: BTreeMap<ObjectKey, Vec<ObjectKey>>,
    /// Services translated by the last update (for tests and the curious).
    translated: usize,
}

impl ServicesMemo {
    /// The translation after the changes, re-translating only the Services they touch.
    pub fn update(
        &mut self,
        svcs: Changed<'_, Box<objects::Service>>,
        slices: Changed<'_, Box<EndpointSlice>>,
        node: ThisNode<'_>,
    ) -> Translation {
        let globals = Globals {
            name: node.name.to_string(),
            zone: node.zone.map(str::to_string),
            addresses: node.addresses.to_vec(),
        };
        let everything = self.globals.as_ref() != Some(&globals)
            || matches!(svcs.changes, Changes::All)
            || matches!(slices.changes, Changes::All);
        self.translated = 0;
        if everything {
            self.per.clear();
            self.owner.clear();
            self.slices_of.clear();
            for (key, slice) in slices.now {
                self.own(key, slice);
            }
            for (key, svc) in svcs.now {
                self.translate(key, svc, slices.now, node);
            }
            self.globals = Some(globals);
        } else {
            let mut dirty: BTreeSet<ObjectKey> = BTreeSet::new();
            if let Changes::Keys(keys) = slices.changes {
                for key in keys {
                    if let Some(before) = self.owner.remove(key) {
                        if let Some(list) = self.slices_of.get_mut(&before) {
                            list.retain(|k| k != key);
                            if list.is_empty() {
                                self.slices_of.remove(&before);
                            }
                        }
                        dirty.insert(before);
                    }
                    if let Some(slice) = slices.now.get(key) {
                        dirty.extend(self.own(key, slice));
                    }
                }
            }
            if let Changes::Keys(keys) = svcs.changes {
                dirty.extend(keys.iter().cloned());
            }
            for key in dirty {
                match svcs.now.get(&key) {
                    Some(svc) => self.translate(&key, svc, slices.now, node),
                    None => {
                        self.per.remove(&key);
                    }
                }
            }
        }
        self.collect()
    }

    /// How many Services the last update translated.
    pub fn translated(&self) -> usize {
        self.translated
    }

    /// Notes which Service a slice belongs to; returns that Service's key.
    fn own(&mut self, key: &ObjectKey, slice: &EndpointSlice) -> Option<ObjectKey> {
        let name = slice.metadata.labels.get(SERVICE_NAME_LABEL)?;
        let service = (slice.metadata.namespace.clone(), name.clone());
        self.owner.insert(key.clone(), service.clone());
        let list = self.slices_of.entry(service.clone()).or_default();
        if let Err(at) = list.binary_search(key) {
            list.insert(at, key.clone());
        }
        Some(service)
    }

    /// Translates one Service with its slices (in the slices' key order, as the full
    /// translation reads them).
    fn translate(
        &mut self,
        key: &ObjectKey,
        svc: &objects::Service,
        slices: &BTreeMap<ObjectKey, Box<EndpointSlice>>,
        node: ThisNode<'_>,
    ) {
        let own: Vec<&EndpointSlice> = self
            .slices_of
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| slices.get(k).map(|s| &**s))
            .collect();
        let t = services::translate_service(svc, &own, node);
        let health = health_ports::one(svc, &own, node.name);
        self.per.insert(
            key.clone(),
            One {
                services: t.services.into_iter().map(Arc::new).collect(),
                skipped: t.skipped,
                health,
            },
        );
        self.translated += 1;
    }

    /// Every kept result, in the full translation's order.
    fn collect(&self) -> Translation {
        let mut out = Translation::default();
        for one in self.per.values() {
            out.services.extend(one.services.iter().cloned());
            out.skipped.extend(one.skipped.iter().cloned());
            out.health_check_ports.extend(one.health.iter().cloned());
        }
        // Ordered by `<namespace>/<name>`, which is not quite the order of (namespace, name).
        order::sort_by(&mut out.health_check_ports, |a, b| {
            a.service.cmp(&b.service)
        });
        out
    }
}

#[cfg(test)]
mod tests;
