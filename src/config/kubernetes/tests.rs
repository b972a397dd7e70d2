//! `[kubernetes]`: every key, every rule, each error at its place; and what a build without
//! the feature says.

use std::path::PathBuf;

use super::{
    BUILT_WITH_FEATURE, Connection, Credentials, Feed, KubernetesConfig, Scheme, SecretPath,
    ServerUrl, parse_server_url, selector,
};
use crate::config::*;

const NEEDS_FEATURE: &str = "`[kubernetes]` needs a build with the `kubernetes` feature";

/// The section's validated value in a feature build; in a build without the feature, checks
/// that the only complaint is the missing feature, at the section header.
fn accepted(text: &str) -> Option<KubernetesConfig> {
    let result = load_str(&[("edgenetd.toml", text)]);
    if BUILT_WITH_FEATURE {
        let state = result.unwrap_or_else(|e| panic!("rejected: {e}"));
        return Some(state.kubernetes.expect("section present"));
    }
    let e = result.expect_err("accepted without the feature");
    assert_eq!(e.count, 1, "{e}");
    assert!(e.first.contains(NEEDS_FEATURE), "{e}");
    None
}

/// The rendered errors (the missing feature's one aside).
fn rejected(text: &str) -> String {
    let e = load_str(&[("edgenetd.toml", text)]).expect_err("must be rejected");
    assert_eq!(
        e.rendered.contains(NEEDS_FEATURE),
        !BUILT_WITH_FEATURE,
        "{e}"
    );
    e.rendered
}

fn has(rendered: &str, want: &str) {
    assert!(rendered.contains(want), "missing {want:?} in\n{rendered}");
}

#[test]
fn a_k3s_client_certificate_setup_is_read_key_for_key() {
    let Some(k) = accepted(
        r#"
[kubernetes]
server = "https://[2001:db8::1]:6443/"
ca_file = "/etc/edgenetd/k3s-ca.crt"
client_cert = "/etc/edgenetd/k3s-client.crt"
client_key = "credential:k3s-client-key"
node_name = "edge-7.example"
feeds = ["services", "routes"]
service_selector = "edge.example.com/expose=true"
node_selector = "zone in (north, south)"
network_policy_selector = "!legacy"
"#,
    ) else {
        return;
    };
    assert_eq!(
        k.connection,
        Connection::Server {
            server: ServerUrl {
                scheme: Scheme::Https,
                host: "2001:db8::1".into(),
                port: 6443,
                path: String::new()
            },
            ca_file: SecretPath::File(PathBuf::from("/etc/edgenetd/k3s-ca.crt")),
            credentials: Credentials::ClientCert {
                cert: SecretPath::File(PathBuf::from("/etc/edgenetd/k3s-client.crt")),
                key: SecretPath::Credential("k3s-client-key".into()),
            },
        }
    );
    assert_eq!(k.node_name.as_deref(), Some("edge-7.example"));
    assert_eq!(
        k.feeds.into_iter().collect::<Vec<_>>(),
        [Feed::Services, Feed::Routes]
    );
    let show = |s: Option<selector::LabelSelector>| s.unwrap().to_string();
    assert_eq!(show(k.service_selector), "edge.example.com/expose=true");
    assert_eq!(show(k.node_selector), "zone in (north,south)");
    assert_eq!(show(k.network_policy_selector), "!legacy");
}

#[test]
fn in_cluster_alone_takes_every_feed_and_the_host_name() {
    let Some(k) = accepted("[kubernetes]\nin_cluster = true\n") else {
        return;
    };
    assert_eq!(k.connection, Connection::InCluster);
    assert_eq!(k.node_name, None);
    assert_eq!(k.feeds.into_iter().collect::<Vec<_>>(), Feed::ALL);
    assert_eq!(k.service_selector, None);
}

#[test]
fn a_token_setup_is_read() {
    let Some(k) = accepted(
        "[kubernetes]\nserver = \"https://k8s.example:443/prefix\"\nca_file = \"credential:ca\"\ntoken_file = \"credential:k8s-token\"\n",
    ) else {
        return;
    };
    let Connection::Server {
        server,
        credentials,
        ..
    } = k.connection
    else {
        panic!("not a server connection");
    };
    assert_eq!(
        (server.host.as_str(), server.port, server.path.as_str()),
        ("k8s.example", 443, "/prefix")
    );
    assert_eq!(
        credentials,
        Credentials::Token(SecretPath::Credential("k8s-token".into()))
    );
}

#[test]
fn no_section_means_fed_by_toml_only() {
    assert_eq!(load_str(&[("edgenetd.toml", "")]).unwrap().kubernetes, None);
}

#[test]
fn in_cluster_excludes_every_explicit_connection_key() {
    let out = rejected(
        "[kubernetes]\nin_cluster = true\nserver = \"https://10.0.0.1:6443\"\nca_file = \"/ca\"\ntoken_file = \"/t\"\n",
    );
    has(
        &out,
        "edgenetd.toml:3:10: error: `server` does not go with in_cluster = true",
    );
    has(&out, "edgenetd.toml:4:11: error: `ca_file` does not go");
    has(&out, "edgenetd.toml:5:14: error: `token_file` does not go");
}

#[test]
fn exactly_one_way_to_authenticate() {
    let both = rejected(
        "[kubernetes]\nserver = \"https://h\"\nca_file = \"/ca\"\ntoken_file = \"/t\"\nclient_cert = \"/c\"\nclient_key = \"/k\"\n",
    );
    has(&both, "edgenetd.toml:5:15: error: two ways to authenticate");
    has(&both, "edgenetd.toml:4:14: note: `token_file` is set here");
    let none = rejected("[kubernetes]\nserver = \"https://h\"\nca_file = \"/ca\"\n");
    has(&none, "error: `[kubernetes]` needs credentials");
    let half =
        rejected("[kubernetes]\nserver = \"https://h\"\nca_file = \"/ca\"\nclient_cert = \"/c\"\n");
    has(
        &half,
        "edgenetd.toml:4:15: error: `client_cert` needs `client_key` beside it",
    );
    let nothing = rejected("[kubernetes]\nnode_name = \"n\"\n");
    has(
        &nothing,
        "edgenetd.toml:1:1: error: `[kubernetes]` needs a way to reach the cluster: in_cluster = true, or `server`",
    );
    assert!(
        !nothing.contains("needs `ca_file`"),
        "one error, not three:\n{nothing}"
    );
    let no_server = rejected("[kubernetes]\ntoken_file = \"/t\"\n");
    has(
        &no_server,
        "edgenetd.toml:1:1: error: `[kubernetes]` needs `server`",
    );
    has(
        &no_server,
        "edgenetd.toml:1:1: error: `[kubernetes]` needs `ca_file`",
    );
}

#[test]
fn the_server_is_an_https_url_and_files_are_absolute_or_credentials() {
    let out = rejected(
        "[kubernetes]\nserver = \"http://10.0.0.1:6443\"\nca_file = \"ca.crt\"\ntoken_file = \"credential:a/b\"\n",
    );
    has(
        &out,
        "edgenetd.toml:2:10: error: invalid server `http://10.0.0.1:6443`: plain http:// only to a node-local proxy on this node's loopback",
    );
    has(
        &out,
        "edgenetd.toml:3:11: error: invalid ca_file `ca.crt`: expected an absolute path or credential:NAME",
    );
    has(
        &out,
        "edgenetd.toml:4:14: error: invalid token_file `credential:a/b`",
    );
    for bad in [
        "https://",
        "https://h:0",
        "https://h:70000",
        "https://user@h",
        "https://h/?x=1",
        "https://[::1",
        "https://[zz]:1",
    ] {
        assert!(parse_server_url(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_server_url("https://10.0.0.1").unwrap().port, 443);
    assert_eq!(parse_server_url("http://127.0.0.1").unwrap().port, 80);
}

/// KubeEdge's MetaServer and OpenYurt's YurtHub serve the API on the node's loopback over
/// plain HTTP and authenticate upstream themselves: no CA, no credentials needed.
#[test]
fn a_node_local_proxy_over_plain_http_on_loopback_needs_no_credentials() {
    let Some(k) = accepted("[kubernetes]\nserver = \"http://127.0.0.1:10550\"\n") else {
        return;
    };
    let metaserver = ServerUrl {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port: 10550,
        path: String::new(),
    };
    assert_eq!(
        k.connection,
        Connection::LocalProxy {
            server: metaserver,
            token_file: None
        }
    );
    let k = accepted(
        "[kubernetes]\nserver = \"http://localhost:10261\"\ntoken_file = \"credential:k8s-token\"\n",
    )
    .unwrap();
    let Connection::LocalProxy { server, token_file } = k.connection else {
        panic!("not a local proxy: {:?}", k.connection);
    };
    assert_eq!((server.host.as_str(), server.port), ("localhost", 10261));
    assert_eq!(token_file, Some(SecretPath::Credential("k8s-token".into())));
    for loopback in [
        "http://127.0.0.53",
        "http://[::1]:8001/prefix",
        "http://LOCALHOST",
    ] {
        let url = parse_server_url(loopback).unwrap_or_else(|e| panic!("{loopback}: {e}"));
        assert_eq!(url.scheme, Scheme::Http);
    }
}

#[test]
fn plain_http_anywhere_but_loopback_is_refused_and_tls_keys_with_it_are_mistakes() {
    let out = rejected("[kubernetes]\nserver = \"http://edge-proxy.lan:10261\"\n");
    has(
        &out,
        "edgenetd.toml:2:10: error: invalid server `http://edge-proxy.lan:10261`: plain http:// only to a node-local proxy on this node's loopback (127.0.0.0/8, ::1 or localhost)",
    );
    has(
        &out,
        "to `edge-proxy.lan` it would carry the token and the cluster's state across the network in clear: use https://",
    );
    assert!(!out.contains("needs `ca_file`"), "nothing piled on: {out}");
    for far in [
        "http://10.0.0.1",
        "http://[fd00::1]:80",
        "http://localhost.example",
    ] {
        let e = parse_server_url(far).unwrap_err();
        assert!(e.contains("plain http:// only to"), "{far}: {e}");
    }
    let out = rejected(
        "[kubernetes]\nserver = \"http://127.0.0.1:10550\"\nca_file = \"/ca.pem\"\nclient_cert = \"/c.pem\"\nclient_key = \"/k.pem\"\n",
    );
    for (at, key) in [
        ("3:11", "ca_file"),
        ("4:15", "client_cert"),
        ("5:14", "client_key"),
    ] {
        has(
            &out,
            &format!(
                "edgenetd.toml:{at}: error: `{key}` needs TLS, and an http:// server has none"
            ),
        );
    }
}

#[test]
fn feeds_are_known_names_each_once() {
    let out = rejected(
        "[kubernetes]\nin_cluster = true\nfeeds = [\"services\", \"pods\", \"services\"]\n",
    );
    has(
        &out,
        "edgenetd.toml:3:22: error: unknown feed `pods`: expected \"services\", \"routes\" or \"network_policies\"",
    );
    has(
        &out,
        "edgenetd.toml:3:30: error: feed `services` is listed twice",
    );
    let empty = rejected("[kubernetes]\nin_cluster = true\nfeeds = []\n");
    has(&empty, "edgenetd.toml:3:9: error: empty feeds");
}

#[test]
fn selectors_follow_the_label_selector_grammar_with_the_column_of_the_problem() {
    let out = rejected(
        "[kubernetes]\nin_cluster = true\nservice_selector = \"app=web,tier in (a\"\nnode_selector = \"Role/x=1\"\nnetwork_policy_selector = \"a==-b\"\n",
    );
    has(
        &out,
        "edgenetd.toml:3:39: error: invalid label selector `app=web,tier in (a`: expected `)`",
    );
    has(
        &out,
        "edgenetd.toml:4:18: error: invalid label selector `Role/x=1`: invalid label key `Role/x`",
    );
    has(
        &out,
        "edgenetd.toml:5:31: error: invalid label selector `a==-b`: invalid label value `-b`",
    );
}

#[test]
fn node_name_and_unknown_keys_are_checked() {
    let out = rejected("[kubernetes]\nin_cluster = true\nnode_name = \"Edge_7\"\n");
    has(
        &out,
        "edgenetd.toml:3:13: error: invalid node_name `Edge_7`: expected a Node name",
    );
    let out = rejected("[kubernetes]\nin_cluster = true\ninsecure = true\n");
    has(&out, "edgenetd.toml:3:1: error: unknown field `insecure`");
}

#[test]
fn a_build_without_the_feature_names_the_feature_at_the_section() {
    if BUILT_WITH_FEATURE {
        return;
    }
    let out = rejected("\n[kubernetes]\nin_cluster = true\n");
    has(
        &out,
        "edgenetd.toml:2:2: error: `[kubernetes]` needs a build with the `kubernetes` feature",
    );
}

#[test]
fn toml_service_names_may_not_take_the_cluster_prefix() {
    let e = load_str(&[(
        "edgenetd.toml",
        "[[service]]\nname = \"k8s:default/web:http\"\naddress = \"10.0.0.1\"\nport = 80\n",
    )])
    .expect_err("reserved prefix");
    has(
        &e.rendered,
        "edgenetd.toml:2:8: error: invalid service name `k8s:default/web:http`: names starting with `k8s:` are reserved",
    );
}

/// The commented `[kubernetes]` example in config/edgenetd.toml, uncommented, is valid.
#[test]
fn the_commented_example_in_the_example_config_is_valid() {
    let example = include_str!("../../../config/edgenetd.toml");
    let section: String = example
        .lines()
        .skip_while(|l| *l != "# [kubernetes]")
        .map_while(|l| l.strip_prefix("# "))
        // A build without the feature does not know these keys at all (unknown keys there).
        .filter(|l| {
            BUILT_WITH_FEATURE || !(l.starts_with("config_map") || l.starts_with("config_confirm"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(section.lines().count() > 5, "{section}");
    let Some(k) = accepted(&section) else {
        return;
    };
    assert_eq!(k.feeds.len(), 3);
    assert!(matches!(
        k.connection,
        Connection::Server {
            credentials: Credentials::ClientCert { .. },
            ..
        }
    ));
    assert_eq!(
        k.node_selector.unwrap().to_string(),
        "topology.kubernetes.io/zone in (north,south)"
    );
    #[cfg(feature = "kubernetes")]
    assert_eq!(
        k.config_map.map(|c| c.to_string()).as_deref(),
        Some("kube-system/edgenetd-fleet")
    );
}

#[test]
fn a_credential_resolves_in_the_credentials_directory_and_a_path_as_itself() {
    let dir = std::path::Path::new("/run/credentials/edgenetd.service");
    let cred = SecretPath::Credential("k8s-token".into());
    assert_eq!(cred.resolve(Some(dir)).unwrap(), dir.join("k8s-token"));
    let e = cred.resolve(None).unwrap_err();
    assert!(
        e.to_string()
            .contains("credential `k8s-token`: $CREDENTIALS_DIRECTORY is not set"),
        "{e}"
    );
    let file = SecretPath::File(PathBuf::from("/etc/edgenetd/ca.crt"));
    assert_eq!(
        file.resolve(None).unwrap(),
        PathBuf::from("/etc/edgenetd/ca.crt")
    );
}

#[test]
fn the_cache_file_is_an_absolute_path_and_absent_by_default() {
    if let Some(k) = accepted("[kubernetes]\nin_cluster = true\n") {
        assert_eq!(k.cache_file, None);
    }
    if let Some(k) =
        accepted("[kubernetes]\nin_cluster = true\ncache_file = \"/var/lib/e/k.json\"\n")
    {
        assert_eq!(k.cache_file, Some(PathBuf::from("/var/lib/e/k.json")));
    }
    let out = rejected("[kubernetes]\nin_cluster = true\ncache_file = \"state.json\"\n");
    has(
        &out,
        "edgenetd.toml:3:14: error: invalid cache_file `state.json`",
    );
}

#[test]
fn cache_max_age_is_a_duration_above_zero_and_no_limit_by_default() {
    if let Some(k) = accepted("[kubernetes]\nin_cluster = true\n") {
        assert_eq!(k.cache_max_age, None);
    }
    if let Some(k) = accepted(
        "[kubernetes]\nin_cluster = true\ncache_file = \"/var/lib/edgenetd/kubernetes-state.json\"\ncache_max_age = \"72h\"\n",
    ) {
        assert_eq!(
            k.cache_max_age,
            Some(std::time::Duration::from_secs(72 * 3600))
        );
    }
    let out = rejected("[kubernetes]\nin_cluster = true\ncache_max_age = \"3 days\"\n");
    has(
        &out,
        "edgenetd.toml:3:17: error: cache_max_age: invalid duration `3 days`: expected a number with a unit",
    );
    let out = rejected("[kubernetes]\nin_cluster = true\ncache_max_age = \"0s\"\n");
    has(
        &out,
        "edgenetd.toml:3:17: error: cache_max_age must be more than 0 (leave it out for no limit)",
    );
}

const SECTION: &str = "[kubernetes]\nin_cluster = true\n";

#[test]
fn service_cidrs_cluster_cidrs_and_node_port_addresses_are_read() {
    use super::NodePortAddresses;
    let nets = |v: &[&str]| -> Vec<ipnet::IpNet> { v.iter().map(|n| n.parse().unwrap()).collect() };
    let Some(k) = accepted(&format!(
        "{SECTION}service_cidrs = [\"10.96.0.0/12\", \"fd00:96::/108\"]\ncluster_cidrs = [\"10.42.0.0/16\"]\nnode_port_addresses = [\"192.168.1.0/24\", \"2001:db8::/64\"]\n"
    )) else {
        return;
    };
    assert_eq!(k.service_cidrs, nets(&["10.96.0.0/12", "fd00:96::/108"]));
    assert_eq!(k.cluster_cidrs, Some(nets(&["10.42.0.0/16"])));
    assert_eq!(
        k.node_port_addresses,
        NodePortAddresses::Cidrs(nets(&["192.168.1.0/24", "2001:db8::/64"]))
    );
    let Some(k) = accepted(SECTION) else { return };
    assert_eq!(
        (k.service_cidrs, k.cluster_cidrs, k.node_port_addresses),
        (Vec::new(), None, NodePortAddresses::Primary),
        "defaults: no configured service CIDRs, the node's pod CIDRs, the primary addresses"
    );
    let Some(k) = accepted(&format!(
        "{SECTION}cluster_cidrs = []\nnode_port_addresses = [\"all\"]\n"
    )) else {
        return;
    };
    assert_eq!(
        k.cluster_cidrs,
        Some(Vec::new()),
        "[] = no local-traffic detector"
    );
    assert_eq!(k.node_port_addresses, NodePortAddresses::All);
    let Some(k) = accepted(&format!("{SECTION}node_port_addresses = [\"primary\"]\n")) else {
        return;
    };
    assert_eq!(k.node_port_addresses, NodePortAddresses::Primary);
}

#[test]
fn bad_service_cidrs_cluster_cidrs_and_node_port_addresses_are_errors_at_their_place() {
    let e = rejected(&format!(
        "{SECTION}service_cidrs = [\"10.96.0.1/12\", \"nope\"]\ncluster_cidrs = [\"10.42.0.0/16\", \"10.42.0.0/16\"]\nnode_port_addresses = [\"primary\", \"10.0.0.0/8\"]\n"
    ));
    if !BUILT_WITH_FEATURE {
        return;
    }
    has(
        &e,
        "edgenetd.toml:3:18: error: service_cidrs: invalid prefix `10.96.0.1/12`: host bits are set",
    );
    has(
        &e,
        "edgenetd.toml:3:34: error: service_cidrs: invalid prefix `nope`",
    );
    has(
        &e,
        "edgenetd.toml:4:34: error: cluster_cidrs: 10.42.0.0/16 is listed twice",
    );
    has(
        &e,
        "edgenetd.toml:5:24: error: node_port_addresses: \"primary\" goes alone",
    );
    let e = rejected(&format!("{SECTION}node_port_addresses = []\n"));
    has(&e, "empty node_port_addresses");
}

/// Keys a build without the feature does not know (unknown keys there, as before them).
#[cfg(feature = "kubernetes")]
#[test]
fn config_map_is_namespace_slash_name_and_config_confirm_a_duration_of_2m_by_default() {
    if let Some(k) = accepted("[kubernetes]\nin_cluster = true\n") {
        assert_eq!(k.config_map, None);
        assert_eq!(k.config_confirm, super::DEFAULT_CONFIG_CONFIRM);
        assert_eq!(k.config_confirm, std::time::Duration::from_secs(120));
    }
    if let Some(k) = accepted(
        "[kubernetes]\nin_cluster = true\nconfig_map = \"kube-system/edgenetd-fleet.v2\"\nconfig_confirm = \"30s\"\n",
    ) {
        let cm = k.config_map.unwrap();
        assert_eq!(
            (cm.namespace.as_str(), cm.name.as_str()),
            ("kube-system", "edgenetd-fleet.v2")
        );
        assert_eq!(cm.to_string(), "kube-system/edgenetd-fleet.v2");
        assert_eq!(k.config_confirm, std::time::Duration::from_secs(30));
    }
    for bad in [
        "edgenetd-fleet",
        "kube.system/x",
        "kube-system/",
        "/x",
        "a/b/c",
        "Kube/x",
    ] {
        let out = rejected(&format!(
            "[kubernetes]\nin_cluster = true\nconfig_map = \"{bad}\"\n"
        ));
        has(
            &out,
            &format!(
                "edgenetd.toml:3:14: error: invalid config_map `{bad}`: expected \"namespace/name\""
            ),
        );
    }
    let out = rejected("[kubernetes]\nin_cluster = true\nconfig_confirm = \"500ms\"\n");
    has(
        &out,
        "edgenetd.toml:3:18: error: config_confirm must be at least 1s",
    );
    let out = rejected("[kubernetes]\nin_cluster = true\nconfig_confirm = \"soon\"\n");
    has(
        &out,
        "edgenetd.toml:3:18: error: config_confirm: invalid duration `soon`",
    );
}

#[test]
fn pod_isolation_keys_are_read_and_default_off() {
    use super::PolicyMode;
    let Some(k) = accepted(SECTION) else { return };
    assert_eq!(
        (
            k.isolate_unknown_pods,
            k.pod_cidrs.clone(),
            k.log_denied,
            k.network_policy_mode
        ),
        (false, None, false, PolicyMode::Enforce),
        "defaults: no isolation of unknown addresses, the Node's pod CIDRs, no reports, enforce"
    );
    let Some(k) = accepted(&format!(
        "{SECTION}isolate_unknown_pods = true\npod_cidrs = [\"10.42.1.0/24\", \"fd42:1::/64\"]\nlog_denied = true\nnetwork_policy_mode = \"audit\"\n"
    )) else {
        return;
    };
    assert!(k.isolate_unknown_pods && k.log_denied);
    assert_eq!(
        k.pod_cidrs,
        Some(vec![
            "10.42.1.0/24".parse().unwrap(),
            "fd42:1::/64".parse().unwrap()
        ])
    );
    assert_eq!(k.network_policy_mode, PolicyMode::Audit);
}

#[test]
fn bad_pod_isolation_keys_are_errors_at_their_place() {
    let e = rejected(&format!("{SECTION}log_denied = \"yes\"\n"));
    has(
        &e,
        "edgenetd.toml:3:14: error: invalid type: string \"yes\", expected a boolean",
    );
    let e = rejected(&format!("{SECTION}pod_cidrs = [\"10.42.1.1/24\"]\n"));
    if !BUILT_WITH_FEATURE {
        return;
    }
    has(
        &e,
        "edgenetd.toml:3:14: error: pod_cidrs: invalid prefix `10.42.1.1/24`: host bits are set",
    );
    let e = rejected(&format!(
        "{SECTION}pod_cidrs = []\nnetwork_policy_mode = \"dry-run\"\n"
    ));
    has(&e, "edgenetd.toml:3:13: error: empty pod_cidrs");
    has(
        &e,
        "edgenetd.toml:4:23: error: invalid network_policy_mode `dry-run`: expected \"enforce\" or \"audit\"",
    );
}

#[test]
fn the_status_namespace_is_a_namespace_name_off_by_default_and_never_the_kubelets() {
    if let Some(k) = accepted(SECTION) {
        assert_eq!(k.status_namespace, None, "no Lease unless asked for");
    }
    if let Some(k) = accepted(&format!("{SECTION}status_namespace = \"edgenetd\"\n")) {
        assert_eq!(k.status_namespace.as_deref(), Some("edgenetd"));
    }
    let e = rejected(&format!(
        "{SECTION}status_namespace = \"kube-node-lease\"\n"
    ));
    if BUILT_WITH_FEATURE {
        has(
            &e,
            "edgenetd.toml:3:20: error: invalid status_namespace `kube-node-lease`: the kubelet renews its own Lease",
        );
    }
    for bad in ["Edge", "edge.net", "-edge", ""] {
        let e = rejected(&format!("{SECTION}status_namespace = {bad:?}\n"));
        if BUILT_WITH_FEATURE {
            has(
                &e,
                &format!("invalid status_namespace `{bad}`: expected a namespace name"),
            );
        }
    }
}
