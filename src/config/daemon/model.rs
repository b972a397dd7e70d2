//! The validated `[daemon]` and `[controller.*]` settings and their defaults.

use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;

/// The controllers that exist in every build, in the order they are started.
pub const CONTROLLERS: [&str; 3] = ["policy", "service", "route"];

/// Default HTTP listen address: loopback only, so nothing is exposed until asked for.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9750";
/// Default prefix of edgenetd's nftables tables.
pub const DEFAULT_NFT_TABLE_PREFIX: &str = "edgenetd";
/// Default rtm_protocol marking edgenetd's routes and rules (unassigned in rt_protos).
pub const DEFAULT_ROUTE_PROTOCOL: u8 = 190;
/// Default full-resync period of a controller.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(30);
/// Default time one sync may take before the loop counts as wedged.
pub const DEFAULT_SYNC_BUDGET: Duration = Duration::from_secs(30);

/// Validated `[daemon]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSettings {
    /// HTTP listen address for /healthz, /livez, /readyz and /metrics.
    pub listen: SocketAddr,
    /// Sources allowed to use the HTTP endpoints; `None` allows everyone.
    pub metrics_allow: Option<Vec<IpNet>>,
    /// Prefix of the nftables tables: `<prefix>-policy`, `<prefix>-service`.
    pub nft_table_prefix: String,
    /// rtm_protocol that marks edgenetd's routes and rules.
    pub route_protocol: u8,
    /// Interfaces the boot lockdown keeps open to the router (`management`): when the
    /// config does not validate at start and no last good configuration is kept, input
    /// from these is accepted and everything else new is dropped. No effect otherwise.
    pub management: Vec<String>,
}

impl Default for DaemonSettings {
    fn default() -> Self {
        DaemonSettings {
            listen: DEFAULT_LISTEN.parse().expect("valid default"),
            metrics_allow: None,
            nft_table_prefix: DEFAULT_NFT_TABLE_PREFIX.to_string(),
            route_protocol: DEFAULT_ROUTE_PROTOCOL,
            management: Vec::new(),
        }
    }
}

impl DaemonSettings {
    /// The policy controller's table name (family inet).
    pub fn policy_table(&self) -> String {
        format!("{}-policy", self.nft_table_prefix)
    }

    /// The service controller's table name (family inet).
    pub fn service_table(&self) -> String {
        format!("{}-service", self.nft_table_prefix)
    }
}

/// Validated `[controller.<name>]` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerSettings {
    /// A disabled controller is not started and owns nothing.
    pub enabled: bool,
    /// Full resync at least this often.
    pub period: Duration,
    /// How long one sync may take before the loop counts as wedged.
    pub sync_budget: Duration,
}

impl Default for ControllerSettings {
    fn default() -> Self {
        ControllerSettings {
            enabled: true,
            period: DEFAULT_PERIOD,
            sync_budget: DEFAULT_SYNC_BUDGET,
        }
    }
}
impl ControllerSettings {
    /// How long a controller may go without a heartbeat and still be live.
    pub fn liveness_window(&self) -> Duration {
        self.period + self.sync_budget
    }
}
