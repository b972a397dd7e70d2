//! Backend checks (`[service.health]`): a probe task per backend and check settings,
//! whose up/down state feeds the model (a down backend gets no slots, like weight 0).
//!
//! - Checks ([`check`], on the probe engine [`crate::probe`], like the uplink tracks'): `tcp`
//!   (connect), `http` (status in `expect`), `udp` (a reply, optionally starting with
//!   `expect_bytes`), `dns` (RCODE 0), `tls` (a ServerHello).
//! - A backend starts as `initial` says (default **up**: a reload never blackholes a service
//!   before its first probes), goes down after `fall` failures in a row and up again after
//!   `rise` successes in a row. Every transition is one log line with the reason and fires
//!   the controller's trigger, so the loop syncs at once.
//! - A probe is keyed by backend and check settings: a reload that leaves them as they were
//!   keeps the probe and its state (no flap); changed settings start a new probe.
//! - Each probe starts at a random offset within its interval, so many backends are not
//!   probed in the same instant.
//! - Probes run on smol's global executor. A watch task there beats the `service-health`
//!   heartbeat while every probe finishes its checks on time; a probe past its deadline (or a
//!   stalled executor, which stops the watch too) stops the beats, so the registry marks it
//!   stale within its window and /healthz names the late probes.

mod check;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::service::{BackendCheck, BackendCheckKind, Initial, Service};
use crate::probe::state::lock;
use crate::probe::{ProbeState, Recorded, Watch};
use crate::sync::{Progress, Trigger, TriggerRx};

use super::metrics::{BACKEND_CHECK_FAILURES, BACKEND_TRANSITIONS, BACKEND_UP};

pub use check::check;

/// How late a probe may finish a check before it counts as wedged.
pub const PROBE_GRACE: Duration = check::GRACE;
/// The liveness window of the `service-health` heartbeat (the watch beats every second).
pub const WATCH_WINDOW: Duration = Duration::from_secs(10);

/// One probed backend with its check settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProbeKey {
    backend: SocketAddr,
    check: BackendCheck,
}

/// What a probe task shares with the controller and the watch.
struct Shared {
    /// Up or down, and the deadline of the check under way (the engine's).
    state: Mutex<ProbeState>,
    /// The services that list this backend with these settings (metric labels, logs).
    services: Mutex<Vec<String>>,
}

impl Shared {
    fn up(&self) -> bool {
        lock(&self.state).up
    }
}

struct Probe {
    state: Arc<Shared>,
    _task: smol::Task<()>,
}

type Probes = Arc<Mutex<HashMap<ProbeKey, Probe>>>;

/// The running probes.
pub struct BackendChecks {
    probes: Probes,
    trigger: Trigger,
    /// Wakes the watch when the set of probes changes (it sleeps while there is none).
    probes_changed: Trigger,
    /// The receiving end, until the watch takes it.
    probes_changed_rx: Option<TriggerRx>,
    /// The watch beating the `service-health` heartbeat, once one is attached.
    watch: Option<smol::Task<()>>,
}

impl BackendChecks {
    /// No probes yet; `trigger` is fired on every up/down transition.
    pub fn new(trigger: Trigger) -> BackendChecks {
        let (probes_changed, rx) = crate::sync::trigger();
        BackendChecks {
            probes: Arc::default(),
            trigger,
            probes_changed,
            probes_changed_rx: Some(rx),
            watch: None,
        }
    }

    /// Starts the watch: `heartbeat` beats every second while every probe is on time. While
    /// there is no probe the heartbeat rests and the watch sleeps until probes are started,
    /// so an idle router without backend checks has no wake-up for it.
    pub fn watch(&mut self, heartbeat: Arc<dyn Progress + Send + Sync>) {
        let probes = self.probes.clone();
        if let Some(changed) = self.probes_changed_rx.take() {
            self.watch = Some(smol::spawn(watch(probes, heartbeat, changed)));
        }
    }

    /// Starts probes for the checked backends of `services` that have none and stops the
    /// probes nothing asks for any more.
    pub fn reconcile(&mut self, services: &[Arc<Service>]) {
        let mut wanted: HashMap<ProbeKey, Vec<String>> = HashMap::new();
        for s in services
            .iter()
            .filter(|s| s.backend_check.check != BackendCheckKind::None)
        {
            for b in &s.backends {
                let key = ProbeKey {
                    backend: b.address,
                    check: s.backend_check.clone(),
                };
                wanted.entry(key).or_default().push(s.name.clone());
            }
        }
        let mut probes = lock(&self.probes);
        let before = probes.len();
        probes.retain(|k, _| wanted.contains_key(k));
        let (kept, started) = (probes.len(), wanted.len() - probes.len());
        if kept != before || started > 0 {
            self.probes_changed.fire();
        }
        for (k, mut names) in wanted {
            // The entries of one Kubernetes Service port share a name: one label each.
            names.sort();
            names.dedup();
            let state = match probes.get(&k) {
                Some(p) => p.state.clone(),
                None => {
                    let window = check::schedule_of(&k.check).window();
                    let state = Arc::new(Shared {
                        state: Mutex::new(ProbeState::new(k.check.initial == Initial::Up, window)),
                        services: Mutex::default(),
                    });
                    let task = smol::spawn(run(k.clone(), state.clone(), self.trigger.clone()));
                    probes.insert(
                        k.clone(),
                        Probe {
                            state: state.clone(),
                            _task: task,
                        },
                    );
                    state
                }
            };
            let up = state.up();
            for name in &names {
                let labels = labels(name, k.backend);
                metrics::gauge!(BACKEND_UP, &labels).set(f64::from(u8::from(up)));
                metrics::counter!(BACKEND_CHECK_FAILURES, &labels).increment(0);
                metrics::counter!(BACKEND_TRANSITIONS, &labels).increment(0);
            }
            *lock(&state.services) = names;
        }
    }

    /// False only for a backend whose probe says it is down.
    pub fn is_up(&self, service: &Service, backend: SocketAddr) -> bool {
        if service.backend_check.check == BackendCheckKind::None {
            return true;
        }
        let key = ProbeKey {
            backend,
            check: service.backend_check.clone(),
        };
        lock(&self.probes).get(&key).is_none_or(|p| p.state.up())
    }

    /// Backends currently down (for logs and tests).
    pub fn down(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = lock(&self.probes)
            .iter()
            .filter(|(_, p)| !p.state.up())
            .map(|(k, _)| k.backend)
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Each checked service's up and down backends, for /healthz (see [`healthz`]).
    pub fn publish(&self, services: &[Arc<Service>]) {
        let mut board = BTreeMap::new();
        for s in services
            .iter()
            .filter(|s| s.backend_check.check != BackendCheckKind::None)
        {
            let (mut up, mut down) = (Vec::new(), Vec::new());
            for b in &s.backends {
                let list = if self.is_up(s, b.address) {
                    &mut up
                } else {
                    &mut down
                };
                list.push(b.address.to_string());
            }
            // Entries sharing a name (one Service port's addresses) share their backends:
            // the board lists them once.
            board.entry(s.name.clone()).or_insert((up, down));
        }
        lock(&BOARD).services = board;
    }
}

fn labels(service: &str, backend: SocketAddr) -> [(&'static str, String); 2] {
    [
        ("service", service.to_string()),
        ("backend", backend.to_string()),
    ]
}

/// What /healthz shows of the backend checks (one daemon per process: a process-wide board).
#[derive(Default)]
struct Board {
    /// Per checked service: its up and its down backends.
    services: BTreeMap<String, (Vec<String>, Vec<String>)>,
    /// Probes past their deadline, as `backend (check)`.
    late: Vec<String>,
}

static BOARD: Mutex<Board> = Mutex::new(Board {
    services: BTreeMap::new(),
    late: Vec::new(),
});

/// The `services` object of /healthz: `{"backends": {NAME: {"up": [...], "down": [...]}},
/// "lateProbes": [...]}`.
pub fn healthz() -> serde_json::Value {
    let board = lock(&BOARD);
    let backends: serde_json::Map<String, serde_json::Value> = board
        .services
        .iter()
        .map(|(name, (up, down))| (name.clone(), serde_json::json!({ "up": up, "down": down })))
        .collect();
    serde_json::json!({ "backends": backends, "lateProbes": board.late })
}

async fn watch(
    probes: Probes,
    heartbeat: Arc<dyn Progress + Send + Sync>,
    probes_changed: TriggerRx,
) {
    let mut watch = Watch::default();
    loop {
        // Taken before the look: a change from now on wakes the sleep below.
        probes_changed.take_pending();
        let now = Instant::now();
        let late: Vec<String> = lock(&probes)
            .iter()
            .filter(|(_, p)| !lock(&p.state.state).live(now))
            .map(|(k, _)| format!("{} ({})", k.backend, k.check.check.name()))
            .collect();
        let look = watch.look(&*heartbeat, late);
        if !look.late.is_empty() && !look.was_late {
            log::error!(
                "health check probes past their deadline: {}",
                look.late.join(", ")
            );
        }
        lock(&BOARD).late = look.late;
        if lock(&probes).is_empty() {
            heartbeat.rest();
            if probes_changed.recv().await.is_none() {
                return;
            }
            // Probes just started cannot be late yet: the window counts from now.
            heartbeat.beat();
        } else {
            smol::Timer::after(crate::probe::watch::TICK).await;
        }
    }
}

async fn run(key: ProbeKey, shared: Arc<Shared>, trigger: Trigger) {
    let recorded = |r: &Recorded| {
        let names = lock(&shared.services).clone();
        if r.reason.is_some() {
            for n in &names {
                metrics::counter!(BACKEND_CHECK_FAILURES, &labels(n, key.backend)).increment(1);
            }
        }
        match (r.flip, &r.reason) {
            (Some(true), _) => {
                transition(&key, &names, true, &format!("{} good checks", r.successes));
                trigger.fire();
            }
            (Some(false), reason) => {
                let reason = reason.as_deref().unwrap_or("?");
                let why = format!("{reason} ({} failed checks)", r.failures);
                transition(&key, &names, false, &why);
                trigger.fire();
            }
            (None, _) => {}
        }
    };
    let one_check = || check(key.backend, &key.check.check, key.check.timeout);
    let schedule = check::schedule_of(&key.check);
    crate::probe::schedule::run(&schedule, &shared.state, one_check, recorded).await;
}

/// Records a transition (the state is the engine's, already flipped): the metrics, one log
/// line.
fn transition(key: &ProbeKey, names: &[String], up: bool, why: &str) {
    for n in names {
        let labels = labels(n, key.backend);
        metrics::gauge!(BACKEND_UP, &labels).set(f64::from(u8::from(up)));
        metrics::counter!(BACKEND_TRANSITIONS, &labels).increment(1);
    }
    let (word, check) = (if up { "up" } else { "down" }, key.check.check.name());
    let services = names.join(", ");
    if up {
        log::info!(
            "service {services}: backend {} is {word} ({check} check): {why}",
            key.backend
        );
    } else {
        log::warn!(
            "service {services}: backend {} is {word} ({check} check): {why}",
            key.backend
        );
    }
}

/// How long a backend takes at most to be taken out: `fall` probes plus their waits.
pub fn detection_time(check: &BackendCheck) -> Duration {
    (check.interval + check.timeout) * check.fall
}

#[cfg(test)]
mod tests;
