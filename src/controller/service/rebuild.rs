//! The model built again only where the services changed (issue 24): a cluster endpoint
//! change plans the elements of its VIPs, not of every service.
//!
//! An entry is a pure function of its service, the cluster's pod prefixes, the backend
//! checks' verdicts and the entry last committed for its key (whose slots the surviving
//! backends keep; given the same service that is the committed entry itself). So the entry
//! committed for a key stays as it is when the service at that key equals the one it
//! was built from, the prefixes are the same, and the service has no backend checks (whose
//! verdicts change without the service changing). Everything else is built anew: the result
//! is a [`Patch`] of the committed model (the entries built anew or gone, and the prefixes),
//! which an incremental sync applies to the mirror's model in place and plans alone
//! ([`Mirror::diff_keys`]); a sync that compares the whole kernel applies it to a copy.
//!
//! The services the committed model was built from are kept only while that model is the
//! mirror's: after a sync that failed, or with no mirror, the next build starts over (every
//! key built, every key compared). The result equals [`model::build_with`]'s (the unit tests
//! hold both equal over random changes).
//!
//! [`Mirror::diff_keys`]: super::plan::Mirror::diff_keys

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::service::{BackendCheckKind, Service, ServicesConfig, changed_positions};
use crate::dataplane::nft::intervals::normalize_prefixes;

use super::model::{self, Entry, Model, VipKey};

/// What the controller hands the kernel side: a whole model, or a patch of the mirror's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Desired {
    /// The whole model.
    Whole(Model),
    /// The mirror's model with these changes.
    Patch(Patch),
}

/// The committed model's changes: entries built anew (`None`: gone) and the prefixes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    /// The entries built anew, and the keys gone.
    pub entries: BTreeMap<VipKey, Option<Entry>>,
    /// The cluster's pod prefixes (normalized).
    pub cluster_cidrs: Vec<IpNet>,
    /// The service prefixes (normalized).
    pub service_cidrs: Vec<IpNet>,
}

impl Patch {
    /// Applies the patch to `model` in place; returns what it replaced (the previous entries
    /// of its keys, and the previous prefixes) and its keys.
    pub fn apply(self, model: &mut Model) -> (Model, BTreeSet<VipKey>) {
        let mut old = Model {
            cluster_cidrs: std::mem::replace(&mut model.cluster_cidrs, self.cluster_cidrs),
            service_cidrs: std::mem::replace(&mut model.service_cidrs, self.service_cidrs),
            ..Model::default()
        };
        let keys = self.entries.keys().copied().collect();
        for (k, e) in self.entries {
            let before = match e {
                Some(e) => model.entries.insert(k, e),
                None => model.entries.remove(&k),
            };
            if let Some(before) = before {
                old.entries.insert(k, before);
            }
        }
        (old, keys)
    }

    /// The entries of `base` with the patch applied, unordered, without copying any.
    pub fn view<'a>(&'a self, base: &'a Model) -> impl Iterator<Item = (&'a VipKey, &'a Entry)> {
        base.iter()
            .filter(|(k, _)| !self.entries.contains_key(k))
            .chain(
                self.entries
                    .iter()
                    .filter_map(|(k, e)| e.as_ref().map(|e| (k, e))),
            )
    }
}

impl Desired {
    /// The whole model: `base` (the model the patch was made against) patched.
    pub fn into_model(self, base: Option<&Model>) -> Model {
        match self {
            Desired::Whole(m) => m,
            Desired::Patch(p) => {
                let mut m = base.cloned().unwrap_or_default();
                p.apply(&mut m);
                m
            }
        }
    }
}

/// What the committed model was built from.
#[derive(Debug, Clone, Default)]
struct Built {
    /// The service of each key, and the last build that saw it.
    services: BTreeMap<VipKey, (Arc<Service>, u64)>,
    /// The services in the config's order (pointers: the snapshot holds the services).
    list: Vec<Arc<Service>>,
    /// The keys whose service has backend checks (built again at every build).
    checked: BTreeSet<VipKey>,
    /// The cluster's pod prefixes (normalized).
    cluster_cidrs: Vec<IpNet>,
}

impl Built {
    /// What a build of `services` (in this order) is made from.
    fn of(services: &[Arc<Service>], cluster_cidrs: Vec<IpNet>, round: u64) -> Built {
        Built {
            services: services
                .iter()
                .map(|s| (key_of(s), (Arc::clone(s), round)))
                .collect(),
            list: services.to_vec(),
            checked: services
                .iter()
                .filter(|s| is_checked(s))
                .map(|s| key_of(s))
                .collect(),
            cluster_cidrs,
        }
    }
}

/// The positions whose service changed since the last build, and this build's round.
struct Positions {
    /// See [`changed_positions`].
    fresh: Vec<usize>,
    /// The build's round.
    round: u64,
}

/// Whether a service's entry depends on more than the service: its backend checks' verdicts.
fn is_checked(s: &Service) -> bool {
    s.backend_check.check != BackendCheckKind::None
}

/// What the last builds were made from (see the module docs).
#[derive(Debug, Default)]
pub struct Memo {
    /// What the mirror's model was built from, when known.
    committed: Option<Built>,
    /// What the last build was made from, until its sync says whether it was committed.
    pending: Option<Built>,
    /// Builds so far (marks the services each saw).
    round: u64,
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
    /// The model of `cfg` (as [`model::build_with`] builds it): a [`Patch`] of `previous`
    /// (the mirror's model) when what it was built from is known, else the whole model.
    pub fn build(
        &mut self,
        cfg: &ServicesConfig,
        up: &dyn Fn(&Service, SocketAddr) -> bool,
        previous: Option<&Model>,
    ) -> Desired {
        self.round += 1;
        let round = self.round;
        let cluster_cidrs = normalize_prefixes(cfg.cluster_cidrs.iter().copied());
        let base = self
            .committed
            .take()
            .zip(previous)
            .filter(|(b, _)| b.cluster_cidrs == cluster_cidrs);
        let Some((mut built, previous)) = base else {
            let model = model::build_with(cfg, up, previous);
            self.pending = Some(Built::of(&cfg.services, cluster_cidrs, round));
            return Desired::Whole(model);
        };
        let mut patch = Patch {
            service_cidrs: normalize_prefixes(cfg.service_cidrs.iter().copied()),
            ..Patch::default()
        };
        if let Some(fresh) = changed_positions(&built.list, &cfg.services) {
            Self::by_position(
                &mut built,
                cfg,
                Positions { fresh, round },
                &cluster_cidrs,
                up,
                previous,
                &mut patch,
            );
            patch.cluster_cidrs = cluster_cidrs;
            self.pending = Some(built);
            return Desired::Patch(patch);
        }
        for s in &cfg.services {
            let key = key_of(s);
            let unchanged = match built.services.get_mut(&key) {
                Some((was, seen)) if was == s => {
                    *seen = round;
                    s.backend_check.check == BackendCheckKind::None
                }
                Some((was, seen)) => {
                    *was = s.clone();
                    *seen = round;
                    false
                }
                None => {
                    built.services.insert(key, (s.clone(), round));
                    false
                }
            };
            if !unchanged {
                let before = previous.entries.get(&key);
                let entry = model::entry_with(s, &cluster_cidrs, up, before);
                patch.entries.insert(key, Some(entry));
            }
        }
        built.services.retain(|k, (_, seen)| {
            if *seen != round {
                patch.entries.insert(*k, None);
            }
            *seen == round
        });
        // Keys the mirror has that no service built (none, while the two agree).
        for k in previous.keys() {
            if !built.services.contains_key(k) {
                patch.entries.insert(*k, None);
            }
        }
        patch.cluster_cidrs = cluster_cidrs;
        built.list = cfg.services.clone();
        built.checked = cfg
            .services
            .iter()
            .filter(|s| is_checked(s))
            .map(|s| key_of(s))
            .collect();
        self.pending = Some(built);
        Desired::Patch(patch)
    }

    /// The patch when the config has as many services as the last build: the positions
    /// whose service is another allocation than last time are what changed (a composed
    /// snapshot keeps every unchanged service's allocation), so the cost is a pointer
    /// comparison per service and a build per changed one, where looking each service up
    /// by key and comparing it took milliseconds at 5,000 services (issue 24).
    fn by_position(
        built: &mut Built,
        cfg: &ServicesConfig,
        at: Positions,
        cluster_cidrs: &[IpNet],
        up: &dyn Fn(&Service, SocketAddr) -> bool,
        previous: &Model,
        patch: &mut Patch,
    ) {
        let Positions { fresh, round } = at;
        // Another allocation with the same content (a TOML reload makes every service anew)
        // is no change: its pointer is taken, nothing is built.
        let (same, fresh): (Vec<usize>, Vec<usize>) = fresh
            .into_iter()
            .partition(|&i| *built.list[i] == *cfg.services[i]);
        for i in same {
            let s = &cfg.services[i];
            built.list[i] = Arc::clone(s);
            built.services.insert(key_of(s), (Arc::clone(s), round));
        }
        let mut gone = BTreeSet::new();
        for &i in &fresh {
            gone.insert(key_of(&built.list[i]));
            built.list[i] = Arc::clone(&cfg.services[i]);
        }
        for &i in &fresh {
            let s = &cfg.services[i];
            let key = key_of(s);
            gone.remove(&key);
            if is_checked(s) {
                built.checked.insert(key);
            } else {
                built.checked.remove(&key);
            }
            built.services.insert(key, (Arc::clone(s), round));
            let before = previous.entries.get(&key);
            let entry = model::entry_with(s, cluster_cidrs, up, before);
            patch.entries.insert(key, Some(entry));
        }
        for key in gone {
            built.services.remove(&key);
            built.checked.remove(&key);
            patch.entries.insert(key, None);
        }
        // Their verdicts may have changed without the service changing.
        for key in &built.checked {
            if !patch.entries.contains_key(key) {
                let (s, _) = &built.services[key];
                let entry = model::entry_with(s, cluster_cidrs, up, previous.entries.get(key));
                patch.entries.insert(*key, Some(entry));
            }
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
