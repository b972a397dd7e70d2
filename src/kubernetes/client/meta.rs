//! The generic shapes of the API: an object's `metadata`, list pages, watch events and the
//! `Status` of an error. The object structs (`kubernetes::objects`) embed [`ObjectMeta`] and
//! implement [`HasMeta`]; the reflector reads the rest.
//!
//! Conventions that hold for every struct here:
//! - Unknown fields are ignored (the API grows; edgenetd must not break when it does).
//! - A missing field and an explicit `null` both read as the default: the API server writes
//!   `null` for some empty lists, and a lean struct must not fail on it.
//! - Labels are kept as each kind says ([`ObjectMeta::decode_keeping`]): only those the
//!   translation reads, or every one where selectors the cluster writes may read any (Pods,
//!   Namespaces).
//! - Annotations are dropped except kube-router's (`kube-router.io/…`), which the route
//!   translation reads; `kubectl apply` stores whole objects in an annotation, which is the
//!   largest thing a lean object avoids keeping (it lives only while its object is read).
//! - Objects are read field by field straight out of the text ([`super::json`]), not by
//!   derived decoders and never through a value tree.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{Deserializer, Error as _};

use super::json::{self, Decode, Reader};
use super::labels::Labels;

/// Annotations with this prefix are kept; all others are dropped while reading.
pub const KEPT_ANNOTATION_PREFIX: &str = "kube-router.io/";

/// The annotation of the bookmark that ends a streamed list's initial events (KEP-3157).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// serde's `Deserialize` for types that [`Decode`]: the object's text is taken whole and read
/// field by field. A convenience for tests and tools (`serde_json::from_value`); the reflector
/// reads pages and watch lines with [`read_page`] and [`WatchEvent::from_line`], which build
/// nothing but the lean structs.
macro_rules! deserialize_by_decode {
    ($($t:ty),*) => {$(
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                crate::kubernetes::client::meta::by_decode(d)
            }
        }
    )*};
}
pub(crate) use deserialize_by_decode;

deserialize_by_decode!(ObjectMeta, Status, Bookmark);

/// The body of every `deserialize_by_decode` impl.
pub fn by_decode<'de, D: Deserializer<'de>, T: Decode>(d: D) -> Result<T, D::Error> {
    let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
    json::from_slice(raw.get().as_bytes()).map_err(D::Error::custom)
}

/// `metadata` of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object's name.
    pub name: String,
    /// Its namespace (empty for cluster-scoped kinds: Node, Namespace).
    pub namespace: String,
    /// The version the server last wrote the object at (opaque: compared only for equality);
    /// watches resume from the newest.
    pub resource_version: String,
    /// Labels (selectors match these).
    pub labels: Labels,
    /// Kept annotations only (see the module doc).
    pub annotations: BTreeMap<String, String>,
}

impl Decode for ObjectMeta {
    fn decode(r: &mut Reader<'_>) -> json::Result<ObjectMeta> {
        ObjectMeta::decode_keeping(r, |_| true)
    }
}

impl ObjectMeta {
    /// Reads `metadata`, keeping only the labels whose key `keep` accepts (the others are
    /// skipped, never built: most labels of a Helm chart's objects are read by nothing here).
    pub fn decode_keeping(r: &mut Reader<'_>, keep: fn(&str) -> bool) -> json::Result<ObjectMeta> {
        let mut m = ObjectMeta::default();
        r.object(&mut |r, key| {
            match key {
                "name" => m.name = r.str()?,
                "namespace" => m.namespace = r.str()?,
                "resourceVersion" => m.resource_version = r.str()?,
                "labels" => m.labels = r.string_map(keep)?.into_iter().collect(),
                "annotations" => {
                    m.annotations = r.string_map(|k| k.starts_with(KEPT_ANNOTATION_PREFIX))?
                }
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

/// An object the reflector can keep: it has an [`ObjectMeta`].
pub trait HasMeta {
    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
    /// The object's metadata, to trim (the labels a reflector is told to keep).
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
}

impl<T: HasMeta> HasMeta for Box<T> {
    fn metadata(&self) -> &ObjectMeta {
        (**self).metadata()
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        (**self).metadata_mut()
    }
}

impl HasMeta for ObjectMeta {
    fn metadata(&self) -> &ObjectMeta {
        self
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self
    }
}

/// `metadata` of a list: where the list stands and how to fetch the next page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// The version the whole list is consistent at; the watch starts from it.
    pub resource_version: String,
    /// Token for the next page; empty on the last page.
    pub continue_token: String,
    /// Items of the page refused for their size (never parsed): who, and how big.
    pub refused: Vec<Refused>,
}

impl Decode for ListMeta {
    fn decode(r: &mut Reader<'_>) -> json::Result<ListMeta> {
        let mut m = ListMeta::default();
        r.object(&mut |r, key| {
            match key {
                "resourceVersion" => m.resource_version = r.str()?,
                "continue" => m.continue_token = r.str()?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

/// An object over the size cap of one object (a list item or a watch event's), refused
/// without being decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused {
    /// Its namespace, as far as it could be read (empty for cluster-scoped kinds).
    pub namespace: String,
    /// Its name, as far as it could be read.
    pub name: String,
    /// Its resourceVersion, as far as it could be read (a watch resumes after it).
    pub resource_version: String,
    /// Its size, in bytes.
    pub bytes: usize,
}

impl Refused {
    /// The refusal of the object whose text is `raw`: only its name and version are read
    /// (everything else skipped, nothing built), and as much as is there before an error.
    pub fn of(raw: &[u8]) -> Refused {
        let mut r = Refused {
            bytes: raw.len(),
            ..Refused::default()
        };
        let _ = Reader::new(raw).object(&mut |rd, key| match key {
            "metadata" => rd.object(&mut |rd, key| {
                match key {
                    "namespace" => r.namespace = rd.str()?,
                    "name" => r.name = rd.str()?,
                    "resourceVersion" => r.resource_version = rd.str()?,
                    _ => rd.skip()?,
                }
                Ok(())
            }),
            _ => rd.skip(),
        });
        r
    }

    /// `<namespace>/<name>`, or the name alone for a cluster-scoped object.
    pub fn object(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// A page of a list (`GET /api/v1/services?limit=…&continue=…`), whole. The reflector reads
/// pages with [`read_page`] instead, item by item; this is for tests and tools.
#[derive(Debug, Clone, PartialEq)]
pub struct List<T> {
    /// `ServiceList`, `EndpointSliceList`, …
    pub kind: String,
    /// Version and continue token.
    pub metadata: ListMeta,
    /// The objects of this page.
    pub items: Vec<T>,
}

impl<T: Decode> Decode for List<T> {
    fn decode(r: &mut Reader<'_>) -> json::Result<List<T>> {
        let mut kind = String::new();
        let mut items = Vec::new();
        let metadata = read_page_with(r, usize::MAX, &mut kind, &mut |r| {
            items.push(T::decode(r)?);
            Ok(())
        })?;
        Ok(List {
            kind,
            metadata,
            items,
        })
    }
}

impl<'de, T: Decode> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        by_decode(d)
    }
}

/// Reads a list page item by item: each item is handed to `item` as a reader at its start
/// (decoded straight into the lean struct, never as a whole tree: a page never exists as
/// objects in memory, only its text); returns the list's metadata. An item longer than
/// `max_item` bytes is refused undecoded (listed in [`ListMeta::refused`]), as a watch refuses
/// such an object too. Not generic, so one copy of the page reader serves every kind (the
/// typed part is `item`).
pub fn read_page(
    body: &[u8],
    max_item: usize,
    item: &mut dyn FnMut(&mut Reader<'_>) -> json::Result<()>,
) -> json::Result<ListMeta> {
    let mut r = Reader::new(body);
    let meta = read_page_with(&mut r, max_item, &mut String::new(), item).map_err(json::shown)?;
    r.end()?;
    Ok(meta)
}

/// [`read_page`] on a reader, also noting the list's `kind`.
fn read_page_with(
    r: &mut Reader<'_>,
    max_item: usize,
    kind: &mut String,
    item: &mut dyn FnMut(&mut Reader<'_>) -> json::Result<()>,
) -> json::Result<ListMeta> {
    let mut meta = ListMeta::default();
    let mut refused = Vec::new();
    r.object(&mut |r, key| {
        match key {
            "kind" => *kind = r.str()?,
            "metadata" => meta = ListMeta::decode(r)?,
            "items" => r.elements(&mut |r| {
                // Each item is first only delimited (its text is not copied), so its size is
                // known before anything is built from it.
                let raw = r.raw()?;
                if raw.len() > max_item {
                    refused.push(Refused::of(raw));
                    return Ok(());
                }
                item(&mut Reader::new(raw))
            })?,
            _ => r.skip()?,
        }
        Ok(())
    })?;
    meta.refused = refused;
    Ok(meta)
}

/// A `metav1.Status`: the body of an API error and of a watch's ERROR event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

impl Decode for Status {
    fn decode(r: &mut Reader<'_>) -> json::Result<Status> {
        let mut s = Status::default();
        r.object(&mut |r, key| {
            match key {
                "status" => s.status = r.str()?,
                "message" => s.message = r.str()?,
                "reason" => s.reason = r.str()?,
                "code" => {
                    let code = r.opt_int()?.unwrap_or(0);
                    s.code = u16::try_from(code).map_err(|_| format!("{code} out of range"))?;
                }
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(s)
    }
}

/// The `object` of a BOOKMARK event: only the version the watch has reached, and whether it
/// ends a streamed list's initial events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookmark {
    /// `resourceVersion`, and of the annotations only [`INITIAL_EVENTS_END`].
    pub metadata: ObjectMeta,
}

impl Bookmark {
    /// True for the bookmark that ends a streamed list's initial events.
    pub fn is_initial_events_end(&self) -> bool {
        self.metadata
            .annotations
            .get(INITIAL_EVENTS_END)
            .is_some_and(|v| v == "true")
    }
}

impl Decode for Bookmark {
    fn decode(r: &mut Reader<'_>) -> json::Result<Bookmark> {
        let mut b = Bookmark::default();
        r.object(&mut |r, key| match key {
            "metadata" => r.object(&mut |r, key| {
                match key {
                    "resourceVersion" => b.metadata.resource_version = r.str()?,
                    "annotations" => {
                        b.metadata.annotations = r.string_map(|k| k == INITIAL_EVENTS_END)?
                    }
                    _ => r.skip()?,
                }
                Ok(())
            }),
            _ => r.skip(),
        })?;
        Ok(b)
    }
}

/// One line of a watch stream: `{"type": …, "object": …}`, in either order (the object is
/// first only delimited, then read as the type says).
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<T> {
    /// A new object (or one that began to match the selector).
    Added(T),
    /// A changed object.
    Modified(T),
    /// A removed object (or one that stopped matching the selector); its last state.
    Deleted(T),
    /// Progress: the watch has seen everything up to this version.
    Bookmark(Bookmark),
    /// The watch failed; a `code` of 410 means the version is gone from the server's history.
    Error(Status),
    /// An ADDED, MODIFIED or DELETED object over the size cap of one object, refused
    /// undecoded (only its name and version were read).
    Refused(&'static str, Refused),
}

impl<'de, T: Decode> Deserialize<'de> for WatchEvent<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        WatchEvent::from_line(raw.get().as_bytes(), usize::MAX).map_err(D::Error::custom)
    }
}

/// A watch line's `type` and the text of its `object` (not generic: one copy serves every
/// kind).
#[inline(never)]
fn split_event(line: &[u8]) -> json::Result<(String, &[u8])> {
    let mut kind = String::new();
    let mut object = None;
    let mut r = Reader::new(line);
    r.object(&mut |r, key| {
        match key {
            "type" => kind = r.str()?,
            "object" => object = Some(r.raw()?),
            _ => r.skip()?,
        }
        Ok(())
    })
    .map_err(json::shown)?;
    r.end()?;
    Ok((kind, object.ok_or("missing field `object`")?))
}

impl<T: Decode> WatchEvent<T> {
    /// Decodes one watch line; the untyped work (delimiting the line's parts) is done once
    /// for every kind, the typed part reads only the object. An object event whose object is
    /// longer than `max_object` bytes is [`WatchEvent::Refused`].
    pub fn from_line(line: &[u8], max_object: usize) -> json::Result<WatchEvent<T>> {
        let (kind, object) = split_event(line)?;
        let kind = match kind.as_str() {
            "ADDED" => "ADDED",
            "MODIFIED" => "MODIFIED",
            "DELETED" => "DELETED",
            "BOOKMARK" => return Ok(WatchEvent::Bookmark(json::from_field(object, "object")?)),
            "ERROR" => return Ok(WatchEvent::Error(json::from_field(object, "object")?)),
            other => return Err(format!("unknown watch event type {other:?}")),
        };
        if object.len() > max_object {
            return Ok(WatchEvent::Refused(kind, Refused::of(object)));
        }
        let object = json::from_field::<T>(object, "object")?;
        Ok(match kind {
            "ADDED" => WatchEvent::Added(object),
            "MODIFIED" => WatchEvent::Modified(object),
            _ => WatchEvent::Deleted(object),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines_decode_every_type() {
        let line = br#"{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"b","resourceVersion":"7"}}}"#;
        let WatchEvent::Added(w) = WatchEvent::<Wrapper>::from_line(line, usize::MAX).unwrap()
        else {
            panic!("not added")
        };
        assert_eq!(w.metadata.resource_version, "7");
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

    /// The bug: a watch line holding one huge object failed the whole watch. The object is
    /// now refused undecoded, named, with the version the watch resumes after.
    #[test]
    fn a_watch_object_over_the_cap_is_refused_with_its_name_and_version() {
        let filler = "x".repeat(200);
        let line = format!(
            r#"{{"object":{{"spec":{{"f":"{filler}"}},"metadata":{{"namespace":"a","name":"b","resourceVersion":"9"}}}},"type":"MODIFIED"}}"#
        );
        let e = WatchEvent::<Wrapper>::from_line(line.as_bytes(), 100).unwrap();
        let WatchEvent::Refused(kind, r) = e else {
            panic!("not refused: {e:?}")
        };
        assert_eq!(kind, "MODIFIED");
        assert_eq!(
            (r.object().as_str(), r.resource_version.as_str()),
            ("a/b", "9")
        );
        assert!(r.bytes > 200, "{r:?}");
        // Bookmarks and errors are never refused (they hold no object to leave out).
        let bookmark = format!(
            r#"{{"type":"BOOKMARK","object":{{"metadata":{{"resourceVersion":"12","annotations":{{"x":"{filler}"}}}}}}}}"#
        );
        let e = WatchEvent::<Wrapper>::from_line(bookmark.as_bytes(), 100).unwrap();
        assert!(matches!(e, WatchEvent::Bookmark(_)), "{e:?}");
    }

    #[test]
    fn list_pages_are_read_item_by_item_and_big_items_refused() {
        let page = br#"{"kind":"X","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"big","namespace":"n"},"f":"0123456789012345678901234567890123456789"},{"metadata":{"name":"c"}}],"metadata":{"resourceVersion":"5","continue":"t"}}"#;
        let mut names = Vec::new();
        let meta = read_page(page, 40, &mut |r| {
            names.push(Wrapper::decode(r)?.metadata.name);
            Ok(())
        })
        .unwrap();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(meta.resource_version, "5");
        assert_eq!(meta.continue_token, "t");
        assert_eq!(meta.refused.len(), 1);
        assert_eq!(meta.refused[0].object(), "n/big");
        let err = read_page(br#"{"items":[{"metadata":{"name":7}}]}"#, 100, &mut |r| {
            Wrapper::decode(r).map(drop)
        })
        .unwrap_err();
        assert_eq!(
            err,
            "items[0].metadata.name: expected a string, found a number"
        );
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
    #[derive(Debug)]
    struct Wrapper {
        /// Its metadata.
        metadata: ObjectMeta,
    }

    impl Decode for Wrapper {
        fn decode(r: &mut Reader<'_>) -> json::Result<Wrapper> {
            let mut metadata = ObjectMeta::default();
            r.object(&mut |r, key| match key {
                "metadata" => {
                    metadata = ObjectMeta::decode(r)?;
                    Ok(())
                }
                _ => r.skip(),
            })?;
            Ok(Wrapper { metadata })
        }
    }
}
