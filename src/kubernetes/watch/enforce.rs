//! How long a new pod waits for its rules: from the moment its address arrived from the API
//! (the watch event, or the list, that carried it) to the commit of the policy batch that
//! first holds it among the known pods (`isolate_unknown_pods`). The watcher notes arrivals,
//! the policy controller reports commits (through the daemon, which hands it
//! [`EnforceClock::committed`]); each address is timed once, into
//! `edgenetd_kubernetes_pod_enforce_seconds`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The histogram's name (its buckets are set where the recorder is installed).
pub const POD_ENFORCE_METRIC: &str = "edgenetd_kubernetes_pod_enforce_seconds";

/// Addresses that arrived and are not yet committed, with when they arrived; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct EnforceClock {
    /// Address -> arrival.
    pending: Arc<Mutex<BTreeMap<IpAddr, Instant>>>,
}

impl EnforceClock {
    /// Describes the histogram.
    pub fn describe() {
        metrics::describe_histogram!(
            POD_ENFORCE_METRIC,
            metrics::Unit::Seconds,
            "Time from a pod's address arriving from the API server to the commit of the policy rules that know it (isolate_unknown_pods), per pod."
        );
    }

    /// Sets the addresses waiting: `arrived` (new known addresses, each with its arrival)
    /// join; addresses no longer known (`known` says which are) leave untimed.
    pub fn arrived(&self, arrived: impl IntoIterator<Item = (IpAddr, Instant)>, known: &[IpAddr]) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|ip, _| known.binary_search(ip).is_ok());
        for (ip, at) in arrived {
            pending.entry(ip).or_insert(at);
        }
    }

    /// A batch holding `known` (sorted) as the known pods' addresses was committed at `now`:
    /// the waiting ones among them are timed. Returns the times recorded.
    pub fn committed(&self, known: &[IpAddr], now: Instant) -> Vec<f64> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        pending.retain(|ip, at| {
            if known.binary_search(ip).is_err() {
                return true;
            }
            let secs = now.saturating_duration_since(*at).as_secs_f64();
            metrics::histogram!(POD_ENFORCE_METRIC).record(secs);
            out.push(secs);
            false
        });
        out
    }

    /// Addresses still waiting.
    pub fn waiting(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_is_timed_once_from_its_arrival_to_the_commit_that_knows_it() {
        let clock = EnforceClock::default();
        let t0 = Instant::now();
        let (a, b) = (ip("10.42.1.5"), ip("10.42.1.6"));
        clock.arrived([(a, t0), (b, t0 + Duration::from_millis(100))], &[a, b]);
        // A commit that knows only `a` times `a` alone.
        let times = clock.committed(&[a], t0 + Duration::from_millis(250));
        assert_eq!(times, [0.25]);
        assert_eq!(clock.waiting(), 1);
        // `b` goes before any commit knows it: it leaves untimed.
        clock.arrived([], &[a]);
        assert_eq!(clock.waiting(), 0);
        assert!(
            clock
                .committed(&[a, b], t0 + Duration::from_secs(1))
                .is_empty()
        );
    }

    #[test]
    fn a_second_arrival_of_a_waiting_address_keeps_the_first() {
        let clock = EnforceClock::default();
        let t0 = Instant::now();
        let a = ip("fd42:1::5");
        clock.arrived([(a, t0)], &[a]);
        clock.arrived([(a, t0 + Duration::from_secs(5))], &[a]);
        assert_eq!(clock.committed(&[a], t0 + Duration::from_secs(6)), [6.0]);
    }
}
