//! `[kubernetes]`: where the cluster is, how edgenetd proves who it is, and what it takes from
//! it. Parsed and validated in every build, so a build without the `kubernetes` feature can
//! say at the section's place that it needs one, instead of calling the section unknown.
//!
//! The key names are a contract (checks outside the repository write them):
//! - `in_cluster = true`: the pod's service account (token, CA and API address from the
//!   files and environment a pod is given); excludes `server`, `ca_file`, `token_file`,
//!   `client_cert`, `client_key`.
//! - otherwise `server` (an `https://` URL) and `ca_file`, plus exactly one of `token_file`
//!   or `client_cert` + `client_key` (k3s from outside the cluster);
//! - or `server` an `http://` URL to this node's loopback (127.0.0.0/8, `::1`, `localhost`):
//!   a node-local list/watch proxy (KubeEdge's MetaServer, OpenYurt's YurtHub) that
//!   authenticates upstream itself; `token_file` optional, no `ca_file` or client certificate.
//! - `node_name`: this node's Node name; absent = the host name.
//! - `feeds`: any of `"services"`, `"routes"`, `"network_policies"`; default all three.
//! - `service_selector`, `node_selector`, `network_policy_selector`: label selectors (the
//!   string form of `kubectl -l`) narrowing the Services, Nodes and NetworkPolicies taken.
//! - `cache_file`: where the last cluster state is kept across restarts (an absolute path;
//!   absent = `/run/edgenetd/kubernetes-state.json`; on persistent storage such as
//!   `/var/lib/edgenetd/kubernetes-state.json` it outlives a reboot too).
//! - `cache_max_age`: a duration; a cached state last known to be the cluster's longer ago
//!   than this (or of unknown age) is not used at start; absent = no limit.
//! - `service_cidrs`: prefixes cluster IPs are allocated from, in addition to the cluster's
//!   ServiceCIDR objects.
//! - `cluster_cidrs`: the pod prefixes (kube-proxy's local-traffic detector); absent = this
//!   node's own pod CIDRs (its Node's `spec.podCIDRs`); `[]` = no detector.
//! - `node_port_addresses`: where NodePorts are served: `["primary"]` (default), `["all"]`,
//!   or prefixes.
//! - `isolate_unknown_pods`: addresses of this node's pod prefixes that no known Pod has are
//!   dropped both ways; `pod_cidrs`: those prefixes (absent = the Node's `spec.podCIDRs`).
//! - `log_denied`: what NetworkPolicies drop is reported (log line and counter);
//!   `network_policy_mode`: `"enforce"` (default) or `"audit"` (report, do not drop), which a
//!   policy's `edgenetd.io/mode` annotation overrides.
//! - `config_map`: `"namespace/name"` of a ConfigMap whose data keys are TOML fragments,
//!   merged after the local files (the local files win a key set in both).
//! - `config_confirm`: a duration (default 2 min): a config from the cluster is rolled back
//!   unless the router reaches the API server again within it.
//! - `status_namespace`: the namespace of this router's Lease (named after `node_name`),
//!   renewed while every loop is live; absent = no Lease is written.
//!
//! A secret may be a file or, under systemd, a credential: `"credential:NAME"` names the file
//! `NAME` in `$CREDENTIALS_DIRECTORY` (`LoadCredential=NAME:/path`), read when connecting, so
//! the unit's dynamic user never needs access to the original file.

mod model;
mod raw;
pub mod selector;
#[cfg(test)]
mod tests;
mod validate;

pub use model::*;
pub use validate::{parse_server_url, validate};

/// The section's name.
pub const SECTION: &str = "kubernetes";

/// True when this build can act on `[kubernetes]`.
pub const BUILT_WITH_FEATURE: bool = cfg!(feature = "kubernetes");
