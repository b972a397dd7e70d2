//! Model: desired state -> the policy controller's model, the [`Program`] its planner reads
//! (the table that enforces `[policy]` and the pod isolation, built by [`super::program`]).
//! [`build`] is the pure function; [`Memo`] remembers its last inputs and result, so an
//! unchanged config is not planned again and a change of set elements only rebuilds those
//! sets (the result is the same as [`build`]'s).

use std::sync::Arc;

use crate::config::policy::PolicyConfig;
use crate::config::policy::pods::PodPolicies;
use crate::sys;

use super::addresses::RouterAddresses;
use super::program::{self, Program};

/// What the last program was planned from: the config, the table name and the router's
/// addresses (port-forward reflection is scoped to them).
type Inputs = (Option<PolicyConfig>, String, RouterAddresses);

/// The program for `config` and `pods` in table `table`, port forwards reflecting on the
/// router's addresses `addrs` (`None` = neither a `[policy]` nor pod isolation: no table).
pub fn build(
    config: Option<&PolicyConfig>,
    pods: &PodPolicies,
    table: &str,
    addrs: &RouterAddresses,
) -> Option<Program> {
    program::build_with_pods(config, pods, table, addrs)
}

/// The last inputs of [`build`] and its result.
#[derive(Default)]
pub struct Memo {
    /// The inputs and the program of the last call; `None` before the first.
    last: Option<(Inputs, Option<Arc<Program>>)>,
    /// The pod isolation of the last call.
    last_pods: PodPolicies,
    /// The generation of the fault module's side table at the last call: a change there
    /// changes the program without changing any input.
    #[cfg(feature = "fault-injection")]
    faults_seen: u64,
    /// The local time zone's offset at the last call, when the config has local time rules:
    /// a change (daylight saving) moves their windows on the UTC clock, so the program is
    /// planned again.
    offset_seen: Option<i32>,
}

impl Memo {
    /// [`build`] of these inputs: the same `Arc` as last time when nothing changed, the
    /// last program with the new elements when only set elements changed.
    pub fn program(
        &mut self,
        config: Option<&PolicyConfig>,
        pods: &PodPolicies,
        table: &str,
        addrs: &RouterAddresses,
    ) -> Option<Arc<Program>> {
        #[cfg(feature = "fault-injection")]
        {
            let faults = crate::fault::kernel_reject::generation();
            if faults != self.faults_seen {
                self.faults_seen = faults;
                self.last = None;
            }
        }
        let offset = local_time_rules(config).then(|| sys::utc_offset_at(now()));
        if offset != self.offset_seen {
            self.offset_seen = offset;
            self.last = None;
        }
        if *pods != self.last_pods {
            // Pod changes rebuild the program; the plan still writes only changed elements
            // when the structure stayed the same.
            self.last = None;
            self.last_pods = pods.clone();
        }
        let program = match &self.last {
            Some(((cfg, name, a), p)) if cfg.as_ref() == config && name == table && a == addrs => {
                return p.clone();
            }
            // Only set elements changed: patch those sets instead of planning everything.
            // (Pod sets are named with a `.`, which no `[policy]` set name has: never patched.)
            Some(((Some(old), name, a), Some(p)))
                if name == table
                    && a == addrs
                    && config.is_some_and(|new| program::only_set_elements_differ(old, new)) =>
            {
                let new = config.expect("checked");
                Some(Arc::new(program::with_set_elements(p, old, new)))
            }
            _ => build(config, pods, table, addrs).map(Arc::new),
        };
        self.last = Some((
            (config.cloned(), table.to_string(), addrs.clone()),
            program.clone(),
        ));
        program
    }
}

/// True when some rule of `config` has time keys in local time (no `utc_time`).
fn local_time_rules(config: Option<&PolicyConfig>) -> bool {
    config.is_some_and(|c| {
        c.rules
            .iter()
            .any(|r| r.matches.time.as_ref().is_some_and(|t| !t.utc))
    })
}

/// Now, in seconds since the epoch.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use super::*;
    use crate::config::policy::pods::{Isolation, PodPolicy};
    use crate::fault::kernel_reject::refuse_unit;

    fn refuses(p: &Program) -> bool {
        format!("{:?}", p.table).contains(program::FAULT_CHAIN)
    }

    /// Regression: with the hook out of the model, a change of the fault side table alone
    /// changes no input; the memo must still rebuild (else the refused group stays refused).
    #[test]
    fn a_change_of_the_fault_table_alone_rebuilds_the_program() {
        let pods = PodPolicies {
            policies: vec![PodPolicy {
                name: "k8s:memo/refused".into(),
                ingress: Some(Isolation {
                    pods: vec!["10.1.0.9".parse().unwrap()],
                    allow: Vec::new(),
                }),
                egress: None,
            }],
            ..PodPolicies::default()
        };
        let addrs = RouterAddresses::default();
        let mut memo = Memo::default();
        let first = memo.program(None, &pods, "t", &addrs).unwrap();
        assert!(!refuses(&first));
        refuse_unit("k8s:memo/refused", true);
        let refused = memo.program(None, &pods, "t", &addrs).unwrap();
        assert!(refuses(&refused), "{:?}", refused.table);
        refuse_unit("k8s:memo/refused", false);
        let again = memo.program(None, &pods, "t", &addrs).unwrap();
        assert!(!refuses(&again), "accepted again once the table is cleared");
    }
}
