//! The Lease object: the body written (`coordination.k8s.io/v1`, as the kubelet writes its
//! node Lease) and the little read back (its `resourceVersion` and holder).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::clock::rfc3339;
use crate::kubernetes::client::ObjectMeta;
use crate::kubernetes::client::json::{self, Decode, Reader};

/// The label every Lease edgenetd writes carries (a fleet selects the routers' Leases by it).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "edgenetd");

/// What a write puts in the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec<'a> {
    /// Its name: the node's, also the holder.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The version the write is based on (an update), or `None` (a create).
    pub resource_version: Option<&'a str>,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// `spec.acquireTime`: when this daemon first renewed it.
    pub acquired: SystemTime,
    /// `spec.renewTime`: the last renewal (a write while some loop is not live keeps it).
    pub renewed: SystemTime,
    /// `metadata.annotations`.
    pub annotations: &'a BTreeMap<String, String>,
}

/// The JSON body of a create or an update.
pub fn body(s: &Spec<'_>) -> Vec<u8> {
    let mut metadata = json!({
        "name": s.name,
        "namespace": s.namespace,
        "labels": {MANAGED_BY.0: MANAGED_BY.1},
        "annotations": s.annotations,
    });
    if let Some(rv) = s.resource_version {
        metadata["resourceVersion"] = rv.into();
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": s.name,
            "leaseDurationSeconds": s.duration.as_secs(),
            "acquireTime": micro_time(s.acquired),
            "renewTime": micro_time(s.renewed),
        },
    })
    .to_string()
    .into_bytes()
}

/// A `metav1.MicroTime` as the API writes it: RFC 3339 in UTC with six decimals.
pub fn micro_time(t: SystemTime) -> String {
    let micros = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_micros();
    // `rfc3339` is `YYYY-MM-DDTHH:MM:SS.mmmZ`: its seconds, then the microseconds.
    let seconds = rfc3339(t);
    format!("{}.{micros:06}Z", &seconds[..19])
}

/// What the writer reads of a Lease the server returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    /// Its metadata (`resourceVersion` for the next update).
    pub metadata: ObjectMeta,
    /// `spec.holderIdentity`.
    pub holder: String,
}

impl Decode for Lease {
    fn decode(r: &mut Reader<'_>) -> json::Result<Lease> {
        let mut l = Lease::default();
        r.object(&mut |r, key| {
            match key {
                "metadata" => l.metadata = ObjectMeta::decode(r)?,
                "spec" => r.object(&mut |r, key| {
                    match key {
                        "holderIdentity" => l.holder = r.str()?,
                        _ => r.skip()?,
                    }
                    Ok(())
                })?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_a_lease_as_the_api_writes_one() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        let annotations = BTreeMap::from([("edgenetd.io/config-generation".into(), "2".into())]);
        let spec = Spec {
            name: "edge-1",
            namespace: "edgenetd",
            resource_version: Some("42"),
            duration: Duration::from_secs(40),
            acquired: t,
            renewed: t + Duration::from_secs(10),
            annotations: &annotations,
        };
        let v: serde_json::Value = serde_json::from_slice(&body(&spec)).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": "edge-1", "namespace": "edgenetd", "resourceVersion": "42",
                    "labels": {"app.kubernetes.io/managed-by": "edgenetd"},
                    "annotations": {"edgenetd.io/config-generation": "2"},
                },
                "spec": {
                    "holderIdentity": "edge-1", "leaseDurationSeconds": 40,
                    "acquireTime": "2023-11-14T22:13:20.123456Z",
                    "renewTime": "2023-11-14T22:13:30.123456Z",
                },
            })
        );
        let create = body(&Spec {
            resource_version: None,
            ..spec
        });
        let v: serde_json::Value = serde_json::from_slice(&create).unwrap();
        assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
    }

    #[test]
    fn a_returned_lease_gives_its_version_and_holder() {
        let l: Lease = json::from_slice(
            br#"{"kind":"Lease","metadata":{"name":"edge-1","resourceVersion":"7",
                "managedFields":[{"manager":"x"}]},"spec":{"holderIdentity":"edge-1",
                "leaseDurationSeconds":40,"renewTime":"2023-11-14T22:13:30.123456Z"}}"#,
        )
        .unwrap();
        assert_eq!(
            (l.metadata.resource_version.as_str(), l.holder.as_str()),
            ("7", "edge-1")
        );
    }
}
