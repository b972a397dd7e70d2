//! Raw serde shapes of the `[policy]` entries, as written (with spans for error places).

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawZone {
    #[serde(default)]
    pub(super) interfaces: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) networks: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) masquerade: bool,
    #[serde(default)]
    pub(super) masquerade6: bool,
    #[serde(default)]
    pub(super) mtu_fix: bool,
    #[serde(default)]
    pub(super) log_drops: bool,
    pub(super) log_limit: Option<Spanned<String>>,
    pub(super) snat: Option<Spanned<RawFrom>>,
    #[serde(default)]
    pub(super) helpers: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSet {
    #[serde(rename = "type")]
    pub(super) kind: Spanned<String>,
    #[serde(default)]
    pub(super) elements: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) dynamic: bool,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) size: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawFrom {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawPort {
    Number(i64),
    Text(String),
}

/// One value or a list of them (`dscp = "ef"`, `dscp = ["cs1", 46]`), each a name or a
/// number. Read by hand: serde's untagged enums answer a wrong type with "data did not
/// match any variant", this says what was expected.
pub(super) enum RawValues {
    One(RawPort),
    Many(Vec<RawPort>),
}

/// What [`RawValues`] expects, in the error for anything else.
const NAME_OR_NUMBER: &str = "a name or a number, or a list of them";

/// One name or number of a [`RawValues`] list.
struct RawValue(RawPort);

struct ValuesVisitor;

impl<'de> serde::de::Visitor<'de> for ValuesVisitor {
    type Value = RawValues;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(NAME_OR_NUMBER)
    }

    fn visit_i64<E>(self, n: i64) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Number(n)))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Number(
            i64::try_from(n).unwrap_or(i64::MAX),
        )))
    }

    fn visit_str<E>(self, s: &str) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Text(s.to_string())))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawValues, A::Error> {
        let mut out = Vec::new();
        while let Some(RawValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(RawValues::Many(out))
    }
}

impl<'de> Deserialize<'de> for RawValues {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawValues, D::Error> {
        d.deserialize_any(ValuesVisitor)
    }
}

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawValue, D::Error> {
        match RawValues::deserialize(d)? {
            RawValues::One(v) => Ok(RawValue(v)),
            RawValues::Many(_) => Err(serde::de::Error::custom(format!(
                "a list inside the list: expected {NAME_OR_NUMBER}"
            ))),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Spanned<String>,
    pub(super) from: Option<Spanned<RawFrom>>,
    pub(super) to: Option<Spanned<String>>,
    pub(super) protocol: Option<Spanned<RawFrom>>,
    pub(super) ports: Option<Spanned<Vec<Spanned<RawPort>>>>,
    pub(super) source_ports: Option<Spanned<Vec<Spanned<RawPort>>>>,
    pub(super) to_addresses: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) icmp_types: Option<Spanned<Vec<Spanned<RawPort>>>>,
    pub(super) dscp: Option<Spanned<RawValues>>,
    pub(super) action: Option<Spanned<String>>,
    pub(super) set_mark: Option<Spanned<RawPort>>,
    #[serde(default)]
    pub(super) log: bool,
    pub(super) log_prefix: Option<Spanned<String>>,
    pub(super) log_limit: Option<Spanned<String>>,
    pub(super) limit: Option<Spanned<String>>,
    #[cfg(feature = "fault-injection")]
    #[serde(default)]
    pub(super) inject_kernel_reject: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawForward {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPortForward {
    pub(super) name: Spanned<String>,
    pub(super) from: Spanned<String>,
    pub(super) protocol: Option<Spanned<RawFrom>>,
    pub(super) port: Spanned<RawPort>,
    pub(super) to: Spanned<String>,
    pub(super) reflection: Option<bool>,
    pub(super) reflection_zones: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) from_addresses: Option<Spanned<Vec<Spanned<String>>>>,
}
