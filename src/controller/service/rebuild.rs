//! The model built again only where the services changed (issue 24): a cluster endpoint
//! change plans the elements of its VIPs, not of every service.
//!
//! An entry is a pure function of its service, the cluster's pod prefixes, the backend
//! checks' verdicts and the entry last committed for its key (whose slots the surviving
//! backends keep; given the same service that is the committed entry itself). So the entry
//! committed for a key is taken again as it is when the service at that key equals the one it
//! was built from, the prefixes are the same, and the service has no backend checks (whose
//! verdicts change without the service changing). Everything else is built anew, and the keys
//! built anew or gone are the only ones the plan compares ([`Mirror::diff_keys`]).
//!
//! The services the committed model was built from are kept only while that model is the
//! mirror's: after a sync that failed, or with no mirror, the next build starts over (every
//! key built, every key compared). The result equals [`model::build_with`]'s (the unit tests
//! hold both equal over random changes).
//!
//! [`Mirror::diff_keys`]: super::plan::Mirror::diff_keys

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use ipnet::IpNet;

use crate::config::service::{BackendCheckKind, Service, ServicesConfig};
use crate::dataplane::nft::intervals::normalize_prefixes;

use super::model::{self, Model, VipKey};

/// What a model was built from.
#[derive(Debug, Clone, Default)]
struct Built {
    /// The service of each key.
    services: BTreeMap<VipKey, Service>,
    /// The cluster's pod prefixes (normalized).
    cluster_cidrs: Vec<IpNet>,
}

/// A model and which of its keys may differ from the previous model's.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    /// The model, equal to [`model::build_with`]'s.
    pub model: Model,
    /// The keys built anew or gone; `None`: every key (nothing was taken again).
    pub changed: Option<BTreeSet<VipKey>>,
}

/// What the last builds were made from (see the module docs).
#[derive(Debug, Default)]
pub struct Memo {
    /// What the mirror's model was built from, when known.
    committed: Option<Built>,
    /// What the last build was made from, until its sync says whether it was committed.
    pending: Option<Built>,
}

/// The key of a service's entry.
fn key_of(s: &Service) -> VipKey {
    VipKey {
        addr: s.address,
        proto: s.protocol,
        port: s.port,
    }
}

impl Memo {
    /// The model of `cfg` (as [`model::build_with`] builds it), taking again the entries of
    /// `previous` (the mirror's model) whose services did not change.
    pub fn build(
        &mut self,
        cfg: &ServicesConfig,
        up: &dyn Fn(&Service, SocketAddr) -> bool,
        previous: Option<&Model>,
    ) -> Rebuilt {
        let cluster_cidrs = normalize_prefixes(cfg.cluster_cidrs.iter().copied());
        let base = self
            .committed
            .take()
            .zip(previous)
            .filter(|(b, _)| b.cluster_cidrs == cluster_cidrs);
        let (mut built, previous_model) = match base {
            Some((b, p)) => (b, Some(p)),
            None => (Built::default(), None),
        };
        built.cluster_cidrs = cluster_cidrs;
        let mut changed = BTreeSet::new();
        let mut entries = BTreeMap::new();
        for s in &cfg.services {
            let key = key_of(s);
            let unchanged = s.backend_check.check == BackendCheckKind::None
                && built.services.get(&key) == Some(s);
            let kept = previous_model
                .filter(|_| unchanged)
                .and_then(|p| p.entries.get(&key));
            let entry = match kept {
                Some(e) => e.clone(),
                None => {
                    changed.insert(key);
                    if built.services.get(&key) != Some(s) {
                        built.services.insert(key, s.clone());
                    }
                    let before = previous.and_then(|m| m.entries.get(&key));
                    model::entry_with(s, &built.cluster_cidrs, up, before)
                }
            };
            entries.insert(key, entry);
        }
        built.services.retain(|k, _| entries.contains_key(k));
        if let Some(p) = previous_model {
            changed.extend(p.entries.keys().filter(|k| !entries.contains_key(k)));
        }
        let model = Model {
            entries,
            service_cidrs: normalize_prefixes(cfg.service_cidrs.iter().copied()),
            cluster_cidrs: built.cluster_cidrs.clone(),
        };
        self.pending = Some(built);
        Rebuilt {
            model,
            changed: previous_model.map(|_| changed),
        }
    }

    /// The last build's sync ended: committed (its model is the mirror's now), or not (the
    /// next build starts over).
    pub fn synced(&mut self, committed: bool) {
        let pending = self.pending.take();
        self.committed = pending.filter(|_| committed);
    }
}

#[cfg(test)]
mod tests;
