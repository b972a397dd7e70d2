//! The little every object must carry for list+watch, and the shapes of lists and watch
//! events. The object structs themselves hold only the fields edgenetd uses.

use serde::Deserialize;

/// `metadata` as the client needs it; the object structs embed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The namespace; absent for cluster-scoped objects (Nodes, Namespaces).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The name.
    #[serde(default)]
    pub name: String,
    /// The version the object was last written at (opaque: compared only for equality).
    #[serde(default)]
    pub resource_version: Option<String>,
    /// The labels.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// An object the reflector can keep: it has a [`ObjectMeta`].
pub trait HasMeta {
    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
}

impl HasMeta for ObjectMeta {
    fn metadata(&self) -> &ObjectMeta {
        self
    }
}

/// `metadata` of a list page.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The version the whole list is consistent at; the watch starts from it.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// The token for the next page; empty or absent on the last one.
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct List<T> {
    /// The page's metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The objects (`null` when there are none).
    #[serde(default = "Vec::new", deserialize_with = "null_as_empty")]
    pub items: Vec<T>,
}

/// `items: null` is how some servers say "none".
fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A `metav1.Status`: the body of an error response and of an ERROR watch event.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Status {
    /// The HTTP-like code (410 for an expired resourceVersion).
    #[serde(default)]
    pub code: u16,
    /// A reason word such as `Expired` or `Gone`.
    #[serde(default)]
    pub reason: String,
    /// The human message.
    #[serde(default)]
    pub message: String,
}

/// A BOOKMARK's object: only its resourceVersion matters.
#[derive(Debug, Clone, Deserialize)]
pub struct Bookmark {
    /// Carries the resourceVersion to resume from.
    pub metadata: ObjectMeta,
}

/// One line of a watch stream.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "object")]
pub enum WatchEvent<T> {
    /// An object appeared (or began to match the selector).
    #[serde(rename = "ADDED")]
    Added(T),
    /// An object changed.
    #[serde(rename = "MODIFIED")]
    Modified(T),
    /// An object went (or stopped matching the selector); its last state.
    #[serde(rename = "DELETED")]
    Deleted(T),
    /// Nothing changed, but the stream is at this resourceVersion now.
    #[serde(rename = "BOOKMARK")]
    Bookmark(Bookmark),
    /// The watch failed; 410 means "relist".
    #[serde(rename = "ERROR")]
    Error(Status),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines_decode_every_type() {
        let e: WatchEvent<ObjectMeta> = serde_json::from_str(
            r#"{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"b","resourceVersion":"7"}}}"#,
        )
        .map(|e: WatchEvent<Wrapper>| match e {
            WatchEvent::Added(w) => WatchEvent::Added(w.metadata),
            _ => panic!("not added"),
        })
        .unwrap();
        let WatchEvent::Added(meta) = e else { panic!() };
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        let e: WatchEvent<Wrapper> = serde_json::from_str(
            r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}"#,
        )
        .unwrap();
        assert!(matches!(e, WatchEvent::Error(Status { code: 410, .. })));
        let e: WatchEvent<Wrapper> = serde_json::from_str(
            r#"{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"12"}}}"#,
        )
        .unwrap();
        assert!(
            matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version.as_deref() == Some("12"))
        );
        let list: List<Wrapper> = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"3","continue":"x"},"items":null}"#,
        )
        .unwrap();
        assert!(list.items.is_empty());
        assert_eq!(list.metadata.continue_token.as_deref(), Some("x"));
    }

    /// An object with only metadata.
    #[derive(Debug, Deserialize)]
    struct Wrapper {
        /// Its metadata.
        metadata: ObjectMeta,
    }
}
