//! What a reflector knows: the objects by namespace/name, whether the first list completed,
//! and the state of the watch, shared with readers behind a lock.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::meta::HasMeta;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// The key of an object.
pub fn key_of<T: HasMeta>(obj: &T) -> ObjectKey {
    let meta = obj.metadata();
    (meta.namespace.clone(), meta.name.clone())
}

/// How the watch stands, for /healthz and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchStatus {
    /// True while a watch stream is open.
    pub connected: bool,
    /// True once a complete list was stored (stays true through outages: the store holds the
    /// last known state).
    pub synced: bool,
    /// The resourceVersion the next watch resumes from.
    pub resource_version: String,
    /// The last failure, if the last attempt failed.
    pub last_error: Option<String>,
    /// The server answered the last list with 404 for a resource it may not serve (the
    /// store is then empty and counts as listed).
    pub absent: bool,
    /// Complete lists stored (the first included).
    pub lists: u64,
    /// Of `lists`, those streamed (a watch with `sendInitialEvents`); the rest came in pages.
    pub lists_streamed: u64,
    /// Relists caused by 410 Gone.
    pub relists_gone: u64,
    /// Watch events applied (bookmarks excluded).
    pub events: u64,
    /// Watch lines received, by type (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`).
    pub events_by_type: BTreeMap<&'static str, u64>,
    /// List items refused for their size (over the one-object cap).
    pub refused_too_large: u64,
    /// Failed requests and streams, by HTTP status code or, without one, by
    /// [`super::Error::label`] (`io`, `idle`, ...).
    pub errors_by_code: BTreeMap<String, u64>,
}

/// The watch state, shared by the reflector (which writes it) and the store's readers.
#[derive(Debug, Clone, Default)]
pub(super) struct StatusCell(Arc<RwLock<WatchStatus>>);

impl StatusCell {
    /// The state now.
    pub(super) fn get(&self) -> WatchStatus {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes the state.
    pub(super) fn update(&self, f: impl FnOnce(&mut WatchStatus)) {
        f(&mut self.0.write().unwrap_or_else(|e| e.into_inner()));
    }
}

/// A reader's handle on a reflector's store; cheap to clone.
#[derive(Debug)]
pub struct Store<T> {
    /// The objects: an immutable snapshot, replaced (copied on write) by the reflector.
    objects: Arc<RwLock<Arc<BTreeMap<ObjectKey, T>>>>,
    /// The watch's state (apart from the objects, so the reflector's untyped part can
    /// write it).
    status: StatusCell,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Store {
            objects: self.objects.clone(),
            status: self.status.clone(),
        }
    }
}

impl<T: Clone> Store<T> {
    /// An empty, unsynced store.
    pub fn new() -> Store<T> {
        Store {
            objects: Arc::new(RwLock::new(Arc::new(BTreeMap::new()))),
            status: StatusCell::default(),
        }
    }

    /// The objects now: an immutable snapshot, cheap to take (the writer copies on write).
    pub fn snapshot(&self) -> Arc<BTreeMap<ObjectKey, T>> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<T> {
        self.snapshot()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// True once the first complete list is in.
    pub fn is_synced(&self) -> bool {
        self.status().synced
    }

    /// The watch's state.
    pub fn status(&self) -> WatchStatus {
        self.status.get()
    }

    /// The watch state's shared cell.
    pub(super) fn status_cell(&self) -> StatusCell {
        self.status.clone()
    }

    /// Replaces every object at once (a complete list).
    pub(super) fn replace(&self, objects: BTreeMap<ObjectKey, T>) {
        *self.objects.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(objects);
    }

    /// Inserts or removes one object.
    pub(super) fn apply(&self, key: ObjectKey, obj: Option<T>) {
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        let objects = Arc::make_mut(&mut guard);
        match obj {
            Some(obj) => objects.insert(key, obj),
            None => objects.remove(&key),
        };
    }
}

impl<T: Clone> Default for Store<T> {
    fn default() -> Self {
        Store::new()
    }
}
