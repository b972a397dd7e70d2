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
    /// Complete lists stored (the first included).
    pub lists: u64,
    /// Relists caused by 410 Gone.
    pub relists_gone: u64,
    /// Watch events applied (bookmarks excluded).
    pub events: u64,
    /// Watch lines received, by type (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`).
    pub events_by_type: BTreeMap<&'static str, u64>,
    /// Failed requests and streams, by HTTP status code or, without one, by
    /// [`super::Error::label`] (`io`, `idle`, ...).
    pub errors_by_code: BTreeMap<String, u64>,
}

/// The shared state.
#[derive(Debug)]
struct Inner<T> {
    /// The objects.
    objects: Arc<BTreeMap<ObjectKey, T>>,
    /// The watch's state.
    status: WatchStatus,
}

/// A reader's handle on a reflector's store; cheap to clone.
#[derive(Debug)]
pub struct Store<T> {
    /// The shared state.
    inner: Arc<RwLock<Inner<T>>>,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Clone> Store<T> {
    /// An empty, unsynced store.
    pub fn new() -> Store<T> {
        Store {
            inner: Arc::new(RwLock::new(Inner {
                objects: Arc::new(BTreeMap::new()),
                status: WatchStatus::default(),
            })),
        }
    }

    /// The objects now: an immutable snapshot, cheap to take (the writer copies on write).
    pub fn snapshot(&self) -> Arc<BTreeMap<ObjectKey, T>> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .objects
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
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .status
            .clone()
    }

    /// Replaces every object at once (a complete list).
    pub(super) fn replace(&self, objects: BTreeMap<ObjectKey, T>) {
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .objects = Arc::new(objects);
    }

    /// Inserts or removes one object.
    pub(super) fn apply(&self, key: ObjectKey, obj: Option<T>) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let objects = Arc::make_mut(&mut inner.objects);
        match obj {
            Some(obj) => objects.insert(key, obj),
            None => objects.remove(&key),
        };
    }

    /// Changes the watch's state.
    pub(super) fn update_status(&self, f: impl FnOnce(&mut WatchStatus)) {
        f(&mut self.inner.write().unwrap_or_else(|e| e.into_inner()).status);
    }
}

impl<T: Clone> Default for Store<T> {
    fn default() -> Self {
        Store::new()
    }
}
