//! The router confirms a config from the cluster itself (`[kubernetes] config_confirm`):
//! once every controller has synced it, the ConfigMap's watch is opened again, and a request
//! opened from then on that the API server answered ([`Reached`]) is the proof, with a
//! renewal of the node's Lease opened from then on too when `status_namespace` keeps one
//! (the writer is asked to renew at once). The deadline
//! is [`super::confirm::watch_deadline`]'s, as for any pending confirm.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::confirm::Confirmer;
use crate::kubernetes::reached::Reached;
use crate::liveness::Liveness;
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::Trigger;

/// How often the confirm task looks at the controllers and the API server's answers.
const POLL: Duration = Duration::from_millis(100);

/// Confirms a pending version from the cluster once the router reached the API server with
/// it in force: every controller has synced it, then a request opened from then on was
/// answered (the ConfigMap's watch is opened again for it). The deadline is
/// [`super::confirm::watch_deadline`]'s, as for any pending confirm.
pub async fn confirm_when_reached(
    confirmer: Rc<Confirmer>,
    liveness: Arc<Liveness>,
    reached: Arc<Reached>,
    reconnect: Trigger,
    shutdown: Shutdown,
) {
    loop {
        if unless_shutdown(&shutdown, smol::Timer::after(POLL))
            .await
            .is_none()
        {
            return;
        }
        let Some(due) = confirmer
            .state
            .due()
            .filter(|_| confirmer.state.pending_from_cluster())
        else {
            continue;
        };
        // In the kernel first: the path must be proven through the new state. What every
        // controller had queued by now must have been served by a finished sync (not
        // "nothing queued": under a stream of cluster changes that may seldom hold).
        let queued: Vec<(String, u64)> = liveness
            .report()
            .controllers
            .iter()
            .map(|c| (c.name.clone(), c.queued))
            .collect();
        let synced = || {
            liveness.report().controllers.iter().all(|c| {
                queued
                    .iter()
                    .find(|(name, _)| *name == c.name)
                    .is_none_or(|(_, q)| c.served >= *q)
            })
        };
        while !synced() {
            if confirmer.state.due() != Some(due)
                || unless_shutdown(&shutdown, smol::Timer::after(POLL))
                    .await
                    .is_none()
            {
                break;
            }
        }
        let from = Instant::now();
        reconnect.fire();
        // With a Lease writer, its renewal is the second proof: asked for now, not at its
        // next period.
        reached.ask_lease(from);
        while confirmer.state.due() == Some(due) {
            if reached.since(from) {
                confirmer.confirm_from_cluster();
                break;
            }
            if unless_shutdown(&shutdown, smol::Timer::after(POLL))
                .await
                .is_none()
            {
                return;
            }
        }
    }
}
