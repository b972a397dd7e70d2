//! Which VIP, port and protocol the cluster's services claim, and how many claim each, kept
//! from one compose to the next: a compose without a clash (the usual one) then keeps every
//! cluster service without reading any, where building the claims afresh read all 5,000 of a
//! large cluster at every endpoint change (issue 24).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::service::{Service, changed_positions};

use super::{VipKey, vip_key};

/// The cluster services' claims, counted.
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// How many cluster services claim each VIP key.
    count: HashMap<VipKey, u32>,
    /// How many keys more than one service claims.
    shared: usize,
}

impl Claims {
    /// The claims of `now`, made from those of `before` (the services they were counted
    /// from) where only some positions changed, else counted afresh.
    pub(super) fn update(&mut self, before: &[Arc<Service>], now: &[Arc<Service>]) {
        match changed_positions(before, now) {
            Some(at) => {
                for i in at {
                    self.remove(vip_key(&before[i]));
                    self.add(vip_key(&now[i]));
                }
            }
            None => {
                *self = Claims::default();
                for s in now {
                    self.add(vip_key(s));
                }
            }
        }
    }

    /// Whether no key is claimed twice and none of `toml`'s is claimed at all: every
    /// cluster service is kept.
    pub(super) fn clear_of(&self, toml: &[Arc<Service>]) -> bool {
        self.shared == 0 && toml.iter().all(|s| !self.count.contains_key(&vip_key(s)))
    }

    fn add(&mut self, key: VipKey) {
        let n = self.count.entry(key).or_insert(0);
        *n += 1;
        if *n == 2 {
            self.shared += 1;
        }
    }

    fn remove(&mut self, key: VipKey) {
        if let Some(n) = self.count.get_mut(&key) {
            *n -= 1;
            match *n {
                0 => {
                    self.count.remove(&key);
                }
                1 => self.shared -= 1,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::service::Protocol;

    fn svc(addr: &str, port: u16) -> Arc<Service> {
        let state = crate::config::load_str(&[(
            "a.toml",
            format!(
                "[[service]]\nname = \"s\"\naddress = \"{addr}\"\nport = {port}\nbackends = [\"10.0.1.5:8080\"]\n"
            )
            .as_str(),
        )])
        .unwrap();
        Arc::clone(&state.services.services[0])
    }

    #[test]
    fn claims_follow_changed_positions_as_a_recount_would() {
        let (a, b, c) = (
            svc("10.96.0.1", 80),
            svc("10.96.0.2", 80),
            svc("10.96.0.3", 80),
        );
        let mut claims = Claims::default();
        claims.update(&[], &[a.clone(), b.clone()]);
        assert!(claims.clear_of(&[]));
        assert!(
            !claims.clear_of(&[svc("10.96.0.2", 80)]),
            "TOML claims b's key"
        );
        assert!(claims.clear_of(&[svc("10.96.0.2", 81)]));
        // b replaced by a second claim on a's key: shared.
        let a2 = svc("10.96.0.1", 80);
        claims.update(&[a.clone(), b.clone()], &[a.clone(), a2.clone()]);
        assert_eq!(claims.shared, 1);
        assert!(!claims.clear_of(&[]));
        // And back, by position: as a count afresh would say.
        claims.update(&[a.clone(), a2], &[a.clone(), c.clone()]);
        let mut fresh = Claims::default();
        fresh.update(&[], &[a.clone(), c.clone()]);
        assert_eq!((claims.shared, &claims.count), (fresh.shared, &fresh.count));
        assert!(claims.clear_of(&[]));
        assert_eq!(claims.count.get(&(c.address, 80, Protocol::Tcp)), Some(&1));
        assert_eq!(claims.count.get(&(b.address, 80, Protocol::Tcp)), None);
    }
}
