//! The `[kubernetes]` table as written (serde, unknown keys refused).

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKubernetes {
    pub(super) server: Option<Spanned<String>>,
    pub(super) ca_file: Option<Spanned<String>>,
    pub(super) token_file: Option<Spanned<String>>,
    pub(super) client_cert: Option<Spanned<String>>,
    pub(super) client_key: Option<Spanned<String>>,
    pub(super) in_cluster: Option<Spanned<bool>>,
    pub(super) node_name: Option<Spanned<String>>,
    pub(super) feeds: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) service_selector: Option<Spanned<String>>,
    pub(super) node_selector: Option<Spanned<String>>,
    pub(super) network_policy_selector: Option<Spanned<String>>,
    pub(super) cache_file: Option<Spanned<String>>,
    pub(super) cache_max_age: Option<Spanned<String>>,
    pub(super) service_cidrs: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) cluster_cidrs: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) node_port_addresses: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) isolate_unknown_pods: Option<Spanned<bool>>,
    pub(super) pod_cidrs: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) log_denied: Option<Spanned<bool>>,
    pub(super) network_policy_mode: Option<Spanned<String>>,
    // Keys only a `kubernetes` build knows: without it they are unknown keys, as before them.
    #[cfg(feature = "kubernetes")]
    pub(super) config_map: Option<Spanned<String>>,
    #[cfg(feature = "kubernetes")]
    pub(super) config_confirm: Option<Spanned<String>>,
    pub(super) status_namespace: Option<Spanned<String>>,
    #[cfg(feature = "fault-injection")]
    #[serde(default)]
    pub(super) inject_status_renew_ms: u64,
}
