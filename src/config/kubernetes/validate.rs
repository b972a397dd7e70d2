//! `[kubernetes]` validated key by key, every problem at its place.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::Doc;
use super::super::duration::parse_duration;
use super::super::net::parse_prefix;
use super::super::nul::no_nul;
use super::model::*;
use super::raw::RawKubernetes;
use super::selector::{LabelSelector, is_dns_subdomain};
use super::{BUILT_WITH_FEATURE, SECTION};

/// Validates `[kubernetes]`; `None` when the section is absent or has an error.
pub fn validate(doc: &Doc, diags: &mut Diagnostics) -> Option<KubernetesConfig> {
    let value = doc.value(SECTION)?;
    let before = diags.len();
    if !BUILT_WITH_FEATURE {
        let at = doc
            .keys()
            .find(|(k, _)| *k == SECTION)
            .map_or(value.span(), |(_, span)| span);
        diags.error(
            at,
            "`[kubernetes]` needs a build with the `kubernetes` feature (this edgenetd was built without it)",
        );
    }
    let raw = doc.table::<RawKubernetes>(SECTION, diags)?;
    let section = raw.span();
    let raw = raw.into_inner();
    crate::fault_hook!(
        crate::fault::lease::set_renew_every(raw.inject_status_renew_ms),
        ()
    );
    let config = KubernetesConfig {
        connection: connection(&raw, section, diags),
        node_name: node_name(raw.node_name.as_ref(), diags),
        feeds: feeds(raw.feeds.as_ref(), diags),
        service_selector: selector(raw.service_selector.as_ref(), diags),
        node_selector: selector(raw.node_selector.as_ref(), diags),
        network_policy_selector: selector(raw.network_policy_selector.as_ref(), diags),
        cache_file: cache_file(raw.cache_file.as_ref(), diags),
        cache_max_age: cache_max_age(raw.cache_max_age.as_ref(), diags),
        service_cidrs: raw
            .service_cidrs
            .as_ref()
            .map(|v| prefixes(v, "service_cidrs", diags))
            .unwrap_or_default(),
        cluster_cidrs: raw
            .cluster_cidrs
            .as_ref()
            .map(|v| prefixes(v, "cluster_cidrs", diags)),
        node_port_addresses: node_port_addresses(raw.node_port_addresses.as_ref(), diags),
        isolate_unknown_pods: raw
            .isolate_unknown_pods
            .as_ref()
            .is_some_and(|v| *v.get_ref()),
        pod_cidrs: pod_cidrs(raw.pod_cidrs.as_ref(), diags),
        log_denied: raw.log_denied.as_ref().is_some_and(|v| *v.get_ref()),
        network_policy_mode: network_policy_mode(raw.network_policy_mode.as_ref(), diags),
        #[cfg(feature = "kubernetes")]
        config_map: config_map(raw.config_map.as_ref(), diags),
        #[cfg(feature = "kubernetes")]
        config_confirm: config_confirm(raw.config_confirm.as_ref(), diags),
        status_namespace: status_namespace(raw.status_namespace.as_ref(), diags),
    };
    (diags.len() == before).then_some(config)
}

fn connection(raw: &RawKubernetes, section: Range<usize>, diags: &mut Diagnostics) -> Connection {
    let explicit = [
        ("server", &raw.server),
        ("ca_file", &raw.ca_file),
        ("token_file", &raw.token_file),
        ("client_cert", &raw.client_cert),
        ("client_key", &raw.client_key),
    ];
    if raw.in_cluster.as_ref().is_some_and(|v| *v.get_ref()) {
        for (key, value) in explicit {
            if let Some(v) = value {
                diags.error(
                    v.span(),
                    format!("`{key}` does not go with in_cluster = true, which uses the pod's service account: remove one of them"),
                );
            }
        }
        return Connection::InCluster;
    }
    if explicit.iter().all(|(_, v)| v.is_none()) {
        diags.error(
            section,
            "`[kubernetes]` needs a way to reach the cluster: in_cluster = true, or `server`, `ca_file` and `token_file` (or `client_cert` + `client_key`)",
        );
        return Connection::InCluster;
    }
    let server = match &raw.server {
        Some(s) => match server_url(s, diags) {
            Some(url) if url.scheme == Scheme::Http => return local_proxy(raw, url, diags),
            // An http:// server that was refused: the files written are still checked, but
            // what https would need besides is beside the point.
            None if s.get_ref().starts_with("http://") => {
                for (key, value) in &explicit[1..] {
                    if let Some(v) = value {
                        secret_path(v, key, diags);
                    }
                }
                return Connection::InCluster;
            }
            url => url,
        },
        None => {
            diags.error(
                section.clone(),
                "`[kubernetes]` needs `server` (an https:// URL) with `ca_file` and credentials, or in_cluster = true",
            );
            None
        }
    };
    let ca_file = match &raw.ca_file {
        Some(c) => secret_path(c, "ca_file", diags),
        None => {
            diags.error(
                section.clone(),
                "`[kubernetes]` needs `ca_file`: the cluster CA that signs the API server's certificate",
            );
            None
        }
    };
    let credentials = credentials(raw, section, diags);
    match (server, ca_file, credentials) {
        (Some(server), Some(ca_file), Some(credentials)) => Connection::Server {
            server,
            ca_file,
            credentials,
        },
        // An error is recorded: the value is never used.
        _ => Connection::InCluster,
    }
}

/// A node-local proxy over plain HTTP: a bearer token at most; a CA or a client certificate
/// would verify nothing without TLS, so they are mistakes, not options.
fn local_proxy(raw: &RawKubernetes, server: ServerUrl, diags: &mut Diagnostics) -> Connection {
    for (key, value) in [
        ("ca_file", &raw.ca_file),
        ("client_cert", &raw.client_cert),
        ("client_key", &raw.client_key),
    ] {
        if let Some(v) = value {
            diags.error(
                v.span(),
                format!("`{key}` needs TLS, and an http:// server has none: remove it, or use an https:// server"),
            );
        }
    }
    let token_file = raw
        .token_file
        .as_ref()
        .and_then(|t| secret_path(t, "token_file", diags));
    Connection::LocalProxy { server, token_file }
}

/// Exactly one of `token_file` and `client_cert` + `client_key`.
fn credentials(
    raw: &RawKubernetes,
    section: Range<usize>,
    diags: &mut Diagnostics,
) -> Option<Credentials> {
    let cert_pair = match (&raw.client_cert, &raw.client_key) {
        (Some(c), Some(k)) => Some((c, k)),
        (Some(c), None) => {
            diags.error(c.span(), "`client_cert` needs `client_key` beside it");
            return None;
        }
        (None, Some(k)) => {
            diags.error(k.span(), "`client_key` needs `client_cert` beside it");
            return None;
        }
        (None, None) => None,
    };
    match (&raw.token_file, cert_pair) {
        (Some(t), Some((c, _))) => {
            diags.error_also(
                c.span(),
                "two ways to authenticate: expected either `token_file` or `client_cert` + `client_key`",
                t.span(),
                "`token_file` is set here",
            );
            None
        }
        (Some(t), None) => secret_path(t, "token_file", diags).map(Credentials::Token),
        (None, Some((c, k))) => {
            let cert = secret_path(c, "client_cert", diags);
            let key = secret_path(k, "client_key", diags);
            Some(Credentials::ClientCert {
                cert: cert?,
                key: key?,
            })
        }
        (None, None) => {
            diags.error(
                section,
                "`[kubernetes]` needs credentials: `token_file`, or `client_cert` + `client_key`",
            );
            None
        }
    }
}

fn secret_path(v: &Spanned<String>, key: &str, diags: &mut Diagnostics) -> Option<SecretPath> {
    if !no_nul(v, key, diags) {
        return None;
    }
    let text = v.get_ref();
    if let Some(name) = text.strip_prefix("credential:") {
        let ok = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
        if ok {
            return Some(SecretPath::Credential(name.to_string()));
        }
        diags.error(
            v.span(),
            format!("invalid {key} `{text}`: expected credential:NAME with a file name, e.g. \"credential:k8s-token\""),
        );
        return None;
    }
    if text.starts_with('/') {
        return Some(SecretPath::File(PathBuf::from(text)));
    }
    diags.error(
        v.span(),
        format!("invalid {key} `{text}`: expected an absolute path or credential:NAME (a systemd credential)"),
    );
    None
}

fn server_url(v: &Spanned<String>, diags: &mut Diagnostics) -> Option<ServerUrl> {
    parse_server_url(v.get_ref())
        .map_err(|why| diags.error(v.span(), format!("invalid server `{}`: {why}", v.get_ref())))
        .ok()
}

/// `https://host[:port][/path]`: no user, query or fragment; IPv6 hosts in brackets. Or
/// `http://` with a loopback host (a node-local proxy): anywhere else plain HTTP would carry
/// the token and the cluster's state across a network in clear.
pub fn parse_server_url(text: &str) -> Result<ServerUrl, String> {
    let (scheme, rest) = if let Some(rest) = text.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = text.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else {
        return Err("expected an https:// URL, e.g. \"https://10.0.0.1:6443\"".into());
    };
    if rest.contains(['?', '#', '@']) || rest.contains(char::is_whitespace) {
        return Err("expected https://host[:port][/path] without user, query or fragment".into());
    }
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or("an IPv6 host without `]`")?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("`{addr}` is not an IPv6 address"))?;
        (addr, after.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if scheme == Scheme::Http && !is_loopback_host(host) {
        return Err(format!(
            "plain http:// only to a node-local proxy on this node's loopback (127.0.0.0/8, ::1 or localhost), such as KubeEdge's MetaServer or OpenYurt's YurtHub; to `{host}` it would carry the token and the cluster's state across the network in clear: use https://"
        ));
    }
    let port = match port {
        None if scheme == Scheme::Http => 80,
        None => 443,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("invalid port `{p}`: expected 1-65535")),
        },
    };
    Ok(ServerUrl {
        scheme,
        host: host.to_string(),
        port,
        path: path.trim_end_matches('/').to_string(),
    })
}

fn cache_file(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<PathBuf> {
    let v = v?;
    if !no_nul(v, "cache_file", diags) {
        return None;
    }
    if v.get_ref().starts_with('/') && !v.get_ref().ends_with('/') {
        return Some(PathBuf::from(v.get_ref()));
    }
    diags.error(
        v.span(),
        format!(
            "invalid cache_file `{}`: expected an absolute file path, e.g. \"/run/edgenetd/kubernetes-state.json\"",
            v.get_ref()
        ),
    );
    None
}

/// A duration above zero (no limit is the key left out).
fn cache_max_age(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Duration> {
    let v = v?;
    match parse_duration(v.get_ref()) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => {
            diags.error(
                v.span(),
                "cache_max_age must be more than 0 (leave it out for no limit), e.g. \"24h\"",
            );
            None
        }
        Err(why) => {
            diags.error(v.span(), format!("cache_max_age: {why}"));
            None
        }
    }
}

/// `namespace/name`: a namespace (an RFC 1123 label) and a ConfigMap name (a subdomain).
#[cfg(feature = "kubernetes")]
fn config_map(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<ConfigMapRef> {
    let v = v?;
    let text = v.get_ref();
    let parsed = text.split_once('/').filter(|(ns, name)| {
        ns.len() <= 63 && !ns.contains('.') && is_dns_subdomain(ns) && is_dns_subdomain(name)
    });
    match parsed {
        Some((namespace, name)) => Some(ConfigMapRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }),
        None => {
            diags.error(
                v.span(),
                format!(
                    "invalid config_map `{text}`: expected \"namespace/name\" (lowercase letters, digits and `-`; the name may have `.`), e.g. \"kube-system/edgenetd-fleet\""
                ),
            );
            None
        }
    }
}

/// A duration of at least a second (a router must get the time to reach the API server).
#[cfg(feature = "kubernetes")]
fn config_confirm(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Duration {
    let Some(v) = v else {
        return DEFAULT_CONFIG_CONFIRM;
    };
    match parse_duration(v.get_ref()) {
        Ok(d) if d >= Duration::from_secs(1) => d,
        Ok(_) => {
            diags.error(
                v.span(),
                "config_confirm must be at least 1s: the time a config from the cluster has to show the router still reaches the API server, e.g. \"2m\"",
            );
            DEFAULT_CONFIG_CONFIRM
        }
        Err(why) => {
            diags.error(v.span(), format!("config_confirm: {why}"));
            DEFAULT_CONFIG_CONFIRM
        }
    }
}

fn node_name(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<String> {
    let v = v?;
    if is_dns_subdomain(v.get_ref()) {
        return Some(v.get_ref().clone());
    }
    diags.error(
        v.span(),
        format!(
            "invalid node_name `{}`: expected a Node name (lowercase letters, digits, `-` and `.`, at most 253 characters)",
            v.get_ref()
        ),
    );
    None
}

/// The namespace the kubelet keeps its own Lease of each node in, under the node's name.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// A namespace name (an RFC 1123 label), other than the kubelet's.
fn status_namespace(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<String> {
    let v = v?;
    let text = v.get_ref();
    if text == NODE_LEASE_NAMESPACE {
        diags.error(
            v.span(),
            format!("invalid status_namespace `{text}`: the kubelet renews its own Lease of the node there under the same name; expected another namespace, e.g. \"edgenetd\""),
        );
        return None;
    }
    if is_dns_subdomain(text) && !text.contains('.') {
        return Some(text.clone());
    }
    diags.error(
        v.span(),
        format!("invalid status_namespace `{text}`: expected a namespace name (lowercase letters, digits and `-`, at most 63 characters)"),
    );
    None
}

fn feeds(v: Option<&Spanned<Vec<Spanned<String>>>>, diags: &mut Diagnostics) -> BTreeSet<Feed> {
    let Some(v) = v else {
        return Feed::ALL.into_iter().collect();
    };
    if v.get_ref().is_empty() {
        diags.error(
            v.span(),
            "empty feeds: expected at least one of \"services\", \"routes\", \"network_policies\" (or no [kubernetes] section)",
        );
    }
    let mut out = BTreeSet::new();
    for item in v.get_ref() {
        let Some(feed) = Feed::ALL.into_iter().find(|f| f.name() == item.get_ref()) else {
            diags.error(
                item.span(),
                format!(
                    "unknown feed `{}`: expected \"services\", \"routes\" or \"network_policies\"",
                    item.get_ref()
                ),
            );
            continue;
        };
        if !out.insert(feed) {
            diags.error(
                item.span(),
                format!("feed `{}` is listed twice", feed.name()),
            );
        }
    }
    out
}

/// A selector; errors point into the string when it is written without escapes.
fn selector(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<LabelSelector> {
    let v = v?;
    match LabelSelector::parse(v.get_ref()) {
        Ok(s) => Some(s),
        Err(e) => {
            let span = v.span();
            // `"text"` or `'text'`: the text starts one byte after the span does.
            let plain = span.len() == v.get_ref().len() + 2;
            let at = if plain {
                let start = span.start + 1 + e.at;
                start..start + 1
            } else {
                span
            };
            diags.error(at, format!("invalid label selector `{}`: {e}", v.get_ref()));
            None
        }
    }
}

/// A list of prefixes, each once.
fn prefixes(v: &Spanned<Vec<Spanned<String>>>, key: &str, diags: &mut Diagnostics) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = Vec::new();
    for item in v.get_ref() {
        match parse_prefix(item.get_ref()) {
            Ok(net) if out.contains(&net) => {
                diags.error(item.span(), format!("{key}: {net} is listed twice"));
            }
            Ok(net) => out.push(net),
            Err(e) => diags.error(item.span(), format!("{key}: {e}")),
        }
    }
    out
}

/// `node_port_addresses`: `"primary"` or `"all"` alone, or prefixes.
fn node_port_addresses(
    v: Option<&Spanned<Vec<Spanned<String>>>>,
    diags: &mut Diagnostics,
) -> NodePortAddresses {
    let Some(v) = v else {
        return NodePortAddresses::Primary;
    };
    let items = v.get_ref();
    let word = |w: &str| items.iter().find(|i| i.get_ref() == w);
    if items.is_empty() {
        diags.error(
            v.span(),
            "empty node_port_addresses: expected [\"primary\"] (the default), [\"all\"], or prefixes",
        );
        return NodePortAddresses::Primary;
    }
    for (w, mode) in [
        ("primary", NodePortAddresses::Primary),
        ("all", NodePortAddresses::All),
    ] {
        if let Some(item) = word(w) {
            if items.len() > 1 {
                diags.error(
                    item.span(),
                    format!("node_port_addresses: \"{w}\" goes alone: expected [\"{w}\"] or a list of prefixes"),
                );
            }
            return mode;
        }
    }
    NodePortAddresses::Cidrs(prefixes(v, "node_port_addresses", diags))
}

/// `pod_cidrs`: at least one prefix (leaving the key out is how to take the Node's).
fn pod_cidrs(
    v: Option<&Spanned<Vec<Spanned<String>>>>,
    diags: &mut Diagnostics,
) -> Option<Vec<IpNet>> {
    let v = v?;
    if v.get_ref().is_empty() {
        diags.error(
            v.span(),
            "empty pod_cidrs: expected this node's pod prefixes, e.g. [\"10.42.1.0/24\"] (leave the key out to take the Node's spec.podCIDRs)",
        );
        return None;
    }
    Some(prefixes(v, "pod_cidrs", diags))
}

/// `network_policy_mode`: `"enforce"` (the default) or `"audit"`.
fn network_policy_mode(v: Option<&Spanned<String>>, diags: &mut Diagnostics) -> PolicyMode {
    let Some(v) = v else {
        return PolicyMode::Enforce;
    };
    match v.get_ref().as_str() {
        "enforce" => PolicyMode::Enforce,
        "audit" => PolicyMode::Audit,
        other => {
            diags.error(
                v.span(),
                format!("invalid network_policy_mode `{other}`: expected \"enforce\" or \"audit\""),
            );
            PolicyMode::Enforce
        }
    }
}
