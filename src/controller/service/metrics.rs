//! The service controller's metrics: names, descriptions, and what a sync records.

/// Services (VIP:port/protocol) programmed.
pub const SERVICES: &str = "edgenetd_services";
/// Backends receiving new connections, summed over services.
pub const BACKENDS: &str = "edgenetd_service_backends";
/// Drift repairs.
pub const DRIFT_REPAIRS: &str = "edgenetd_service_drift_repairs_total";
/// Full compares of the table with the kernel that ran to the end (at startup, after a failed
/// batch or a foreign commit, once per period).
pub const FULL_COMPARES: &str = "edgenetd_service_full_compares_total";
/// Periodic full compares stopped partway to let a waiting change go first (each starts again
/// after it; see `defer`).
pub const FULL_COMPARES_INTERRUPTED: &str = "edgenetd_service_full_compares_interrupted_total";
/// Seconds the last full compare that ran to the end took.
pub const FULL_COMPARE_SECONDS: &str = "edgenetd_service_full_compare_last_seconds";
/// 1 while a health-checked backend is up (labels `service`, `backend`; see `backend_check`).
pub const BACKEND_UP: &str = "edgenetd_backend_up";
/// Failed health checks of a backend.
pub const BACKEND_CHECK_FAILURES: &str = "edgenetd_backend_check_failures_total";
/// Up/down transitions of a backend.
pub const BACKEND_TRANSITIONS: &str = "edgenetd_backend_transitions_total";

/// Describes the service metrics and sets every series to 0 (called once at startup).
pub fn describe_metrics() {
    metrics::describe_gauge!(SERVICES, "Services (VIP:port/protocol) programmed");
    metrics::describe_gauge!(
        BACKENDS,
        "Backends receiving new connections, summed over services"
    );
    metrics::describe_counter!(
        DRIFT_REPAIRS,
        "Service table elements or structure found changed behind edgenetd's back and repaired"
    );
    metrics::describe_counter!(
        FULL_COMPARES,
        "Full compares of the service table with the kernel that ran to the end"
    );
    metrics::describe_counter!(
        FULL_COMPARES_INTERRUPTED,
        "Periodic full compares of the service table stopped partway for a waiting change (started again after it)"
    );
    metrics::describe_gauge!(
        FULL_COMPARE_SECONDS,
        "Seconds the last full compare of the service table that ran to the end took"
    );
    // Per backend: the health checks create each backend's series when it gets a probe.
    metrics::describe_gauge!(
        BACKEND_UP,
        "1 while a checked backend is up, 0 while its health check holds it down"
    );
    metrics::describe_counter!(BACKEND_CHECK_FAILURES, "Failed health checks of a backend");
    metrics::describe_counter!(BACKEND_TRANSITIONS, "Up/down transitions of a backend");
    metrics::gauge!(SERVICES).set(0.0);
    metrics::gauge!(BACKENDS).set(0.0);
    metrics::counter!(DRIFT_REPAIRS).absolute(0);
    metrics::counter!(FULL_COMPARES).absolute(0);
    metrics::counter!(FULL_COMPARES_INTERRUPTED).absolute(0);
    metrics::gauge!(FULL_COMPARE_SECONDS).set(0.0);
}

/// Counts one full compare that took `took`.
pub fn record_full_compare(took: std::time::Duration) {
    metrics::counter!(FULL_COMPARES).increment(1);
    metrics::gauge!(FULL_COMPARE_SECONDS).set(took.as_secs_f64());
}

/// Counts one full compare stopped partway for a waiting change.
pub fn record_interrupted_compare() {
    metrics::counter!(FULL_COMPARES_INTERRUPTED).increment(1);
}

/// Records what is programmed: `services` and the `backends` with slots summed over them.
pub fn record_programmed(services: usize, backends: usize) {
    metrics::gauge!(SERVICES).set(services as f64);
    metrics::gauge!(BACKENDS).set(backends as f64);
}

/// Counts `n` drift repairs of one sync.
pub fn record_drift_repairs(n: u64) {
    metrics::counter!(DRIFT_REPAIRS).increment(n);
}
