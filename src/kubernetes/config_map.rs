//! Which data keys of the `[kubernetes] config_map` ConfigMap this node takes, and in which
//! order (pure; the daemon loads them after the local files).
//!
//! - `<node>.toml`, where `<node>` is this node's name: for this node only, merged last.
//! - A key named as another node's would be (`<name>.toml` with `<name>` a possible Node
//!   name: lowercase letters, digits, `-` and `.`): that node's, left out here. A router
//!   cannot know every Node's name, so every such name is taken for one: a key meant for a
//!   node that has not joined yet is never applied everywhere by mistake.
//! - Any other `*.toml` key (one no Node can be named after: with `_` or a capital letter,
//!   e.g. `00_base.toml`, `Firewall.toml`): for every router, in name order, before the
//!   node's own.
//! - Keys not ending in `.toml` (a README): left out.
//!
//! What is left out is listed (shown in /healthz), never an error: one ConfigMap serves a
//! whole fleet.

use crate::config::fragments::Fragment;
use crate::config::kubernetes::ConfigMapRef;
use crate::config::kubernetes::selector::is_dns_subdomain;
use crate::kubernetes::objects::ConfigMap;

/// One version of the ConfigMap as this node takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Offer {
    /// The ConfigMap's resourceVersion; empty when there is no such ConfigMap.
    pub version: String,
    /// The fragments this node takes, in merge order.
    pub fragments: Vec<Fragment>,
    /// The keys left out, each with why.
    pub skipped: Vec<(String, String)>,
}

impl Offer {
    /// The keys taken, in merge order.
    pub fn keys(&self) -> Vec<&str> {
        self.fragments
            .iter()
            .map(|f| f.name.rsplit(':').next().unwrap_or(""))
            .collect()
    }
}

/// The name a fragment of `key` is shown as: its "file" in every message.
pub fn fragment_name(cm: &ConfigMapRef, key: &str) -> String {
    format!("configmap:{cm}:{key}")
}

/// What node `node` takes of `object` (`None`: there is no such ConfigMap).
pub fn offer(cm: &ConfigMapRef, object: Option<&ConfigMap>, node: &str) -> Offer {
    let Some(object) = object else {
        return Offer::default();
    };
    let mut out = Offer {
        version: object.metadata.resource_version.clone(),
        ..Offer::default()
    };
    let mut own = None;
    // `data` is a sorted map: name order.
    for (key, text) in &object.data {
        let fragment = || Fragment {
            name: fragment_name(cm, key),
            text: text.clone(),
        };
        match key.strip_suffix(".toml") {
            None => out
                .skipped
                .push((key.clone(), "not a .toml key".to_string())),
            Some(stem) if stem == node => own = Some(fragment()),
            Some(stem) if is_dns_subdomain(stem) => {
                out.skipped.push((key.clone(), format!("for node {stem}")))
            }
            Some(_) => out.fragments.push(fragment()),
        }
    }
    out.fragments.extend(own);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_takes_the_keys_for_every_router_in_name_order_then_its_own() {
        let cm = ConfigMapRef {
            namespace: "kube-system".into(),
            name: "fleet".into(),
        };
        let mut object = ConfigMap::default();
        object.metadata.resource_version = "42".into();
        for key in [
            "edge-1.toml",
            "edge-2.toml",
            "Firewall.toml",
            "00_base.toml",
            "README",
            "firewall.toml",
        ] {
            object.data.insert(key.into(), format!("# {key}\n"));
        }
        let offer = offer(&cm, Some(&object), "edge-1");
        assert_eq!(offer.version, "42");
        assert_eq!(
            offer.keys(),
            ["00_base.toml", "Firewall.toml", "edge-1.toml"]
        );
        assert_eq!(
            offer.fragments[0].name,
            "configmap:kube-system/fleet:00_base.toml"
        );
        assert_eq!(offer.fragments[2].text, "# edge-1.toml\n");
        assert_eq!(
            offer.skipped,
            [
                ("README".to_string(), "not a .toml key".to_string()),
                ("edge-2.toml".to_string(), "for node edge-2".to_string()),
                ("firewall.toml".to_string(), "for node firewall".to_string()),
            ]
        );
        assert_eq!(super::offer(&cm, None, "edge-1"), Offer::default());
    }
}
