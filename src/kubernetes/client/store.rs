//! What a reflector knows: the objects by namespace/name, whether the first list completed,
//! and the state of the watch, shared with readers behind a lock.
//!
//! The store also notes which keys changed since its reader last took them
//! ([`Store::take_changes`]), so that the parts made from it can re-translate only what
//! changed (issue 24).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Instant;

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

/// Which objects of a store changed since the changes were last taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Possibly every one: a complete list replaced them, or too many changed to list.
    All,
    /// These keys (added, modified or deleted); none when nothing changed.
    Keys(BTreeSet<ObjectKey>),
}

impl Changes {
    /// Nothing changed.
    pub fn none() -> Changes {
        Changes::Keys(BTreeSet::new())
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        matches!(self, Changes::Keys(k) if k.is_empty())
    }

    /// Notes a change of `key`. The list is bounded: past `limit` keys it becomes
    /// [`Changes::All`], so a store whose changes nobody takes (or that churns through
    /// objects faster than they are taken) holds no more than about its own size.
    fn note(&mut self, key: &ObjectKey, limit: usize) {
        if let Changes::Keys(keys) = self {
            if keys.len() >= limit {
                *self = Changes::All;
            } else if !keys.contains(key) {
                keys.insert(key.clone());
            }
        }
    }
}

/// The objects and what changed among them, under one lock so that both are read together.
#[derive(Debug)]
struct Objects<T> {
    /// The objects: an immutable snapshot, replaced (copied on write) by the reflector.
    now: Arc<BTreeMap<ObjectKey, T>>,
    /// The changes since the last [`Store::take_changes`].
    changes: Changes,
    /// When each object was last written, since the last [`Store::take_stamps`] (`None`:
    /// not kept, the default: only a reader that times objects from their arrival asks).
    stamps: Option<BTreeMap<ObjectKey, Instant>>,
}

/// The fewest keys a change list holds before it says [`Changes::All`] (a small store may
/// still list a burst of its changes).
const MIN_CHANGES_LIMIT: usize = 64;

/// A reader's handle on a reflector's store; cheap to clone.
#[derive(Debug)]
pub struct Store<T> {
    /// The objects and their changes.
    objects: Arc<RwLock<Objects<T>>>,
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
            objects: Arc::new(RwLock::new(Objects {
                now: Arc::new(BTreeMap::new()),
                changes: Changes::All,
                stamps: None,
            })),
            status: StatusCell::default(),
        }
    }

    /// From now on, the store notes when each object is written (see [`Store::take_stamps`]).
    pub fn keep_stamps(&self) {
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        guard.stamps.get_or_insert_with(BTreeMap::new);
    }

    /// When each object written since the last call was last written (as it arrived: a
    /// watch event, or the complete list it came in). Empty unless [`Store::keep_stamps`].
    pub fn take_stamps(&self) -> BTreeMap<ObjectKey, Instant> {
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        guard
            .stamps
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The objects now: an immutable snapshot, cheap to take (the writer copies on write).
    pub fn snapshot(&self) -> Arc<BTreeMap<ObjectKey, T>> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .now
            .clone()
    }

    /// The objects now and which of them changed since the last call (every one at the
    /// first). Meant for one reader, the one that makes the parts: each call starts the
    /// list afresh.
    pub fn take_changes(&self) -> (Arc<BTreeMap<ObjectKey, T>>, Changes) {
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        let changes = std::mem::replace(&mut guard.changes, Changes::none());
        (guard.now.clone(), changes)
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
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        if let Some(stamps) = guard.stamps.as_mut() {
            let now = Instant::now();
            stamps.extend(objects.keys().map(|k| (k.clone(), now)));
        }
        guard.now = Arc::new(objects);
        guard.changes = Changes::All;
    }

    /// Inserts or removes one object.
    pub(super) fn apply(&self, key: ObjectKey, obj: Option<T>) {
        let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
        let guard = &mut *guard;
        let limit = guard.now.len().max(MIN_CHANGES_LIMIT);
        guard.changes.note(&key, limit);
        if let Some(stamps) = guard.stamps.as_mut().filter(|_| obj.is_some()) {
            stamps.insert(key.clone(), Instant::now());
        }
        let objects = Arc::make_mut(&mut guard.now);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ("ns".to_string(), name.to_string())
    }

    #[test]
    fn the_store_lists_the_keys_changed_since_they_were_last_taken() {
        let store: Store<u32> = Store::new();
        assert_eq!(store.take_changes().1, Changes::All, "at first: everything");
        store.replace([(key("a"), 1), (key("b"), 2)].into_iter().collect());
        assert_eq!(
            store.take_changes().1,
            Changes::All,
            "a list replaces everything"
        );
        assert!(store.take_changes().1.is_empty());
        store.apply(key("a"), Some(3));
        store.apply(key("c"), Some(4));
        store.apply(key("b"), None);
        store.apply(key("a"), Some(5));
        let (now, changes) = store.take_changes();
        assert_eq!(
            changes,
            Changes::Keys([key("a"), key("b"), key("c")].into_iter().collect())
        );
        assert_eq!(now.get(&key("a")), Some(&5));
        assert!(!now.contains_key(&key("b")));
        assert!(store.take_changes().1.is_empty());
    }

    #[test]
    fn a_change_list_nobody_takes_stays_bounded() {
        let store: Store<u32> = Store::new();
        store.replace(BTreeMap::new());
        store.take_changes();
        for i in 0..MIN_CHANGES_LIMIT + 1 {
            let k = key(&i.to_string());
            store.apply(k.clone(), Some(1));
            store.apply(k, None);
        }
        assert_eq!(store.take_changes().1, Changes::All);
    }
}
