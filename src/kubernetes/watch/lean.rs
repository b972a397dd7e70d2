//! The objects of [`crate::kubernetes::objects`] kept by a [`crate::kubernetes::client::Reflector`].
//!
//! The reflector reads names and resourceVersions through the client's own metadata type; the
//! lean objects carry the richer one of `objects`. [`Lean`] decodes the object once and copies
//! the three strings the reflector needs beside it, so neither type has to know the other.

use serde::{Deserialize, Deserializer};

use crate::kubernetes::client::{HasMeta, ObjectMeta};
use crate::kubernetes::objects;

/// An API object with the metadata of [`objects::ObjectMeta`].
pub trait Object {
    /// The object's metadata.
    fn object_meta(&self) -> &objects::ObjectMeta;
}

macro_rules! object {
    ($($t:ident),*) => {$(
        impl Object for objects::$t {
            fn object_meta(&self) -> &objects::ObjectMeta {
                &self.metadata
            }
        }
    )*};
}

object!(Service, EndpointSlice, Node, NetworkPolicy, Pod, Namespace);

/// An object as a reflector keeps it.
#[derive(Debug, Clone)]
pub struct Lean<T> {
    /// Namespace, name and resourceVersion, as the reflector reads them (labels left empty:
    /// the reflector never reads them, the object has them).
    meta: ObjectMeta,
    /// The object.
    pub object: T,
}

impl<T> HasMeta for Lean<T> {
    fn metadata(&self) -> &ObjectMeta {
        &self.meta
    }
}

impl<'de, T: Deserialize<'de> + Object> Deserialize<'de> for Lean<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let object = T::deserialize(d)?;
        let m = object.object_meta();
        let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
        let meta = ObjectMeta {
            namespace: non_empty(&m.namespace),
            name: m.name.clone(),
            resource_version: non_empty(&m.resource_version),
            labels: Default::default(),
        };
        Ok(Lean { meta, object })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lean_object_carries_the_reflectors_metadata() {
        let json = r#"{"metadata":{"name":"web","namespace":"shop","resourceVersion":"42",
            "labels":{"a":"b"}},"spec":{"clusterIP":"10.96.0.10"}}"#;
        let lean: Lean<objects::Service> = serde_json::from_str(json).unwrap();
        assert_eq!(lean.metadata().namespace.as_deref(), Some("shop"));
        assert_eq!(lean.metadata().name, "web");
        assert_eq!(lean.metadata().resource_version.as_deref(), Some("42"));
        assert_eq!(lean.object.metadata.labels["a"], "b");
        let node: Lean<objects::Node> =
            serde_json::from_str(r#"{"metadata":{"name":"n1"}}"#).unwrap();
        assert_eq!(node.metadata().namespace, None, "cluster-scoped");
        assert_eq!(node.metadata().resource_version, None);
    }
}
