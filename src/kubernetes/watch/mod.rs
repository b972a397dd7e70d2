//! The watcher: one reflector per API resource the enabled feeds need, on a thread and an
//! executor of its own (a big list decode never delays the controllers), and the step that
//! turns the stores into the composer's parts, paced so a burst of updates makes one.
//!
//! Which resources: the `services` feed watches Services (narrowed by `service_selector`),
//! EndpointSlices (discovery.k8s.io/v1), ServiceCIDRs (networking.k8s.io/v1, where the server
//! serves them: a 404 is taken as none) and Nodes (this node's addresses for NodePorts, its
//! zone, its pod CIDRs); the
//! `routes` feed watches Nodes (narrowed by `node_selector`, on the server when no other feed
//! needs every Node, else here); the `network_policies` feed watches NetworkPolicies
//! (narrowed by `network_policy_selector`), ClusterNetworkPolicies
//! (policy.networking.k8s.io/v1alpha2, where the CRD is installed: a 404 is taken as none),
//! every Pod (peers and named ports resolve through
//! pods on any node) and Namespaces (namespace selectors). Adding a resource is a field in `Stores`, one
//! [`Watcher::watch`] call in [`Watcher::new`], and a part made from its store in
//! `Watcher::parts` (and its kind in [`Watcher::kinds`], for readiness).
//!
//! The services part is made from what changed: the stores list the keys changed since the
//! last part ([`Store::take_changes`]), and `memo` keeps each Service's translation, so an
//! EndpointSlice event translates its Service alone.
//!
//! Heartbeats: each reflector beats at every page, event line, reconnect attempt and back-off
//! wait, and the compose step beats before and after each compose; every wait is bounded (a
//! watch read by the idle timeout, a back-off by its cap), so an API server that is down
//! keeps the watcher beating and only a wedged thread stops it.

#[cfg(test)]
mod docs_tests;
pub mod enforce;
pub mod local;
mod memo;
pub mod metrics;
mod parts;
pub mod skips;
pub mod status;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::FutureExt;
use ipnet::IpNet;

use self::skips::Skips;
use self::status::{Statuses, Watched};
use crate::config::kubernetes::selector::LabelSelector;
use crate::config::kubernetes::{ConfigMapRef, Feed, NodePortAddresses, PolicyMode};
use crate::kubernetes::client::json::Decode;
use crate::kubernetes::client::{Endpoint, HasMeta, Reflector, ReflectorConfig, Store};
use crate::kubernetes::compose::{ClusterPart, Kind};
use crate::kubernetes::objects;
use crate::kubernetes::pace::Pacer;
use crate::kubernetes::reached::Reached;
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::{Progress, Trigger, TriggerRx, trigger};

// The pacing figures live with the pacer, so its tests pin what the daemon runs.
pub use crate::kubernetes::pace::{MAX_WAIT, QUIET};
/// How often the interfaces' subnets are read again and the metrics refreshed.
const TICK: Duration = Duration::from_secs(5);
/// Where ClusterNetworkPolicies are served (the network-policy-api's CRD).
pub const CLUSTER_NETWORK_POLICIES: &str =
    "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies";
/// The longest a watch may go without a line (a real API server sends a bookmark about
/// every minute); every other wait is shorter.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(150);
/// The watcher's liveness window: the compose step wakes at least every `TICK`, so only a
/// wedged thread (or one decode taking this long) misses it.
pub const WINDOW: Duration = Duration::from_secs(60);

/// What to watch and for which node.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The API server.
    pub endpoint: Endpoint,
    /// The server URL's path before `/api` (empty for most servers).
    pub path_prefix: String,
    /// This node's Node name.
    pub node_name: String,
    /// The enabled feeds.
    pub feeds: BTreeSet<Feed>,
    /// `service_selector`.
    pub service_selector: Option<LabelSelector>,
    /// `node_selector`.
    pub node_selector: Option<LabelSelector>,
    /// `network_policy_selector`.
    pub network_policy_selector: Option<LabelSelector>,
    /// `service_cidrs` (joined with the cluster's ServiceCIDRs).
    pub service_cidrs: Vec<IpNet>,
    /// `cluster_cidrs`; `None` = this node's pod CIDRs.
    pub cluster_cidrs: Option<Vec<IpNet>>,
    /// `node_port_addresses`.
    pub node_port_addresses: NodePortAddresses,
    /// `isolate_unknown_pods`.
    pub isolate_unknown_pods: bool,
    /// `pod_cidrs`; `None` = this node's pod CIDRs (its Node's).
    pub pod_cidrs: Option<Vec<IpNet>>,
    /// `log_denied`.
    pub log_denied: bool,
    /// `network_policy_mode`.
    pub network_policy_mode: PolicyMode,
}

impl Settings {
    /// True when the NetworkPolicies part needs this node's Node (its pod CIDRs, for
    /// `isolate_unknown_pods` without `pod_cidrs`).
    fn policies_need_node(&self) -> bool {
        self.feeds.contains(&Feed::NetworkPolicies)
            && self.isolate_unknown_pods
            && self.pod_cidrs.is_none()
    }
}

/// Runs one reflector until shutdown; boxed so reflectors of every object type go in one list.
type Runner =
    Box<dyn FnOnce(Box<dyn Progress + Send>, Shutdown) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The stores the parts are made from (`None` for a resource no enabled feed needs).
#[derive(Default)]
struct Stores {
    /// Services.
    services: Option<Store<Box<objects::Service>>>,
    /// EndpointSlices.
    endpointslices: Option<Store<Box<objects::EndpointSlice>>>,
    /// ServiceCIDRs.
    service_cidrs: Option<Store<objects::ServiceCidr>>,
    /// Nodes.
    nodes: Option<Store<objects::Node>>,
    /// NetworkPolicies.
    network_policies: Option<Store<objects::NetworkPolicy>>,
    /// ClusterNetworkPolicies.
    cluster_network_policies: Option<Store<objects::ClusterNetworkPolicy>>,
    /// Pods (of every node: policy peers can be anywhere).
    pods: Option<Store<objects::Pod>>,
    /// Namespaces.
    namespaces: Option<Store<objects::Namespace>>,
}

/// The reflectors, not yet running, and their stores.
pub struct Watcher {
    /// What to watch.
    settings: Settings,
    /// The reflectors, to start on the watcher's thread.
    runners: Vec<Runner>,
    /// Their stores.
    stores: Stores,
    /// Every watched kind (for /healthz and metrics).
    watched: Vec<Watched>,
    /// What the translation left out (for the log, /healthz and metrics).
    skips: Skips,
    /// Each Service's translation, kept between parts.
    memo: std::cell::RefCell<memo::ServicesMemo>,
    /// Arrivals of new pod addresses, timed to their commit (`isolate_unknown_pods`).
    enforce: enforce::EnforceClock,
    /// The known pod addresses of the last NetworkPolicies part (new ones are timed).
    known: std::cell::RefCell<Vec<std::net::IpAddr>>,
    /// Fired by every reflector when its store changed.
    changed: Trigger,
    /// The other end.
    changed_rx: TriggerRx,
    /// Every answered request of every reflector.
    reached: Arc<Reached>,
}

impl Watcher {
    /// The reflectors the enabled feeds need.
    pub fn new(settings: Settings) -> Watcher {
        let (changed, changed_rx) = trigger();
        let mut w = Watcher {
            settings,
            runners: Vec::new(),
            stores: Stores::default(),
            watched: Vec::new(),
            skips: Skips::default(),
            memo: Default::default(),
            enforce: Default::default(),
            known: Default::default(),
            changed,
            changed_rx,
            reached: Arc::default(),
        };
        let feeds = w.settings.feeds.clone();
        if feeds.contains(&Feed::Services) {
            let sel = w.settings.service_selector.clone();
            w.stores.services = Some(w.watch("services", "/api/v1/services", sel.as_ref()));
            w.stores.endpointslices = Some(w.watch(
                "endpointslices",
                "/apis/discovery.k8s.io/v1/endpointslices",
                None,
            ));
            // Served from Kubernetes 1.33 (beta and off by default before): a server without
            // them has none, and the configured `service_cidrs` stand alone.
            w.stores.service_cidrs = Some(w.watch_with(
                "servicecidrs",
                "/apis/networking.k8s.io/v1/servicecidrs",
                None,
                true,
                None,
            ));
        }
        let need_node = w.settings.policies_need_node();
        if feeds.contains(&Feed::Services) || feeds.contains(&Feed::Routes) || need_node {
            // With the services feed (or the pod CIDRs for the NetworkPolicies) this node's
            // own Node is needed whatever its labels; the selector then applies here, to the
            // routes only.
            let sel = if feeds.contains(&Feed::Services) || need_node {
                None
            } else {
                w.settings.node_selector.clone()
            };
            let keys = node_label_keys(w.settings.node_selector.as_ref());
            w.stores.nodes =
                Some(w.watch_with("nodes", "/api/v1/nodes", sel.as_ref(), false, Some(keys)));
        }
        if feeds.contains(&Feed::NetworkPolicies) {
            let sel = w.settings.network_policy_selector.clone();
            w.stores.network_policies = Some(w.watch(
                "networkpolicies",
                "/apis/networking.k8s.io/v1/networkpolicies",
                sel.as_ref(),
            ));
            // A CRD (kubernetes-sigs/network-policy-api), installed in few clusters: a server
            // without it has none, and the NetworkPolicies stand alone.
            w.stores.cluster_network_policies = Some(w.watch_with(
                "clusternetworkpolicies",
                CLUSTER_NETWORK_POLICIES,
                None,
                true,
                None,
            ));
            let pods = w.watch("pods", "/api/v1/pods", None);
            if w.settings.isolate_unknown_pods {
                pods.keep_stamps();
            }
            w.stores.pods = Some(pods);
            w.stores.namespaces = Some(w.watch("namespaces", "/api/v1/namespaces", None));
        }
        w
    }

    /// Adds a reflector of the collection at `path`; returns its store.
    pub fn watch<T>(
        &mut self,
        kind: &'static str,
        path: &str,
        selector: Option<&LabelSelector>,
    ) -> Store<T>
    where
        T: Decode + HasMeta + Clone + Send + Sync + 'static,
    {
        self.watch_with(kind, path, selector, false, None)
    }

    /// [`Watcher::watch`], for a resource the server may not serve when `absent_ok`.
    fn watch_with<T>(
        &mut self,
        kind: &'static str,
        path: &str,
        selector: Option<&LabelSelector>,
        absent_ok: bool,
        label_keys: Option<Vec<String>>,
    ) -> Store<T>
    where
        T: Decode + HasMeta + Clone + Send + Sync + 'static,
    {
        let mut config = ReflectorConfig::new(&format!("{}{path}", self.settings.path_prefix));
        config.absent_ok = absent_ok;
        config.label_keys = label_keys;
        config.label_selector = selector.map(|s| s.to_string()).filter(|s| !s.is_empty());
        let changed = self.changed.clone();
        self.start(kind, config, changed, None)
    }

    /// Watches the one ConfigMap `cm` (`[kubernetes] config_map`): its own trigger fires
    /// when it changes (it goes to the reloads, not to the composer), and the watch is
    /// opened again whenever `reconnect` fires (the proof a config from the cluster waits
    /// for: see [`Reached`]).
    pub fn watch_config_map(
        &mut self,
        cm: &ConfigMapRef,
        changed: Trigger,
        reconnect: TriggerRx,
    ) -> Store<objects::ConfigMap> {
        let path = format!(
            "{}/api/v1/namespaces/{}/configmaps",
            self.settings.path_prefix, cm.namespace
        );
        let mut config = ReflectorConfig::new(&path);
        config.field_selector = Some(format!("metadata.name={}", cm.name));
        self.start("configmaps", config, changed, Some(reconnect))
    }

    /// Where every request this watcher's reflectors make is recorded when answered.
    pub fn reached(&self) -> Arc<Reached> {
        self.reached.clone()
    }

    /// Adds a reflector of `config` to run on the watcher's thread; returns its store.
    fn start<T>(
        &mut self,
        kind: &'static str,
        mut config: ReflectorConfig,
        changed: Trigger,
        reconnect: Option<TriggerRx>,
    ) -> Store<T>
    where
        T: Decode + HasMeta + Clone + Send + Sync + 'static,
    {
        config.idle_timeout = IDLE_TIMEOUT;
        config.reached = Some(self.reached.clone());
        let mut reflector: Reflector<T> =
            Reflector::new(self.settings.endpoint.clone(), config, changed);
        if let Some(rx) = reconnect {
            reflector.reconnect_on(rx);
        }
        let store = reflector.store();
        self.watched.push(Watched::new(kind, store.clone()));
        self.runners.push(Box::new(move |progress, shutdown| {
            Box::pin(async move {
                let mut reflector = reflector;
                let stop = async move {
                    let _ = shutdown.recv().await;
                };
                reflector.run(&*progress, stop).await;
            })
        }));
        store
    }

    /// The kinds of entries the enabled feeds make (readiness waits for each).
    pub fn kinds(&self) -> Vec<Kind> {
        let mut out = Vec::new();
        if self.settings.feeds.contains(&Feed::Services) {
            out.push(Kind::Services);
        }
        if self.settings.feeds.contains(&Feed::Routes) {
            out.push(Kind::Routes);
        }
        if self.settings.feeds.contains(&Feed::NetworkPolicies) {
            out.push(Kind::NetworkPolicies);
        }
        out
    }

    /// Takes the watched kinds' status handles (call once, before [`Watcher::run`]).
    pub fn statuses(&mut self) -> Statuses {
        Statuses(
            std::sync::Arc::new(std::mem::take(&mut self.watched)),
            self.skips.clone(),
        )
    }

    /// The clock new pods are timed with (the daemon reports the policy commits to it).
    pub fn enforce_clock(&self) -> enforce::EnforceClock {
        self.enforce.clone()
    }

    /// Every part whose stores have all listed.
    fn parts(&self, host: &Host) -> Vec<ClusterPart> {
        let s = &self.settings;
        let connected = &host.connected;
        let listed_nodes = self.stores.nodes.as_ref().and_then(parts::listed);
        let mut out = Vec::new();
        if let (Some(svcs), Some(slices), Some(cidrs), Some(nodes)) = (
            self.stores.services.as_ref().filter(|s| s.is_synced()),
            self.stores
                .endpointslices
                .as_ref()
                .filter(|s| s.is_synced()),
            self.stores.service_cidrs.as_ref().and_then(parts::listed),
            listed_nodes.as_ref(),
        ) {
            // Taken only here, once both have listed: changes taken and not translated
            // would be lost to the memo.
            let (svcs, svc_changes) = svcs.take_changes();
            let (slices, slice_changes) = slices.take_changes();
            out.push(parts::services_part(
                memo::Changed {
                    now: &svcs,
                    changes: &svc_changes,
                },
                memo::Changed {
                    now: &slices,
                    changes: &slice_changes,
                },
                &cidrs,
                nodes,
                parts::Here {
                    node_name: &s.node_name,
                    settings: s,
                    host_addresses: &host.addresses,
                    skips: &self.skips,
                },
                &mut self.memo.borrow_mut(),
            ));
        }
        if let (true, Some(nodes)) = (s.feeds.contains(&Feed::Routes), listed_nodes.as_ref()) {
            out.push(parts::routes_part(
                nodes,
                s.node_selector.as_ref(),
                &s.node_name,
                connected,
                &self.skips,
            ));
        }
        let node_listed = !s.policies_need_node() || listed_nodes.is_some();
        if let (Some(policies), Some(cluster_policies), Some(pods), Some(namespaces), true) = (
            self.stores
                .network_policies
                .as_ref()
                .and_then(parts::listed),
            self.stores
                .cluster_network_policies
                .as_ref()
                .and_then(parts::listed),
            self.stores.pods.as_ref().and_then(parts::listed),
            self.stores.namespaces.as_ref().and_then(parts::listed),
            node_listed,
        ) {
            let me = listed_nodes
                .as_ref()
                .and_then(|n| n.get(&(String::new(), s.node_name.clone())));
            let unknown_cidrs = s
                .isolate_unknown_pods
                .then(|| s.pod_cidrs.clone().unwrap_or_else(|| parts::pod_cidrs(me)));
            let part = parts::network_policies_part(
                &policies,
                &cluster_policies,
                &pods,
                &namespaces,
                &parts::PolicyHere {
                    node_name: &s.node_name,
                    mode: s.network_policy_mode,
                    report_denied: s.log_denied,
                    unknown_cidrs,
                },
                &self.skips,
            );
            self.time_arrivals(&part, &pods);
            out.push(part);
        }
        out
    }

    /// Notes when each address the NetworkPolicies part `part` knows and the last one did not
    /// arrived (its Pod's stamp in the store), for [`enforce::EnforceClock`].
    fn time_arrivals(
        &self,
        part: &ClusterPart,
        pods: &std::collections::BTreeMap<crate::kubernetes::client::ObjectKey, objects::Pod>,
    ) {
        let ClusterPart::NetworkPolicies(p) = part else {
            return;
        };
        let Some(store) = self.stores.pods.as_ref() else {
            return;
        };
        let stamps = store.take_stamps();
        let known = p
            .unknown
            .as_ref()
            .map(|u| u.known.clone())
            .unwrap_or_default();
        let mut last = self.known.borrow_mut();
        let now = Instant::now();
        let arrived: Vec<_> = stamps
            .iter()
            .filter_map(|(key, at)| pods.get(key).map(|pod| (pod, *at)))
            .flat_map(|(pod, at)| {
                let ips = pod.status.pod_ips.iter().map(|i| i.ip.as_str());
                ips.chain(pod.status.pod_ip.as_deref())
                    .filter_map(|ip| ip.parse().ok())
                    .map(move |ip| (ip, at))
                    .collect::<Vec<_>>()
            })
            .filter(|(ip, _)| known.binary_search(ip).is_ok() && last.binary_search(ip).is_err())
            .collect();
        // A known address whose Pod carries no stamp (it came before stamps were kept) is
        // timed from now: never longer than it took.
        let unstamped = known
            .iter()
            .filter(|ip| last.binary_search(ip).is_err())
            .filter(|ip| !arrived.iter().any(|(a, _)| a == *ip))
            .map(|ip| (*ip, now))
            .collect::<Vec<_>>();
        self.enforce
            .arrived(arrived.into_iter().chain(unstamped), &known);
        *last = known;
    }

    /// Runs the reflectors and the compose step on the calling thread until shutdown;
    /// `publish` gets the parts after each burst of changes, and no parts at every tick
    /// without one.
    pub fn run<P>(
        mut self,
        progress: P,
        shutdown: Shutdown,
        statuses: Statuses,
        mut publish: impl FnMut(Vec<ClusterPart>),
    ) where
        P: Progress + Clone + Send + 'static,
    {
        let ex = smol::LocalExecutor::new();
        let tasks: Vec<smol::Task<()>> = std::mem::take(&mut self.runners)
            .into_iter()
            .map(|run| ex.spawn(run(Box::new(progress.clone()), shutdown.clone())))
            .collect();
        smol::block_on(ex.run(self.compose_loop(&progress, &shutdown, &statuses, &mut publish)));
        drop(tasks);
    }

    /// Composes after each burst of store changes (and when the interfaces' subnets
    /// change); refreshes the metrics; beats at every wake-up, so the thread's liveness
    /// shows even while every watch is quiet.
    async fn compose_loop(
        &self,
        progress: &dyn Progress,
        shutdown: &Shutdown,
        statuses: &Statuses,
        publish: &mut dyn FnMut(Vec<ClusterPart>),
    ) {
        let mut pacer = Pacer::default();
        let wants_addresses = self.settings.feeds.contains(&Feed::Services)
            && self.settings.node_port_addresses != NodePortAddresses::Primary;
        let mut host = Host::read(wants_addresses);
        let mut next_tick = Instant::now() + TICK;
        loop {
            metrics::record(statuses);
            let wake = pacer.due().map_or(next_tick, |due| due.min(next_tick));
            let woke = async {
                self.changed_rx.recv().await;
                true
            }
            .or(async {
                smol::Timer::at(wake).await;
                false
            });
            let Some(changed) = unless_shutdown(shutdown, woke).await else {
                return;
            };
            progress.beat();
            let now = Instant::now();
            if changed {
                pacer.changed(now);
            }
            let ticked = now >= next_tick;
            if ticked {
                next_tick = now + TICK;
                let fresh = Host::read(wants_addresses);
                if fresh != host {
                    host = fresh;
                    pacer.changed(now);
                }
            }
            if pacer.is_due(now) {
                pacer.composed();
                publish(self.parts(&host));
                progress.beat();
            } else if ticked {
                // No parts: the caller follows the watch's progress (a first list that
                // failed changes no store, so nothing else would tell it).
                publish(Vec::new());
            }
        }
    }
}

/// What the parts read of this host, read again at every tick.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Host {
    /// The directly connected subnets (pod routes' gateways).
    connected: Vec<IpNet>,
    /// The interfaces' addresses (`node_port_addresses` other than `primary`).
    addresses: Vec<std::net::IpAddr>,
}

impl Host {
    /// Reads the subnets, and the addresses when `addresses` (only then are they used).
    fn read(addresses: bool) -> Host {
        Host {
            connected: read_connected(),
            addresses: if addresses {
                local::interface_addresses().unwrap_or_else(|e| {
                    log::warn!("kubernetes: cannot read the interfaces' addresses: {e}");
                    Vec::new()
                })
            } else {
                Vec::new()
            },
        }
    }
}

/// The interfaces' subnets now; none when they cannot be read (logged).
fn read_connected() -> Vec<IpNet> {
    local::connected_subnets().unwrap_or_else(|e| {
        log::warn!("kubernetes: cannot read the interfaces' addresses: {e}");
        Vec::new()
    })
}

/// The labels of a Node anything here reads: the zone (topology hints) and the keys of
/// `node_selector` (applied here, to the routes, when the services feed lists every Node).
fn node_label_keys(selector: Option<&LabelSelector>) -> Vec<String> {
    let mut keys = vec![parts::ZONE_LABEL.to_string()];
    for r in selector.map_or(&[][..], |s| s.requirements.as_slice()) {
        if !keys.contains(&r.key) {
            keys.push(r.key.clone());
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_keep_the_zone_and_the_node_selectors_keys() {
        let sel = LabelSelector::parse("edgenetd.io/router=true,!cordoned,zone-x in (a)").unwrap();
        assert_eq!(
            node_label_keys(Some(&sel)),
            [
                parts::ZONE_LABEL,
                "edgenetd.io/router",
                "cordoned",
                "zone-x"
            ]
        );
        assert_eq!(node_label_keys(None), [parts::ZONE_LABEL]);
    }
}
