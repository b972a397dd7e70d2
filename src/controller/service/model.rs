//! Model: desired state -> the service controller's model, the [`Model`] its planner reads
//! (the desired dataplane of the services: one [`Entry`] per virtual address:port:protocol),
//! built from the validated services by a pure function ([`build`]).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use crate::config::service::{
    Affinity, Backend, Masquerade, Protocol, Service, ServicesConfig, WhenEmpty,
};

use super::slots;

/// What identifies a service in the kernel: its VIP, protocol and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VipKey {
    /// Virtual address.
    pub addr: IpAddr,
    /// Protocol.
    pub proto: Protocol,
    /// Virtual port.
    pub port: u16,
}

impl std::fmt::Display for VipKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{a}:{}/{}", self.port, self.proto.name()),
            IpAddr::V6(a) => write!(f, "[{a}]:{}/{}", self.port, self.proto.name()),
        }
    }
}

/// How a balanced service picks the slot of a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Selection {
    /// `numgen random`.
    Random,
    /// `jhash` of the client address.
    SourceHash,
    /// The client's remembered backend if any, else at random; the backend a client gets is
    /// remembered for `timeout` seconds after its last new connection.
    Sticky {
        /// Seconds a client is remembered.
        timeout: u32,
    },
}

impl Selection {
    /// The remembering timeout of a sticky selection.
    pub fn sticky_timeout(self) -> Option<u32> {
        match self {
            Selection::Sticky { timeout } => Some(timeout),
            _ => None,
        }
    }
}

/// What new connections to a VIP get.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// DNAT to the backend of a slot.
    Balance {
        /// How the slot is picked.
        selection: Selection,
        /// The backend of each slot; the length is the slot class.
        slots: Vec<SocketAddr>,
    },
    /// No backend up: refuse.
    Reject,
    /// No backend up: drop.
    Drop,
}

/// Whose connections to an entry's address are masqueraded, as the kernel decides it (the
/// config's [`Masquerade`] resolved against the cluster's prefixes of the address's family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum MasqPath {
    /// Nobody's (hairpin connections aside).
    #[default]
    Never,
    /// Everybody's.
    Always,
    /// Sources outside the cluster's prefixes of the address's family.
    OffCluster,
}

/// One service as the dataplane sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The service's name (for reports). Not unique: the entries of one Kubernetes Service
    /// port share it.
    pub name: String,
    /// What new connections get (every client, or with `internal` the clients that are
    /// neither in the cluster's prefixes nor this node).
    pub action: Action,
    /// What connections from the cluster's prefixes and from this node get (kube-proxy's
    /// short-circuit of `externalTrafficPolicy: Local` addresses); `None`: `action` for all.
    pub internal: Option<Action>,
    /// Whose connections are masqueraded.
    pub masquerade: MasqPath,
    /// Packets to this address at a port/protocol no entry serves are rejected.
    pub reject_unserved_ports: bool,
    /// `Some`: only these sources (of the address's family; maybe none) and this node reach
    /// the entry.
    pub source_ranges: Option<Vec<IpNet>>,
}

impl Entry {
    /// The remembering timeout (seconds) of a balanced sticky service.
    pub fn sticky_timeout(&self) -> Option<u32> {
        std::iter::once(&self.action)
            .chain(&self.internal)
            .find_map(|a| match a {
                Action::Balance { selection, .. } => selection.sticky_timeout(),
                _ => None,
            })
    }

    /// The backends of this entry's slots (the internal ones included), each once, sorted.
    pub fn backends(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = slots_of(&self.action).to_vec();
        if let Some(i) = &self.internal {
            v.extend_from_slice(slots_of(i));
        }
        v.sort();
        v.dedup();
        v
    }
}

impl Entry {
    /// How many distinct backends its slots hold ([`Entry::backends`]'s length), counted
    /// in place: this runs for every entry at every sync.
    pub fn backend_count(&self) -> usize {
        let all = || {
            std::iter::once(&self.action)
                .chain(&self.internal)
                .flat_map(|a| slots_of(a).iter())
        };
        if all().count() > 64 {
            return self.backends().len();
        }
        all()
            .enumerate()
            .filter(|(i, b)| all().take(*i).all(|a| a != *b))
            .count()
    }
}

/// The slots of an action (none unless it balances).
pub fn slots_of(a: &Action) -> &[SocketAddr] {
    match a {
        Action::Balance { slots, .. } => slots,
        _ => &[],
    }
}

/// Every service's entry, ordered by key (the order of plans and batches), and the cluster's
/// prefixes the table's rules test sources and destinations against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// The entries.
    pub entries: BTreeMap<VipKey, Entry>,
    /// The cluster's pod prefixes (normalized: sorted, none inside another).
    pub cluster_cidrs: Vec<IpNet>,
    /// The prefixes cluster IPs come from (normalized).
    pub service_cidrs: Vec<IpNet>,
}

impl Model {
    /// No entries and no prefixes.
    pub fn new() -> Model {
        Model::default()
    }

    /// True when the kernel needs no service table at all: no entries, and no service CIDR
    /// whose unowned addresses must be dropped (a cluster whose last Service went away
    /// still keeps its cluster IP range from leaking out of the node).
    pub fn needs_no_table(&self) -> bool {
        self.entries.is_empty() && self.service_cidrs.is_empty()
    }
}

impl std::ops::Deref for Model {
    type Target = BTreeMap<VipKey, Entry>;
    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl std::ops::DerefMut for Model {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.entries
    }
}

impl FromIterator<(VipKey, Entry)> for Model {
    fn from_iter<I: IntoIterator<Item = (VipKey, Entry)>>(iter: I) -> Model {
        Model {
            entries: iter.into_iter().collect(),
            ..Model::default()
        }
    }
}

/// The entry of one validated service, every backend up, without cluster prefixes.
pub fn entry(s: &Service) -> Entry {
    entry_with(s, &[], &|_, _| true, None)
}

/// The entry of one validated service; backends for which `up` says false get no slots.
/// `cluster_cidrs` are the cluster's pod prefixes (for [`Masquerade::OffCluster`]);
/// `previous` is the entry last planned for the same key, whose slots the surviving
/// backends keep (see [`slots::assign`]).
pub fn entry_with(
    s: &Service,
    cluster_cidrs: &[IpNet],
    up: &dyn Fn(&Service, SocketAddr) -> bool,
    previous: Option<&Entry>,
) -> Entry {
    let v4 = s.address.is_ipv4();
    let detector = cluster_cidrs.iter().any(|n| n.addr().is_ipv4() == v4);
    let masquerade = match s.masquerade {
        Masquerade::Never => MasqPath::Never,
        Masquerade::Always => MasqPath::Always,
        // Without a prefix of the family there is no local-traffic detector: nobody.
        Masquerade::OffCluster if detector => MasqPath::OffCluster,
        Masquerade::OffCluster => MasqPath::Never,
    };
    Entry {
        name: s.name.clone(),
        action: action(s, &s.backends, up, previous.map(|p| slots_of(&p.action))),
        internal: s.internal_backends.as_ref().map(|b| {
            let before = previous.and_then(|p| p.internal.as_ref()).map(slots_of);
            action(s, b, up, before)
        }),
        masquerade,
        reject_unserved_ports: s.reject_unserved_ports,
        source_ranges: (!s.source_ranges.is_empty()).then(|| {
            crate::dataplane::nft::intervals::normalize_prefixes(
                s.source_ranges
                    .iter()
                    .copied()
                    .filter(|n| n.addr().is_ipv4() == v4),
            )
        }),
    }
}

/// What new connections get from `backends` (the service's, or its internal ones): each set
/// is empty on its own, and `when_empty`/`fallback` apply to it alone. `previous`: the slots
/// this backend set had (the surviving backends keep theirs).
fn action(
    s: &Service,
    backends: &[Backend],
    up: &dyn Fn(&Service, SocketAddr) -> bool,
    previous: Option<&[SocketAddr]>,
) -> Action {
    let previous = previous.unwrap_or_default();
    let slots = if backends.iter().all(|b| up(s, b.address)) {
        slots::assign(backends, previous)
    } else {
        let live: Vec<_> = backends
            .iter()
            .filter(|b| up(s, b.address))
            .copied()
            .collect();
        slots::assign(&live, previous)
    };
    if slots.is_empty() {
        match (s.fallback, s.when_empty) {
            // The sorry server is dealt at random, never remembered: a sticky client must
            // not stay on it once a backend is back.
            (Some(sorry), _) => Action::Balance {
                selection: Selection::Random,
                slots: slots::spread(&[Backend {
                    address: sorry,
                    weight: 1,
                }]),
            },
            (None, WhenEmpty::Reject) => Action::Reject,
            (None, WhenEmpty::Drop) => Action::Drop,
        }
    } else {
        Action::Balance {
            selection: selection(s.affinity),
            slots,
        }
    }
}

fn selection(a: Affinity) -> Selection {
    match a {
        Affinity::None => Selection::Random,
        Affinity::SourceIp => Selection::SourceHash,
        // Validation keeps the timeout within whole seconds of 1 s to a day.
        Affinity::Sticky { timeout } => Selection::Sticky {
            timeout: timeout.as_secs().clamp(1, u32::MAX as u64) as u32,
        },
    }
}

/// The distinct remembering timeouts of sticky services, with their family (true = IPv4):
/// each pair has one recorder chain in the table.
pub fn recorders(model: &Model) -> std::collections::BTreeSet<(u32, bool)> {
    model
        .iter()
        .filter_map(|(k, e)| Some((e.sticky_timeout()?, k.addr.is_ipv4())))
        .collect()
}

/// The chains on demand the elements of `model` point at: the dispatch chains of its
/// balanced services (and internal backend sets), and the recorder chains of its sticky ones.
pub fn on_demand(model: &Model) -> super::layout::Demand {
    use super::layout::OnDemand;
    let mut demand: super::layout::Demand = recorders(model)
        .into_iter()
        .map(|(timeout, v4)| OnDemand::Recorder { timeout, v4 })
        .collect();
    for (k, e) in model.iter() {
        let v4 = k.addr.is_ipv4();
        for (action, internal) in [(Some(&e.action), false), (e.internal.as_ref(), true)] {
            if let Some(Action::Balance { selection, slots }) = action {
                demand.extend(OnDemand::dispatch(
                    *selection,
                    slots.len() as u32,
                    v4,
                    internal,
                ));
            }
        }
    }
    demand
}

/// The model of a whole config, every backend up (validation guarantees unique keys), its
/// slots dealt afresh.
pub fn build(services: &ServicesConfig) -> Model {
    build_with(services, &|_, _| true, None)
}

/// The model of services alone (no cluster or service prefixes), every backend up.
pub fn build_list(services: &[Service]) -> Model {
    build_parts(services, &[], &[], &|_, _| true, None)
}

/// The model of a whole config; backends for which `up` says false get no slots. With
/// `previous` (the model last planned), each entry's surviving backends keep their slots.
pub fn build_with(
    cfg: &ServicesConfig,
    up: &dyn Fn(&Service, SocketAddr) -> bool,
    previous: Option<&Model>,
) -> Model {
    build_parts(
        &cfg.services,
        &cfg.cluster_cidrs,
        &cfg.service_cidrs,
        up,
        previous,
    )
}

fn build_parts<S: Borrow<Service>>(
    services: &[S],
    cluster_cidrs: &[IpNet],
    service_cidrs: &[IpNet],
    up: &dyn Fn(&Service, SocketAddr) -> bool,
    previous: Option<&Model>,
) -> Model {
    use crate::dataplane::nft::intervals::normalize_prefixes;
    let cluster_cidrs = normalize_prefixes(cluster_cidrs.iter().copied());
    let entries = services
        .iter()
        .map(|s| {
            let s = s.borrow();
            let key = VipKey {
                addr: s.address,
                proto: s.protocol,
                port: s.port,
            };
            let before = previous.and_then(|m| m.entries.get(&key));
            (key, entry_with(s, &cluster_cidrs, up, before))
        })
        .collect();
    Model {
        entries,
        service_cidrs: normalize_prefixes(service_cidrs.iter().copied()),
        cluster_cidrs,
    }
}

/// The slots of every entry of `model` rebased on `kernel` (slot number -> backend, per key:
/// the `backends` maps read back, the internal slots from
/// [`INTERNAL_SLOT_BASE`](super::layout::INTERNAL_SLOT_BASE)): each backend keeps its
/// count and takes the kernel's places where it has them (see [`slots::rebase`]).
pub fn rebase_slots(model: &mut Model, kernel: &BTreeMap<VipKey, BTreeMap<u32, SocketAddr>>) {
    use super::layout::INTERNAL_SLOT_BASE;
    for (k, e) in model.entries.iter_mut() {
        let Some(have) = kernel.get(k) else {
            continue;
        };
        let placed = |base: u32, n: usize| -> Vec<Option<SocketAddr>> {
            (0..n as u32)
                .map(|i| have.get(&(base + i)).copied())
                .collect()
        };
        if let Action::Balance { slots, .. } = &mut e.action {
            *slots = slots::rebase(slots, &placed(0, slots.len()));
        }
        if let Some(Action::Balance { slots, .. }) = &mut e.internal {
            *slots = slots::rebase(slots, &placed(INTERNAL_SLOT_BASE, slots.len()));
        }
    }
}
