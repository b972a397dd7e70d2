//! The kubernetes source's metrics, read from the stores' watch states (the reflector counts
//! in its [`crate::kubernetes::client::WatchStatus`]; these series mirror those counts with
//! `absolute`, so nothing is counted twice).

use super::status::Statuses;

/// 1 while a watch stream of the kind is open.
pub const CONNECTED: &str = "edgenetd_kubernetes_connected";
/// 1 once the kind was listed completely.
pub const SYNCED: &str = "edgenetd_kubernetes_synced";
/// Watch lines received, by kind and type.
pub const EVENTS: &str = "edgenetd_kubernetes_events_total";
/// Complete lists, by kind and mode (`streaming` or `paged`).
pub const LISTS: &str = "edgenetd_kubernetes_lists_total";
/// Lists after the first, by kind and reason.
pub const RELISTS: &str = "edgenetd_kubernetes_relists_total";
/// Failed requests and streams, by kind and code.
pub const REQUEST_ERRORS: &str = "edgenetd_kubernetes_request_errors_total";
/// Objects in the kind's store.
pub const OBJECTS: &str = "edgenetd_kubernetes_objects";
/// Objects (or parts) left out by the translation, by kind and reason.
pub const SKIPPED: &str = "edgenetd_kubernetes_skipped_total";
/// List items refused for their size, by kind and reason.
pub const REFUSED: &str = "edgenetd_kubernetes_objects_refused_total";
/// Writes of the cluster-state cache that failed.
pub const CACHE_WRITE_FAILURES: &str = "edgenetd_kubernetes_cache_write_failures_total";

/// The event types whose series exist from the start.
const EVENT_TYPES: [&str; 4] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"];

/// Describes the metrics.
pub fn describe() {
    metrics::describe_gauge!(
        CONNECTED,
        "1 while a watch stream of this API resource is open, else 0."
    );
    metrics::describe_gauge!(
        SYNCED,
        "1 once this API resource was listed completely (stays 1 through outages: the last known state is kept)."
    );
    metrics::describe_counter!(
        EVENTS,
        "Watch events received, by API resource and type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)."
    );
    metrics::describe_counter!(
        LISTS,
        "Complete lists stored, by API resource and mode (streaming: one watch with sendInitialEvents, Kubernetes 1.32 and later; paged: limit and continue, the fallback)."
    );
    metrics::describe_counter!(
        RELISTS,
        "Complete lists after the first, by API resource and reason (gone: the watch's resourceVersion left the server's history, 410)."
    );
    metrics::describe_counter!(
        REQUEST_ERRORS,
        "Failed list or watch requests, by API resource and code (the HTTP status, or io, idle, protocol, decode, too_large, config)."
    );
    metrics::describe_gauge!(OBJECTS, "Objects of this API resource held in memory.");
    metrics::describe_counter!(
        CACHE_WRITE_FAILURES,
        "Writes of the cluster-state cache that failed (the daemon keeps running; a restart during an API outage would then use an older cache or none)."
    );
    metrics::counter!(CACHE_WRITE_FAILURES).absolute(0);
    metrics::describe_counter!(
        REFUSED,
        "Objects refused without being read, by API resource and reason (too_large: a list item over the 4 MiB one object may take; left out of the store)."
    );
    metrics::describe_counter!(
        SKIPPED,
        "Objects or parts of them left out by the translation, by API resource and reason (counted once when they appear, again only if they come back after being gone)."
    );
}

/// Sets every series from the stores now.
pub fn record(statuses: &Statuses) {
    for ((kind, reason), n) in statuses.1.counts() {
        metrics::counter!(SKIPPED, "kind" => kind, "reason" => reason).absolute(n);
    }
    for w in statuses.0.iter() {
        let (s, objects) = w.probe();
        let kind = w.kind;
        metrics::gauge!(CONNECTED, "kind" => kind).set(f64::from(u8::from(s.connected)));
        metrics::gauge!(SYNCED, "kind" => kind).set(f64::from(u8::from(s.synced)));
        metrics::gauge!(OBJECTS, "kind" => kind).set(objects as f64);
        metrics::counter!(RELISTS, "kind" => kind, "reason" => "gone").absolute(s.relists_gone);
        metrics::counter!(LISTS, "kind" => kind, "mode" => "streaming").absolute(s.lists_streamed);
        metrics::counter!(LISTS, "kind" => kind, "mode" => "paged")
            .absolute(s.lists - s.lists_streamed);
        metrics::counter!(REFUSED, "kind" => kind, "reason" => "too_large")
            .absolute(s.refused_too_large);
        for t in EVENT_TYPES {
            let n = s.events_by_type.get(t).copied().unwrap_or(0);
            metrics::counter!(EVENTS, "kind" => kind, "type" => t).absolute(n);
        }
        for (t, n) in &s.events_by_type {
            if !EVENT_TYPES.contains(t) {
                metrics::counter!(EVENTS, "kind" => kind, "type" => *t).absolute(*n);
            }
        }
        for (code, n) in &s.errors_by_code {
            metrics::counter!(REQUEST_ERRORS, "kind" => kind, "code" => code.clone()).absolute(*n);
        }
    }
}
