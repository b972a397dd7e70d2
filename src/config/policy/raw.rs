//! Raw serde shapes of the `[policy]` entries, as written (with spans for error places).

use serde::Deserialize;
use toml::Spanned;

use super::rule_match::with_raw_match_keys;

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
    pub(super) family: Option<Spanned<String>>,
    pub(super) masq_src: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) masq_dest: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) masq_allow_invalid: Option<Spanned<bool>>,
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
    #[serde(rename = "match")]
    pub(super) tuple: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) loadfile: Option<Spanned<String>>,
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

// A `[[policy.rule]]`: its match keys are declared in `rule_match.rs`, beside the
// `RuleMatch` they become, and spliced in between `name` and `action` (the order serde's
// "expected one of" lists them in).
with_raw_match_keys! {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawRule {
        pub(super) name: Spanned<String>,
    } then {
        pub(super) action: Option<Spanned<String>>,
        pub(super) set_mark: Option<Spanned<RawPort>>,
        pub(super) set_xmark: Option<Spanned<RawPort>>,
        pub(super) set_dscp: Option<Spanned<RawPort>>,
        #[serde(default)]
        pub(super) log: bool,
        pub(super) log_prefix: Option<Spanned<String>>,
        pub(super) log_limit: Option<Spanned<String>>,
        pub(super) limit: Option<Spanned<String>>,
        #[cfg(feature = "fault-injection")]
        #[serde(default)]
        pub(super) inject_kernel_reject: bool,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawForward {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
    pub(super) family: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPortForward {
    pub(super) name: Spanned<String>,
    pub(super) from: Spanned<String>,
    pub(super) protocol: Option<Spanned<RawFrom>>,
    pub(super) port: Option<Spanned<RawPort>>,
    pub(super) to: Spanned<String>,
    pub(super) reflection: Option<Spanned<bool>>,
    pub(super) reflection_zones: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) reflection_src: Option<Spanned<String>>,
    pub(super) from_addresses: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) to_addresses: Option<Spanned<Vec<Spanned<String>>>>,
}

// A `[[policy.nat]]`: a rule's match keys, then what it does to the source.
with_raw_match_keys! {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawNat {
        pub(super) name: Spanned<String>,
    } then {
        pub(super) action: Spanned<String>,
        pub(super) snat_address: Option<Spanned<String>>,
        pub(super) snat_port: Option<Spanned<RawPort>>,
    }
}
