//! The generic shapes of the API: an object's `metadata`, list pages, watch events and the
//! `Status` of an error. The object structs (`kubernetes::objects`) embed [`ObjectMeta`] and
//! implement [`HasMeta`]; the reflector reads the rest.
//!
//! Conventions that hold for every struct here:
//! - Unknown fields are ignored (the API grows; edgenetd must not break when it does).
//! - A missing field and an explicit `null` both read as the default: the API server writes
//!   `null` for some empty lists, and a lean struct must not fail on it.
//! - Annotations are dropped except kube-router's (`kube-router.io/…`), which the route
//!   translation reads; `kubectl apply` stores whole objects in an annotation, which is the
//!   largest thing a lean decode avoids holding.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// Deserializes `null` as the type's default (for lists and maps the API may write as null).
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Annotations with this prefix are kept; all others are skipped while parsing.
pub const KEPT_ANNOTATION_PREFIX: &str = "kube-router.io/";

/// Keeps only the annotations edgenetd reads (kube-router's); the others' values are skipped
/// unread, never allocated.
fn kept_annotations<'de, D>(d: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: Deserializer<'de>,
{
    struct Kept;
    impl<'de> Visitor<'de> for Kept {
        type Value = BTreeMap<String, String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of annotations or null")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if key.starts_with(KEPT_ANNOTATION_PREFIX) {
                    kept.insert(key, map.next_value()?);
                } else {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    d.deserialize_any(Kept)
}

/// `metadata` of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// The object's name.
    pub name: String,
    /// Its namespace (empty for cluster-scoped kinds: Node, Namespace).
    pub namespace: String,
    /// The version the server last wrote the object at (opaque: compared only for equality);
    /// watches resume from the newest.
    pub resource_version: String,
    /// Labels (selectors match these).
    #[serde(deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
    /// Kept annotations only (see the module doc).
    #[serde(deserialize_with = "kept_annotations")]
    pub annotations: BTreeMap<String, String>,
}

/// An object the reflector can keep: it has an [`ObjectMeta`].
pub trait HasMeta {
    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
}

impl HasMeta for ObjectMeta {
    fn metadata(&self) -> &ObjectMeta {
        self
    }
}

/// `metadata` of a list: where the list stands and how to fetch the next page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListMeta {
    /// The version the whole list is consistent at; the watch starts from it.
    pub resource_version: String,
    /// Token for the next page; empty on the last page.
    #[serde(rename = "continue")]
    pub continue_token: String,
}

/// A page of a list (`GET /api/v1/services?limit=…&continue=…`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: Deserialize<'de>"))]
pub struct List<T> {
    /// `ServiceList`, `EndpointSliceList`, …
    #[serde(default)]
    pub kind: String,
    /// Version and continue token.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The objects of this page.
    #[serde(default = "Vec::new", deserialize_with = "null_default")]
    pub items: Vec<T>,
}

/// A `metav1.Status`: the body of an API error and of a watch's ERROR event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    /// `Success` or `Failure`.
    pub status: String,
    /// Human-readable description.
    pub message: String,
    /// Machine-readable reason, e.g. `Expired`, `Gone`.
    pub reason: String,
    /// The HTTP status it stands for (410 = the resourceVersion is too old: relist).
    pub code: u16,
}

/// The `object` of a BOOKMARK event: only the version the watch has reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Bookmark {
    /// `resourceVersion` (and nothing else edgenetd reads).
    pub metadata: ObjectMeta,
}

/// One line of a watch stream: `{"type": …, "object": …}`. The API server writes `type`
/// first, so the object decodes straight into its type; an `object` seen first is buffered.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", content = "object")]
pub enum WatchEvent<T> {
    /// A new object (or one that began to match the selector).
    #[serde(rename = "ADDED")]
    Added(T),
    /// A changed object.
    #[serde(rename = "MODIFIED")]
    Modified(T),
    /// A removed object (or one that stopped matching the selector); its last state.
    #[serde(rename = "DELETED")]
    Deleted(T),
    /// Progress: the watch has seen everything up to this version.
    #[serde(rename = "BOOKMARK")]
    Bookmark(Bookmark),
    /// The watch failed; a `code` of 410 means the version is gone from the server's history.
    #[serde(rename = "ERROR")]
    Error(Status),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines_decode_every_type() {
        let e: WatchEvent<ObjectMeta> = serde_json::from_str::<WatchEvent<Wrapper>>(
            r#"{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"b","resourceVersion":"7"}}}"#,
        )
        .map(|e| match e {
            WatchEvent::Added(w) => WatchEvent::Added(w.metadata),
            _ => panic!("not added"),
        })
        .unwrap();
        let WatchEvent::Added(meta) = e else { panic!() };
        assert_eq!(meta.resource_version, "7");
        let e: WatchEvent<Wrapper> = serde_json::from_str(
            r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}"#,
        )
        .unwrap();
        assert!(matches!(e, WatchEvent::Error(Status { code: 410, .. })));
        let e: WatchEvent<Wrapper> = serde_json::from_str(
            r#"{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"12"}}}"#,
        )
        .unwrap();
        assert!(matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version == "12"));
        let list: List<Wrapper> = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"3","continue":"x"},"items":null}"#,
        )
        .unwrap();
        assert!(list.items.is_empty());
        assert_eq!(list.metadata.continue_token, "x");
    }

    #[test]
    fn null_labels_and_foreign_annotations_read_as_empty() {
        let m: ObjectMeta = serde_json::from_str(
            r#"{"name":"n","labels":null,"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","kube-router.io/pod-cidr":"10.0.0.0/24"}}"#,
        )
        .unwrap();
        assert!(m.labels.is_empty());
        assert_eq!(
            m.annotations.keys().collect::<Vec<_>>(),
            ["kube-router.io/pod-cidr"]
        );
        let m: ObjectMeta = serde_json::from_str(r#"{"name":"n","annotations":null}"#).unwrap();
        assert!(m.annotations.is_empty());
    }

    /// An object with only metadata.
    #[derive(Debug, Deserialize)]
    struct Wrapper {
        /// Its metadata.
        metadata: ObjectMeta,
    }
}
