//! What the fake API server holds: objects per resource, a global resourceVersion counter, a
//! bounded history of changes (older watches get 410), the faults waiting to be served, and
//! the log of every request.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `(resource, namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type Key = (String, String, String);

/// One change, as watches replay it.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion the change was written at.
    pub rv: u64,
    /// The resource (`services`, `endpointslices`, ...).
    pub resource: String,
    /// The object before the change (None for a creation).
    pub old: Option<Value>,
    /// The object after the change (None for a deletion).
    pub new: Option<Value>,
}

/// Which requests a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// List requests only.
    List,
    /// Watch requests only.
    Watch,
    /// Any request.
    Any,
}

/// A misbehaviour served instead of the normal answer, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// An HTTP error status, with `Retry-After: <seconds>` when given.
    Status {
        /// The status code.
        code: u16,
        /// The Retry-After seconds.
        retry_after: Option<u64>,
    },
    /// Accept, read the request, and never answer (until the server stops).
    Hang,
    /// Answer a watch with 200, send nothing, and never end it.
    HangAfterHead,
    /// Answer a watch with 200 and an ERROR event with code 410 (the watch cache's way).
    WatchGoneEvent,
    /// Answer a watch with 200 and end the stream at once, empty.
    EmptyWatch,
    /// Wait this long, then answer normally (a slow page: `Delay(ZERO)` passes one request).
    Delay(std::time::Duration),
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The path without the query.
    pub path: String,
    /// The query parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// When it arrived.
    pub at: Instant,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The status the fake answered.
    pub code: u16,
    /// The method (`GET`, `POST`, `PUT`).
    pub method: String,
}

impl Request {
    /// True for a watch request that is not a streamed list (which is a list, though
    /// asked as a watch).
    pub fn is_watch(&self) -> bool {
        query_bool(&self.query, "watch") && !self.is_streamed_list()
    }

    /// True for a streamed list: a watch with `sendInitialEvents=true` (KEP-3157).
    pub fn is_streamed_list(&self) -> bool {
        query_bool(&self.query, "watch") && query_bool(&self.query, "sendInitialEvents")
    }

    /// True for a list, paged or streamed.
    pub fn is_list(&self) -> bool {
        !self.is_watch()
    }

    /// True for a list page (`limit`, `continue`).
    pub fn is_paged_list(&self) -> bool {
        !query_bool(&self.query, "watch")
    }
}

/// How the fake answers a streamed list (`watch=1&sendInitialEvents=true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamedLists {
    /// As Kubernetes 1.32 and later do: every object as ADDED, then the bookmark annotated
    /// `k8s.io/initial-events-end`, then the watch.
    #[default]
    Served,
    /// As older servers (or the `WatchList` feature off) do: 422 Invalid.
    Rejected,
    /// As a server that ignores the parameters would: a plain watch from now (the objects as
    /// ADDED), with no end bookmark.
    Ignored,
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it (clients send `1`, `true`
/// or `True`).
pub fn query_bool(query: &BTreeMap<String, String>, key: &str) -> bool {
    matches!(
        query.get(key).map(String::as_str),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// Everything behind the fake's lock.
#[derive(Debug, Default)]
pub struct State {
    /// The last resourceVersion written.
    pub rv: u64,
    /// The objects now.
    pub objects: BTreeMap<Key, Value>,
    /// Recent changes, oldest first.
    pub history: VecDeque<Change>,
    /// A watch from a resourceVersion older than this is answered 410.
    pub oldest_rv: u64,
    /// The most changes kept in `history`.
    pub window: usize,
    /// Faults waiting for a request.
    pub faults: VecDeque<(On, Fault)>,
    /// Every request.
    pub log: Vec<Request>,
    /// The bearer token required (None: any or none).
    pub token: Option<String>,
    /// The largest chunk a watch stream writes (so chunks split event lines).
    pub chunk_size: usize,
    /// How often watches with bookmarks send one.
    pub bookmark_every: Option<Duration>,
    /// Answer too-old watches with HTTP 410 instead of an ERROR event in a 200 stream.
    pub gone_as_http: bool,
    /// Bumped to end every open watch stream abruptly (a dropped connection).
    pub generation: u64,
    /// True while the server is stopped.
    pub stopped: bool,
    /// Paged lists in progress: token id -> (resourceVersion, the remaining items).
    pub snapshots: HashMap<u64, (u64, Vec<Value>)>,
    /// The next snapshot id.
    pub next_snapshot: u64,
    /// Resources this server does not serve (every request for them is a 404), as an older
    /// API server lacks a newer kind.
    pub absent: BTreeSet<String>,
    /// How streamed lists are answered.
    pub streamed_lists: StreamedLists,
    /// Creates and updates are answered 403 Forbidden (an RBAC role without the verbs).
    pub refuse_writes: bool,
    /// Every connection that ended: its request and the bytes it carried.
    pub connections: Vec<Traffic>,
}

/// One connection's traffic, on the wire (TLS records and handshake included).
#[derive(Debug, Clone)]
pub struct Traffic {
    /// The request's method and path (empty when none was read).
    pub method: String,
    /// The path.
    pub path: String,
    /// Bytes the client sent.
    pub bytes_in: u64,
    /// Bytes the server sent.
    pub bytes_out: u64,
}

impl State {
    /// Records one change: bumps the resourceVersion, stamps it on the object, keeps history.
    pub fn write(&mut self, resource: &str, mut obj: Option<Value>, key: Key) {
        self.rv += 1;
        let old = self.objects.remove(&key);
        if let Some(o) = &mut obj {
            o["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
            self.objects.insert(key, o.clone());
        }
        // A deletion's event carries the last state at the deletion's version.
        let new = obj.clone();
        let old = old.map(|mut o| {
            if new.is_none() {
                o["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
            }
            o
        });
        self.history.push_back(Change {
            rv: self.rv,
            resource: resource.to_string(),
            old,
            new,
        });
        while self.history.len() > self.window {
            if let Some(c) = self.history.pop_front() {
                self.oldest_rv = c.rv;
            }
        }
    }

    /// Takes the first fault that applies to a list (`watch` false, a streamed list too) or a
    /// watch.
    pub fn take_fault(&mut self, watch: bool) -> Option<Fault> {
        let i = self.faults.iter().position(|(on, _)| match on {
            On::Any => true,
            On::List => !watch,
            On::Watch => watch,
        })?;
        self.faults.remove(i).map(|(_, f)| f)
    }
}

/// The labels of an object.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The namespace of an object ("" when cluster-scoped).
pub fn namespace_of(obj: &Value) -> &str {
    obj["metadata"]["namespace"].as_str().unwrap_or("")
}
