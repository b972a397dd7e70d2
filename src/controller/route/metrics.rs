//! The route controller's metrics: names and descriptions (the sync records them).

use metrics::{counter, describe_counter, describe_gauge, gauge};

/// Drift repairs counter.
pub const DRIFT_REPAIRS: &str = "edgenetd_route_drift_repairs_total";
/// Desired routes gauge.
pub const ROUTES_DESIRED: &str = "edgenetd_routes_desired";
/// Installed (owned) routes gauge.
pub const ROUTES_INSTALLED: &str = "edgenetd_routes_installed";

/// Describes the route controller's metrics and creates them at 0 (call once at startup).
pub fn describe_metrics() {
    describe_counter!(
        DRIFT_REPAIRS,
        "Owned routes and rules found missing or changed (by someone else) and restored."
    );
    describe_gauge!(ROUTES_DESIRED, "Routes the configuration asks for.");
    describe_gauge!(
        ROUTES_INSTALLED,
        "Routes carrying edgenetd's route protocol in the kernel after the last sync."
    );
    counter!(DRIFT_REPAIRS).absolute(0);
    gauge!(ROUTES_DESIRED).set(0.0);
    gauge!(ROUTES_INSTALLED).set(0.0);
}
