//! client-go's reflector on smol: list, then watch from the list's resourceVersion, keeping a
//! [`Store`] of the objects.
//!
//! - The list is streamed where the server offers it (KEP-3157, on by default from Kubernetes
//!   1.32): one watch with `sendInitialEvents=true` and `resourceVersionMatch=NotOlderThan`
//!   sends every object as an ADDED event, then a bookmark annotated
//!   `k8s.io/initial-events-end`, and goes on as the watch. Objects arrive one line at a
//!   time (no page of 500 held whole while decoded) and the watch costs no second request. A
//!   server that refuses it (400 or 422: older servers, or the `WatchList` feature off), or
//!   whose watch brings no end bookmark within `initial_events_timeout`, or nothing at all
//!   for `initial_events_quiet` (a server that streams sends the bookmark right after the
//!   last object), or ends without one, is listed in pages from then on, for the
//!   reflector's life.
//! - A dropped connection or a watch the server ended (`timeoutSeconds`) resumes from the
//!   last resourceVersion seen (events and bookmarks): no relist, so an API server restart
//!   costs one request per kind, not a full list.
//! - 410 Gone (as the HTTP status, or as an ERROR event inside a 200 watch) means the
//!   resourceVersion left the server's history: list again, after the back-off like any
//!   failure (client-go waits at least 0.8 s too). The new list is built aside and
//!   replaces the store only when its last page is in, so readers never see objects vanish
//!   and come back.
//! - 429 and 504 wait for `Retry-After` (capped); every other failure backs off
//!   exponentially with jitter. Only a watch that delivers an event or a bookmark ends the
//!   back-off: a list that succeeds does not, or a server whose every watch answers 410
//!   would get a list and a watch per round trip (a relist storm). The first failure of a
//!   run is warned; the rest of it is logged at debug, and its end at info.
//! - A watch that delivers nothing, not even a bookmark, for longer than `idle_timeout` is
//!   taken for dead and reopened (resuming).
//! - A resource the server may not serve (`absent_ok`, e.g. ServiceCIDRs before Kubernetes
//!   1.33): a 404 on the list is an empty, complete list, not an error, and so is a 403 (an
//!   RBAC role of before the resource was read: warned once, so an upgrade that did not
//!   re-apply the role does not stop what the other resources feed); the list is tried
//!   again every `absent_recheck`, so a cluster upgraded later is picked up.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::FutureExt;

use super::backoff::Backoff;
use super::endpoint::Endpoint;
use super::error::Error;
use super::http::{Body, Conn};
use super::json::{self, Decode};
use super::meta::{HasMeta, ListMeta, Refused, Status, WatchEvent, read_page};
use super::store::{ObjectKey, StatusCell, Store, key_of};
use crate::kubernetes::reached::Reached;
use crate::sync::{Progress, Trigger, TriggerRx};

/// A watch that ends sooner than this without one line is taken as a failure (backed off).
const QUICK_WATCH_END: Duration = Duration::from_secs(1);

/// A list with a page larger than this hands the freed memory back to the system once done
/// (the allocator keeps freed memory for reuse: a spike would otherwise stay resident).
const GIVE_BACK_AFTER: usize = 4 << 20;

/// What to list and watch, and the bounds.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// The collection's path, e.g. `/api/v1/services` or
    /// `/apis/discovery.k8s.io/v1/endpointslices`.
    pub path: String,
    /// A label selector (`a=b,c in (d,e)`), sent as `labelSelector`.
    pub label_selector: Option<String>,
    /// A field selector (`metadata.name=x`), sent as `fieldSelector`: one object of a
    /// collection, as an RBAC rule with `resourceNames` allows.
    pub field_selector: Option<String>,
    /// Where every answered request is recorded (see [`Reached`]).
    pub reached: Option<Arc<Reached>>,
    /// Objects per list page (`limit`).
    pub page_size: u32,
    /// The server ends each watch after this long (`timeoutSeconds`); the reflector resumes.
    pub watch_timeout: Duration,
    /// The longest silence tolerated from a watch (the API server sends a bookmark about every
    /// minute), and the bound on connecting and on each read.
    pub idle_timeout: Duration,
    /// The largest list page body, and the longest watch line read at all (a longer line
    /// fails the watch: it is not even read to be named).
    pub max_page_bytes: usize,
    /// One object's size cap: a list item or a watch event's object over it is refused
    /// undecoded (named, counted and left out; the rest of the list, or the watch, goes on).
    pub max_line_bytes: usize,
    /// The first back-off after a failure.
    pub backoff_initial: Duration,
    /// The longest back-off.
    pub backoff_max: Duration,
    /// The longest `Retry-After` honoured.
    pub max_retry_after: Duration,
    /// A 404 on the list means the server does not serve the resource: the store holds an
    /// empty complete list (instead of backing off and logging each attempt).
    pub absent_ok: bool,
    /// How often a resource found absent is listed again.
    pub absent_recheck: Duration,
    /// Lists are first tried as a stream (see the module doc); false lists in pages only.
    pub streaming: bool,
    /// Only these labels are kept of each object (None: every label its kind decodes), for
    /// kinds whose labels a selector known only at run time reads (Nodes: the zone and the
    /// keys of `node_selector`).
    pub label_keys: Option<Vec<String>>,
    /// The longest a streamed list may take to reach its end bookmark before the server is
    /// taken for one that does not stream (and listed in pages).
    pub initial_events_timeout: Duration,
    /// The longest a streamed list may send nothing (no object, no bookmark) before the
    /// server is taken for one that ignores the parameters: one that streams sends its
    /// objects back to back and the end bookmark right after them, so a quiet watch is a
    /// plain watch that will never end the list (an offline node proxy, say).
    pub initial_events_quiet: Duration,
}

impl ReflectorConfig {
    /// The defaults for the collection at `path`.
    pub fn new(path: &str) -> ReflectorConfig {
        ReflectorConfig {
            path: path.to_string(),
            label_selector: None,
            field_selector: None,
            reached: None,
            page_size: 500,
            watch_timeout: Duration::from_secs(290),
            idle_timeout: Duration::from_secs(150),
            max_page_bytes: 64 << 20,
            max_line_bytes: 4 << 20,
            backoff_initial: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            absent_ok: false,
            absent_recheck: Duration::from_secs(300),
            streaming: true,
            label_keys: None,
            initial_events_timeout: Duration::from_secs(60),
            initial_events_quiet: Duration::from_secs(10),
        }
    }
}

/// What the reflector must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// A complete list is needed (first start, or after 410 Gone).
    List,
    /// Watch from this resourceVersion.
    Watch(String),
}

/// Lists and watches one collection into a [`Store`].
///
/// Only decoding and storing depend on the object type (`Kept`); the requests, the watch
/// state machine and the back-off are one untyped `Core`, so each kind watched adds a few
/// hundred bytes of code instead of a copy of the whole client.
pub struct Reflector<T> {
    /// The untyped part: requests, phases, back-off, status.
    core: Core,
    /// The typed part: the store and the list being built.
    kept: Kept<T>,
}

impl<T> Reflector<T>
where
    T: Decode + HasMeta + Clone,
{
    /// A reflector that has not listed yet.
    pub fn new(endpoint: Endpoint, config: ReflectorConfig, changed: Trigger) -> Reflector<T> {
        let store = Store::new();
        let backoff = Backoff::new(config.backoff_initial, config.backoff_max);
        let label_keys = config.label_keys.clone();
        Reflector {
            core: Core {
                endpoint,
                status: store.status_cell(),
                changed,
                backoff,
                phase: Phase::List,
                streams: config.streaming,
                config,
                reconnect: None,
            },
            kept: Kept {
                store,
                pending: BTreeMap::new(),
                label_keys,
            },
        }
    }

    /// Ends the open watch whenever `rx` fires, and watches again from where it was (a new
    /// connection, which [`ReflectorConfig::reached`] records when it is answered).
    pub fn reconnect_on(&mut self, rx: TriggerRx) {
        self.core.reconnect = Some(rx);
    }

    /// The reader's handle on the store.
    pub fn store(&self) -> Store<T> {
        self.kept.store.clone()
    }

    /// Lists and watches until `stop` completes, beating `progress` at each page, event
    /// line, reconnect attempt and back-off wait.
    pub async fn run(&mut self, progress: &dyn Progress, stop: impl Future<Output = ()>) {
        async {
            loop {
                self.step(progress).await;
            }
        }
        .or(stop)
        .await
    }

    /// One list or one watch connection, then the wait its outcome calls for.
    pub async fn step(&mut self, progress: &dyn Progress) {
        self.core.step(&mut self.kept, progress).await
    }
}

/// The typed side of a reflector, as the untyped [`Core`] drives it.
trait Sink {
    /// A list starts: forget any partial one.
    fn begin_list(&mut self);
    /// Decodes one list page into the list being built, refusing items over `max_item`
    /// bytes; returns the page's list metadata.
    fn page(&mut self, body: &[u8], max_item: usize) -> Result<ListMeta, Error>;
    /// The list is complete: it replaces the store. Returns its size.
    fn end_list(&mut self) -> usize;
    /// Decodes one watch line and applies an object event to the store; an object over
    /// `max_object` bytes is refused undecoded (and left out of the store).
    fn line(&mut self, line: &[u8], max_object: usize) -> Result<Line, Error>;
    /// Decodes one line of a streamed list (before its end bookmark) into the list being
    /// built, as [`Sink::line`] applies one to the store.
    fn initial(&mut self, line: &[u8], max_object: usize) -> Result<Initial, Error>;
}

/// One line of a streamed list, before its end bookmark.
enum Initial {
    /// An object went into the list being built (or out of it, for a DELETED).
    Object,
    /// A bookmark; `end` when it is the initial-events-end one, at the list's version.
    Bookmark {
        /// The version reached.
        rv: String,
        /// It closes the initial events.
        end: bool,
    },
    /// An ERROR event.
    Error(Status),
    /// An object over the size cap, refused undecoded and left out of the list.
    Refused(Refused),
}

/// One watch line, as far as the untyped side needs it.
enum Line {
    /// An object was added, changed or deleted (already applied to the store).
    Object {
        /// `ADDED`, `MODIFIED` or `DELETED`.
        kind: &'static str,
        /// The object's resourceVersion.
        rv: String,
    },
    /// A bookmark at this resourceVersion.
    Bookmark(String),
    /// An ERROR event.
    Error(Status),
    /// An object over the size cap, refused undecoded and left out of the store.
    Refused {
        /// `ADDED`, `MODIFIED` or `DELETED`.
        kind: &'static str,
        /// Who, and how big.
        refused: Refused,
        /// An older version was in the store and was removed.
        removed: bool,
    },
}

impl Line {
    /// The event type, for the per-type counts.
    fn kind(&self) -> &'static str {
        match self {
            Line::Object { kind, .. } | Line::Refused { kind, .. } => kind,
            Line::Bookmark(_) => "BOOKMARK",
            Line::Error(_) => "ERROR",
        }
    }
}

/// The store of one object type, and a list being built for it.
struct Kept<T> {
    /// The objects.
    store: Store<T>,
    /// The pages of the list in progress; they replace the store when the last is in, so
    /// readers never see objects vanish and come back.
    pending: BTreeMap<ObjectKey, T>,
    /// The labels kept ([`ReflectorConfig::label_keys`]).
    label_keys: Option<Vec<String>>,
}

/// `obj` with only the labels `keys` names (all, for None).
fn trimmed<T: HasMeta>(mut obj: T, keys: &Option<Vec<String>>) -> T {
    if let Some(keys) = keys {
        obj.metadata_mut().labels.retain(|k, _| keys.contains(k));
    }
    obj
}

impl<T> Sink for Kept<T>
where
    T: Decode + HasMeta + Clone,
{
    fn begin_list(&mut self) {
        self.pending.clear();
    }

    fn page(&mut self, body: &[u8], max_item: usize) -> Result<ListMeta, Error> {
        let (pending, keys) = (&mut self.pending, &self.label_keys);
        read_page(body, max_item, &mut |item| {
            let obj = trimmed(T::decode(item)?, keys);
            pending.insert(key_of(&obj), obj);
            Ok(())
        })
        .map_err(Error::Decode)
    }

    fn end_list(&mut self) -> usize {
        let objects = std::mem::take(&mut self.pending);
        let count = objects.len();
        self.store.replace(objects);
        count
    }

    fn line(&mut self, line: &[u8], max_object: usize) -> Result<Line, Error> {
        let event = WatchEvent::<T>::from_line(line, max_object).map_err(Error::Decode)?;
        let (kind, obj, present) = match event {
            WatchEvent::Added(o) => ("ADDED", o, true),
            WatchEvent::Modified(o) => ("MODIFIED", o, true),
            WatchEvent::Deleted(o) => ("DELETED", o, false),
            WatchEvent::Bookmark(b) => return Ok(Line::Bookmark(b.metadata.resource_version)),
            WatchEvent::Error(status) => return Ok(Line::Error(status)),
            WatchEvent::Refused(kind, refused) => {
                // Left out, as a list leaves it out: an older, smaller version must not
                // stay served as if it were current.
                let key = (refused.namespace.clone(), refused.name.clone());
                let removed = self.store.snapshot().contains_key(&key);
                if removed {
                    self.store.apply(key, None);
                }
                return Ok(Line::Refused {
                    kind,
                    refused,
                    removed,
                });
            }
        };
        let obj = trimmed(obj, &self.label_keys);
        let rv = obj.metadata().resource_version.clone();
        self.store.apply(key_of(&obj), present.then_some(obj));
        Ok(Line::Object { kind, rv })
    }

    fn initial(&mut self, line: &[u8], max_object: usize) -> Result<Initial, Error> {
        let event = WatchEvent::<T>::from_line(line, max_object).map_err(Error::Decode)?;
        Ok(match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let o = trimmed(o, &self.label_keys);
                self.pending.insert(key_of(&o), o);
                Initial::Object
            }
            WatchEvent::Deleted(o) => {
                self.pending.remove(&key_of(&o));
                Initial::Object
            }
            WatchEvent::Bookmark(b) => Initial::Bookmark {
                end: b.is_initial_events_end(),
                rv: b.metadata.resource_version,
            },
            WatchEvent::Error(status) => Initial::Error(status),
            WatchEvent::Refused(_, refused) => {
                self.pending
                    .remove(&(refused.namespace.clone(), refused.name.clone()));
                Initial::Refused(refused)
            }
        })
    }
}

/// How a streamed list attempt ended, when it did not fail.
enum Streamed {
    /// Listed (and watched on the same connection until it ended).
    Done,
    /// The server does not stream lists: why, for the log.
    Unsupported(String),
}

/// The untyped part of a reflector.
struct Core {
    /// The API server.
    endpoint: Endpoint,
    /// What and how.
    config: ReflectorConfig,
    /// The watch state, shared with the store's readers.
    status: StatusCell,
    /// Fired after each change to the store (coalescing).
    changed: Trigger,
    /// The back-off state.
    backoff: Backoff,
    /// The next step.
    phase: Phase,
    /// Lists are tried as streams (until the server refuses one).
    streams: bool,
    /// Ends the open watch when fired (see [`Reflector::reconnect_on`]).
    reconnect: Option<TriggerRx>,
}

impl Core {
    /// One list or one watch connection, then the wait its outcome calls for (boxed: one
    /// copy of the state machine serves every object type).
    fn step<'a>(
        &'a mut self,
        sink: &'a mut dyn Sink,
        progress: &'a dyn Progress,
    ) -> Pin<Box<dyn Future<Output = ()> + 'a>> {
        Box::pin(async move {
            progress.beat();
            let outcome = match self.phase.clone() {
                Phase::List => self.list(sink, progress).await,
                Phase::Watch(rv) => self.watch(sink, &rv, progress).await,
            };
            self.status.update(|s| s.connected = false);
            let wait = match outcome {
                Ok(()) => None,
                Err(e) if self.config.absent_ok && matches!(e.code(), Some(403 | 404)) => {
                    Some(self.absent(sink, e.code() == Some(403)))
                }
                Err(e) => self.after_failure(e),
            };
            if let Some(wait) = wait {
                log::debug!("kubernetes {}: retrying in {wait:?}", self.config.path);
                progress.beat();
                smol::Timer::after(wait).await;
                progress.beat();
            }
        })
    }

    /// The server does not serve the resource (or `forbidden`: not to us): an empty
    /// complete list (logged when it is news), and a list again after `absent_recheck`.
    fn absent(&mut self, sink: &mut dyn Sink, forbidden: bool) -> Duration {
        let was_absent = self.status.get().absent;
        if !was_absent && forbidden {
            log::warn!(
                "kubernetes {}: forbidden (403): taken as none; grant list and watch on it (deploy/kubernetes/rbac.yaml)",
                self.config.path
            );
        } else if !was_absent {
            log::info!(
                "kubernetes {}: not served by this API server (404): taken as none",
                self.config.path
            );
        }
        sink.begin_list();
        sink.end_list();
        self.status.update(|s| {
            s.synced = true;
            s.absent = true;
            s.last_error = None;
        });
        if !was_absent {
            self.changed.fire();
        }
        self.phase = Phase::List;
        self.config.absent_recheck
    }

    /// Records a failure and decides the next phase and the wait before it.
    fn after_failure(&mut self, e: Error) -> Option<Duration> {
        if self.backoff.failures() == 0 {
            log::warn!("kubernetes {}: {e}", self.config.path);
        } else {
            // The same run of failures (an outage, a 410 storm): warned once at its start.
            log::debug!(
                "kubernetes {}: {e} (failure {} in a row)",
                self.config.path,
                self.backoff.failures() + 1
            );
        }
        self.status.update(|s| {
            s.last_error = Some(e.to_string());
            *s.errors_by_code.entry(e.label()).or_default() += 1;
        });
        if e.is_gone() {
            // The history no longer holds our version: relist (the store stays), backed off
            // so that a server answering 410 to every watch is not hammered.
            self.phase = Phase::List;
            self.status.update(|s| s.relists_gone += 1);
            return Some(self.backoff.next_delay());
        }
        match e {
            Error::Status {
                code: 429 | 504,
                retry_after: Some(after),
                ..
            } => Some(after.min(self.config.max_retry_after)),
            _ => Some(self.backoff.next_delay()),
        }
    }

    /// Counts and warns the objects refused for their size, list items or watch events (the
    /// rest of the list, or the watch, is taken: one oversized object must not hold back
    /// every other).
    fn refuse(&mut self, refused: &[Refused]) {
        for r in refused {
            log::warn!(
                "kubernetes {}: {} is {} bytes, over the {} bytes one object may take: refused (left out)",
                self.config.path,
                r.object(),
                r.bytes,
                self.config.max_line_bytes
            );
        }
        if !refused.is_empty() {
            self.status
                .update(|s| s.refused_too_large += refused.len() as u64);
        }
    }

    /// The query string's common part.
    fn query(&self, mut q: String) -> String {
        if let Some(sel) = &self.config.label_selector {
            q.push_str("&labelSelector=");
            q.push_str(&percent_encode(sel));
        }
        if let Some(sel) = &self.config.field_selector {
            q.push_str("&fieldSelector=");
            q.push_str(&percent_encode(sel));
        }
        format!("{}?{}", self.config.path, q)
    }

    /// Opens a connection and sends one GET; an error status becomes [`Error::Status`].
    async fn request(&self, path: &str) -> Result<(Conn, super::http::Head), Error> {
        let opened = Instant::now();
        let mut conn = Conn::open(&self.endpoint, self.config.idle_timeout).await?;
        let head = conn.get(&self.endpoint, path).await?;
        if let (200, Some(reached)) = (head.code, &self.config.reached) {
            reached.answered(opened);
        }
        if head.code != 200 {
            let body = Body::new(&mut conn, &head)
                .read_all(64 << 10, "error body")
                .await;
            let status: Status = body
                .ok()
                .and_then(|b| json::from_slice(&b).ok())
                .unwrap_or_default();
            return Err(Error::Status {
                code: head.code,
                message: status.message.chars().take(200).collect(),
                retry_after: head.retry_after,
            });
        }
        Ok((conn, head))
    }

    /// Lists (streamed, else in pages); on success replaces the store and moves to watching.
    async fn list(&mut self, sink: &mut dyn Sink, progress: &dyn Progress) -> Result<(), Error> {
        if self.streams {
            match self.stream(sink, progress).await? {
                Streamed::Done => return Ok(()),
                Streamed::Unsupported(why) => {
                    self.streams = false;
                    log::info!(
                        "kubernetes {}: the API server does not stream lists ({why}): listing in pages",
                        self.config.path
                    );
                }
            }
        }
        self.paged(sink, progress).await
    }

    /// A streamed list: one watch sends every object, then the end bookmark, then goes on as
    /// the watch (until the server ends it, or it fails).
    async fn stream(
        &mut self,
        sink: &mut dyn Sink,
        progress: &dyn Progress,
    ) -> Result<Streamed, Error> {
        sink.begin_list();
        let q = format!(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={}",
            self.config.watch_timeout.as_secs().max(1)
        );
        let (mut conn, head) = match self.request(&self.query(q)).await {
            Err(e) if matches!(e.code(), Some(400 | 422)) => {
                return Ok(Streamed::Unsupported(e.to_string()));
            }
            r => r?,
        };
        self.status.update(|s| s.connected = true);
        let mut body = Body::new(&mut conn, &head);
        let deadline = std::time::Instant::now() + self.config.initial_events_timeout;
        let quiet = self.config.initial_events_quiet;
        let max_line = self.config.max_page_bytes;
        let rv = loop {
            let wait = deadline.min(std::time::Instant::now() + quiet);
            let next = async { Some(body.next_line(max_line).await) }
                .or(async {
                    smol::Timer::at(wait).await;
                    None
                })
                .await;
            let Some(line) = next else {
                let why = if std::time::Instant::now() >= deadline {
                    format!("within {:?}", self.config.initial_events_timeout)
                } else {
                    format!("and nothing for {quiet:?}")
                };
                return Ok(Streamed::Unsupported(format!(
                    "no initial-events-end bookmark {why}"
                )));
            };
            let Some(line) = line? else {
                return Ok(Streamed::Unsupported(
                    "the watch ended before its initial-events-end bookmark".into(),
                ));
            };
            let initial = sink.initial(&line, self.config.max_line_bytes);
            drop(line);
            progress.beat();
            match initial? {
                Initial::Object => {}
                Initial::Refused(r) => self.refuse(std::slice::from_ref(&r)),
                Initial::Bookmark { rv, end: true } => break rv,
                // Progress bookmarks of a server that does not stream: the timeout decides.
                Initial::Bookmark { end: false, .. } => {}
                Initial::Error(status) if matches!(status.code, 400 | 422) => {
                    return Ok(Streamed::Unsupported(format!(
                        "{} {}",
                        status.reason, status.message
                    )));
                }
                Initial::Error(status) => {
                    return Err(Error::Status {
                        code: status.code,
                        message: format!("{} {}", status.reason, status.message),
                        retry_after: None,
                    });
                }
            }
        };
        let count = sink.end_list();
        self.listed(count, rv, true);
        // No back-off reset for the list itself (as for a paged one): only the events after
        // it prove the server healthy.
        self.follow(sink, &mut body, progress).await?;
        Ok(Streamed::Done)
    }

    /// A complete list of `count` objects at `rv` is in the store: the status says so, and
    /// the watch starts from `rv`.
    fn listed(&mut self, count: usize, rv: String, streamed: bool) {
        self.status.update(|s| {
            s.synced = true;
            s.absent = false;
            s.lists += 1;
            s.lists_streamed += u64::from(streamed);
            s.resource_version = rv.clone();
            s.last_error = None;
        });
        let how = if streamed { "streamed" } else { "in pages" };
        if self.backoff.failures() == 0 {
            log::info!(
                "kubernetes {}: listed {count} at {rv} ({how})",
                self.config.path
            );
        } else {
            log::debug!(
                "kubernetes {}: listed {count} at {rv} ({how})",
                self.config.path
            );
        }
        self.changed.fire();
        // No back-off reset here: only a watch that delivers proves the server healthy.
        self.phase = Phase::Watch(rv);
    }

    /// Lists every page; on success replaces the store and moves to watching.
    async fn paged(&mut self, sink: &mut dyn Sink, progress: &dyn Progress) -> Result<(), Error> {
        sink.begin_list();
        let mut token: Option<String> = None;
        let mut largest = 0;
        let rv = loop {
            let mut q = format!("limit={}", self.config.page_size);
            if let Some(t) = &token {
                q.push_str("&continue=");
                q.push_str(&percent_encode(t));
            }
            let (mut conn, head) = self.request(&self.query(q)).await?;
            let body = Body::new(&mut conn, &head)
                .read_all(self.config.max_page_bytes, "list page")
                .await?;
            let meta = sink.page(&body, self.config.max_line_bytes)?;
            largest = largest.max(body.len());
            drop(body);
            self.refuse(&meta.refused);
            progress.beat();
            if meta.continue_token.is_empty() {
                break meta.resource_version;
            }
            token = Some(meta.continue_token);
        };
        let count = sink.end_list();
        if largest > GIVE_BACK_AFTER {
            crate::sys::trim_heap();
        }
        self.listed(count, rv, false);
        Ok(())
    }

    /// One watch connection from `rv`, applying events until the server ends it (Ok) or it
    /// fails.
    async fn watch(
        &mut self,
        sink: &mut dyn Sink,
        rv: &str,
        progress: &dyn Progress,
    ) -> Result<(), Error> {
        let q = format!(
            "watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={}",
            percent_encode(rv),
            self.config.watch_timeout.as_secs().max(1)
        );
        let opened = std::time::Instant::now();
        let (mut conn, head) = self.request(&self.query(q)).await?;
        self.status.update(|s| {
            s.connected = true;
            s.last_error = None;
        });
        let mut body = Body::new(&mut conn, &head);
        let lines = self.follow(sink, &mut body, progress).await?;
        // A server that ends every watch at once, saying nothing, must not be hammered.
        if lines == 0 && opened.elapsed() < QUICK_WATCH_END {
            return Err(Error::Protocol("the watch ended at once, empty".into()));
        }
        // A quiet watch the server ended in its time is healthy too.
        self.healthy();
        Ok(())
    }

    /// Applies a watch's events until the server ends it (returns the lines read) or it
    /// fails.
    async fn follow(
        &mut self,
        sink: &mut dyn Sink,
        body: &mut Body<'_>,
        progress: &dyn Progress,
    ) -> Result<u64, Error> {
        let mut lines = 0u64;
        // Lines are read up to the page cap, so that one over the object cap can be named and
        // refused like a list item instead of failing the watch (and every watch after it:
        // the same event comes again on each resume).
        loop {
            let asked = async {
                match &self.reconnect {
                    Some(rx) => {
                        rx.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
                None
            };
            let next = async { Some(body.next_line(self.config.max_page_bytes).await) }
                .or(asked)
                .await;
            let Some(line) = next else {
                log::debug!("kubernetes {}: watching again, as asked", self.config.path);
                // Not a quick empty end: the watch was ended here on purpose.
                return Ok(lines.max(1));
            };
            let Some(line) = line? else {
                break;
            };
            let big = line.len() > GIVE_BACK_AFTER;
            let decoded = sink.line(&line, self.config.max_line_bytes);
            drop(line);
            if big {
                crate::sys::trim_heap();
            }
            self.apply(decoded?)?;
            self.healthy();
            lines += 1;
            progress.beat();
        }
        Ok(lines)
    }

    /// The watch delivered: the run of failures (if any) is over, and the back-off with it.
    fn healthy(&mut self) {
        if self.backoff.failures() > 1 {
            log::info!(
                "kubernetes {}: watching again after {} failures in a row",
                self.config.path,
                self.backoff.failures()
            );
        }
        self.backoff.reset();
    }

    /// Counts one watch line and remembers its resourceVersion (the sink applied its object).
    fn apply(&mut self, line: Line) -> Result<(), Error> {
        let kind = line.kind();
        self.status
            .update(|s| *s.events_by_type.entry(kind).or_default() += 1);
        match line {
            Line::Bookmark(rv) => {
                if !rv.is_empty() {
                    self.resume_from(rv);
                }
            }
            Line::Error(status) => {
                return Err(Error::Status {
                    code: status.code,
                    message: format!("{} {}", status.reason, status.message),
                    retry_after: None,
                });
            }
            Line::Object { rv, .. } => {
                self.status.update(|s| s.events += 1);
                if !rv.is_empty() {
                    self.resume_from(rv);
                }
                self.changed.fire();
            }
            Line::Refused {
                refused, removed, ..
            } => {
                self.refuse(std::slice::from_ref(&refused));
                // Resumed after, so that a reconnect does not bring it (and its warning)
                // again.
                if !refused.resource_version.is_empty() {
                    self.resume_from(refused.resource_version);
                }
                if removed {
                    self.changed.fire();
                }
            }
        }
        Ok(())
    }

    /// The next watch starts from `rv`.
    fn resume_from(&mut self, rv: String) {
        self.status.update(|s| s.resource_version = rv.clone());
        self.phase = Phase::Watch(rv);
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::meta::ObjectMeta;
    use super::*;

    #[test]
    fn a_reflector_told_which_labels_to_keep_drops_the_others() {
        let mut meta = ObjectMeta::default();
        for k in ["topology.kubernetes.io/zone", "kubernetes.io/arch", "role"] {
            meta.labels.insert(k.into(), "x".into());
        }
        let keys = Some(vec!["topology.kubernetes.io/zone".into(), "role".into()]);
        let kept = trimmed(meta.clone(), &keys);
        assert_eq!(
            kept.labels.keys().collect::<Vec<_>>(),
            ["role", "topology.kubernetes.io/zone"]
        );
        assert_eq!(trimmed(meta, &None).labels.len(), 3, "None keeps all");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(percent_encode("app in (a,b)"), "app%20in%20%28a%2Cb%29");
        assert_eq!(percent_encode("x=y"), "x%3Dy");
    }
}
