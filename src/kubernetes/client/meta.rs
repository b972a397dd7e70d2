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
//!   largest thing a lean object avoids keeping (it lives only while its object is read).
//! - Objects are read field by field out of a parsed value ([`super::json`]), not by derived
//!   decoders.

use std::collections::BTreeMap;

use std::fmt;

use serde::Deserialize;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess,
    SeqAccess, Visitor,
};
use serde_json::Value;

use super::json::{self, Fields};

/// Annotations with this prefix are kept; all others are dropped while reading.
pub const KEPT_ANNOTATION_PREFIX: &str = "kube-router.io/";

/// `Deserialize` for types read field by field (through [`json::decode`]).
macro_rules! deserialize_with_fields {
    ($($t:ty),*) => {$(
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                crate::kubernetes::client::json::decode(d, <$t>::from_fields)
            }
        }
    )*};
}
pub(crate) use deserialize_with_fields;

deserialize_with_fields!(ObjectMeta, Status, Bookmark);

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
    pub labels: BTreeMap<String, String>,
    /// Kept annotations only (see the module doc).
    pub annotations: BTreeMap<String, String>,
}

impl ObjectMeta {
    /// Reads `metadata`.
    pub fn from_fields(mut f: Fields) -> json::Result<ObjectMeta> {
        Ok(ObjectMeta {
            name: f.str("name")?,
            namespace: f.str("namespace")?,
            resource_version: f.str("resourceVersion")?,
            labels: f.string_map("labels", |_| true)?,
            annotations: f.string_map("annotations", |k| k.starts_with(KEPT_ANNOTATION_PREFIX))?,
        })
    }
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
    /// Items of the page refused for their size (never parsed): who, and how big.
    #[serde(skip)]
    pub refused: Vec<Refused>,
}

/// A list item over the size cap of one object, refused without being parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `<namespace>/<name>` (or the name), as far as it could be read.
    pub object: String,
    /// Its size in the page, in bytes.
    pub bytes: usize,
}

/// Just the name of an object, read while everything else is skipped.
#[derive(Deserialize, Default)]
#[serde(default)]
struct NameOnly {
    /// Its metadata.
    metadata: NameMeta,
}

/// The naming part of `metadata`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct NameMeta {
    /// The namespace, empty for cluster-scoped objects.
    namespace: String,
    /// The name.
    name: String,
}

impl Refused {
    /// The refusal of the item `raw`.
    fn of(raw: &str) -> Refused {
        let m = serde_json::from_str::<NameOnly>(raw)
            .unwrap_or_default()
            .metadata;
        let object = if m.namespace.is_empty() {
            m.name
        } else {
            format!("{}/{}", m.namespace, m.name)
        };
        Refused {
            object,
            bytes: raw.len(),
        }
    }
}

/// A page of a list (`GET /api/v1/services?limit=…&continue=…`). The items are read one by
/// one, each object parsed and reduced before the next.
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
    #[serde(default = "Vec::new", deserialize_with = "null_is_empty")]
    pub items: Vec<T>,
}

/// `items: null` reads as no items.
fn null_is_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Reads a list page without decoding its items: each is handed, parsed, to `item` (one at a
/// time: a page never exists as a whole in memory); returns the list's metadata. An item
/// longer than `max_item` bytes is refused unparsed (listed in [`ListMeta::refused`]): its
/// value tree would take several times its size, and a watch refuses such an object too.
/// Not generic, so one copy of the page reader serves every kind (the typed part is `item`).
pub fn read_page(
    body: &[u8],
    max_item: usize,
    item: &mut dyn FnMut(Value) -> Result<(), serde_json::Error>,
) -> Result<ListMeta, serde_json::Error> {
    let mut refused = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let mut meta = de.deserialize_map(PageVisitor {
        item,
        max_item,
        refused: &mut refused,
    })?;
    de.end()?;
    meta.refused = refused;
    Ok(meta)
}

/// The visitor of [`read_page`]: `metadata` read, `items` handed over, the rest skipped.
struct PageVisitor<'a> {
    /// Takes each item.
    item: &'a mut dyn FnMut(Value) -> Result<(), serde_json::Error>,
    /// The longest item parsed.
    max_item: usize,
    /// The items refused.
    refused: &'a mut Vec<Refused>,
}

impl<'de> Visitor<'de> for PageVisitor<'_> {
    type Value = ListMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    let mut f = Fields::new(map.next_value()?).map_err(A::Error::custom)?;
                    meta = ListMeta {
                        resource_version: f.str("resourceVersion").map_err(A::Error::custom)?,
                        continue_token: f.str("continue").map_err(A::Error::custom)?,
                        refused: Vec::new(),
                    };
                }
                "items" => map.next_value_seed(Items {
                    item: &mut *self.item,
                    max_item: self.max_item,
                    refused: &mut *self.refused,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

/// A page's `items` (`null` = none), each handed over.
struct Items<'a> {
    /// Takes each item.
    item: &'a mut dyn FnMut(Value) -> Result<(), serde_json::Error>,
    /// The longest item parsed.
    max_item: usize,
    /// The items refused.
    refused: &'a mut Vec<Refused>,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of items or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // Each item is first only delimited (borrowed from the page, no copy), so its size
        // is known before anything is built from it.
        while let Some(raw) = seq.next_element::<&'de serde_json::value::RawValue>()? {
            if raw.get().len() > self.max_item {
                self.refused.push(Refused::of(raw.get()));
                continue;
            }
            let v: Value = serde_json::from_str(raw.get()).map_err(A::Error::custom)?;
            (self.item)(v).map_err(A::Error::custom)?;
        }
        Ok(())
    }
}

/// A watch line's `type` and `object` (not generic: one copy serves every kind).
#[inline(never)]
fn parse_event(line: &[u8]) -> Result<(String, Value), serde_json::Error> {
    split_event(serde_json::from_slice(line)?)
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

impl Status {
    /// Reads a `Status`.
    pub fn from_fields(mut f: Fields) -> json::Result<Status> {
        let code = f.opt_int("code")?.unwrap_or(0);
        Ok(Status {
            status: f.str("status")?,
            message: f.str("message")?,
            reason: f.str("reason")?,
            code: u16::try_from(code).map_err(|_| format!("code: {code} out of range"))?,
        })
    }
}

/// The `object` of a BOOKMARK event: only the version the watch has reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookmark {
    /// `resourceVersion` (and nothing else edgenetd reads).
    pub metadata: ObjectMeta,
}

impl Bookmark {
    /// Reads a bookmark's object.
    pub fn from_fields(mut f: Fields) -> json::Result<Bookmark> {
        Ok(Bookmark {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
        })
    }
}

/// One line of a watch stream: `{"type": …, "object": …}`, in either order (the line is
/// parsed whole, then its object read as its type says).
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
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for WatchEvent<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (kind, object) = split_event(Value::deserialize(d)?).map_err(D::Error::custom)?;
        WatchEvent::of(&kind, object).map_err(D::Error::custom)
    }
}

/// A watch line's `type` and `object`.
fn split_event(line: Value) -> Result<(String, Value), serde_json::Error> {
    let mut f = Fields::new(line).map_err(serde_json::Error::custom)?;
    let kind = f.str("type").map_err(serde_json::Error::custom)?;
    let object = f
        .take("object")
        .ok_or_else(|| serde_json::Error::missing_field("object"))?;
    Ok((kind, object))
}

impl<T: DeserializeOwned> WatchEvent<T> {
    /// Decodes one watch line; the untyped work (parsing the line, finding `type` and
    /// `object`) is done once for every kind, the typed part reads only the object.
    pub fn from_line(line: &[u8]) -> Result<WatchEvent<T>, serde_json::Error> {
        let (kind, object) = parse_event(line)?;
        WatchEvent::of(&kind, object)
    }

    /// The event of type `kind` about `object`.
    fn of(kind: &str, object: Value) -> Result<WatchEvent<T>, serde_json::Error> {
        let fields = |object| Fields::new(object).map_err(serde_json::Error::custom);
        Ok(match kind {
            "ADDED" => WatchEvent::Added(T::deserialize(object)?),
            "MODIFIED" => WatchEvent::Modified(T::deserialize(object)?),
            "DELETED" => WatchEvent::Deleted(T::deserialize(object)?),
            "BOOKMARK" => WatchEvent::Bookmark(
                Bookmark::from_fields(fields(object)?).map_err(serde_json::Error::custom)?,
            ),
            "ERROR" => WatchEvent::Error(
                Status::from_fields(fields(object)?).map_err(serde_json::Error::custom)?,
            ),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "unknown watch event type {other:?}"
                )));
            }
        })
    }
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
