//! The desired dataplane of the services, in controller terms: one [`Entry`] per virtual
//! address:port:protocol, built from the validated config by a pure function.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use crate::config::service::{Affinity, Protocol, Service, WhenEmpty};

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

/// One service as the dataplane sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The service's name (for reports).
    pub name: String,
    /// What new connections get.
    pub action: Action,
    /// SNAT to the router for connections to this service's backends.
    pub masquerade: bool,
}

impl Entry {
    /// The remembering timeout (seconds) of a balanced sticky service.
    pub fn sticky_timeout(&self) -> Option<u32> {
        match &self.action {
            Action::Balance { selection, .. } => selection.sticky_timeout(),
            _ => None,
        }
    }

    /// The backends of this entry's slots, each once, sorted.
    pub fn backends(&self) -> Vec<SocketAddr> {
        match &self.action {
            Action::Balance { slots, .. } => {
                let mut v = slots.clone();
                v.sort();
                v.dedup();
                v
            }
            _ => Vec::new(),
        }
    }
}

/// Every service's entry, ordered by key (the order of plans and batches).
pub type Model = BTreeMap<VipKey, Entry>;

/// The entry of one validated service, every backend up.
pub fn entry(s: &Service) -> Entry {
    entry_with(s, &|_, _| true)
}

/// The entry of one validated service; backends for which `up` says false get no slots.
pub fn entry_with(s: &Service, up: &dyn Fn(&Service, SocketAddr) -> bool) -> Entry {
    let slots = if s.backends.iter().all(|b| up(s, b.address)) {
        slots::spread(&s.backends)
    } else {
        let live: Vec<_> = s
            .backends
            .iter()
            .filter(|b| up(s, b.address))
            .copied()
            .collect();
        slots::spread(&live)
    };
    let action = if slots.is_empty() {
        match (s.fallback, s.when_empty) {
            // The sorry server is dealt at random, never remembered: a sticky client must
            // not stay on it once a backend is back.
            (Some(sorry), _) => Action::Balance {
                selection: Selection::Random,
                slots: slots::spread(&[crate::config::service::Backend {
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
    };
    Entry {
        name: s.name.clone(),
        action,
        masquerade: s.masquerade == crate::config::service::Masquerade::Always,
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

/// The model of a whole config, every backend up (validation guarantees unique keys).
pub fn build(services: &[Service]) -> Model {
    build_with(services, &|_, _| true)
}

/// The model of a whole config; backends for which `up` says false get no slots.
pub fn build_with(services: &[Service], up: &dyn Fn(&Service, SocketAddr) -> bool) -> Model {
    services
        .iter()
        .map(|s| {
            (
                VipKey {
                    addr: s.address,
                    proto: s.protocol,
                    port: s.port,
                },
                entry_with(s, up),
            )
        })
        .collect()
}
