//! The Kubernetes manifests in deploy/kubernetes: the ClusterRole grants exactly `list` and
//! `watch` on exactly the kinds edgenetd reads, the binding gives it to the DaemonSet's
//! service account, the optional status Role grants exactly the verbs of the requests the
//! Lease writer makes on leases in one namespace, and the DaemonSet runs on the host network
//! with CAP_NET_ADMIN alone and a config that edgenetd itself accepts.
//!
//! The YAML is read by PyYAML (a dependency of python3-kubernetes, which
//! `scripts/install-deps.sh --test` installs) and checked here as JSON.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Every document of a YAML file, as JSON values.
fn documents(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import json, sys, yaml\n\
             json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], sys.stdout)",
        ])
        .arg(&path)
        .output()
        .expect("/usr/bin/python3 with PyYAML (scripts/install-deps.sh --test)");
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The one document of `kind`.
fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found[0]
}

/// A JSON array of strings as a set.
fn strings(v: &Value) -> BTreeSet<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("not a string: {s}")))
        .collect()
}

/// (API group, resource) of every collection path the watcher names: `"/api/v1/<r>"` is the
/// core group, `"/apis/<group>/<version>/<r>"` another.
fn watched_by_the_code() -> BTreeSet<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kubernetes/watch/mod.rs");
    let code = std::fs::read_to_string(path).unwrap();
    code.split('"')
        .skip(1)
        .step_by(2)
        .filter_map(|lit| {
            let parts: Vec<&str> = lit.trim_start_matches('/').split('/').collect();
            match parts.as_slice() {
                ["api", "v1", resource] => Some((String::new(), resource.to_string())),
                ["apis", group, _version, resource] => {
                    Some((group.to_string(), resource.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

#[test]
fn cluster_role_grants_only_list_and_watch_on_only_the_kinds_edgenetd_reads() {
    let docs = documents("deploy/kubernetes/rbac.yaml");
    let role = one(&docs, "ClusterRole");
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(
            strings(&rule["verbs"]),
            BTreeSet::from(["list", "watch"]),
            "{rule}"
        );
        for key in ["resourceNames", "nonResourceURLs"] {
            assert!(rule.get(key).is_none(), "{key} in {rule}");
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                assert!(!resource.contains('*') && !group.contains('*'), "{rule}");
                assert!(granted.insert((group, resource)), "granted twice: {rule}");
            }
        }
    }
    let watched = watched_by_the_code();
    assert!(watched.contains(&("discovery.k8s.io".into(), "endpointslices".into())));
    let granted: BTreeSet<(String, String)> = granted
        .into_iter()
        .map(|(g, r)| (g.to_string(), r.to_string()))
        .collect();
    assert_eq!(
        granted, watched,
        "the ClusterRole against the collections src/kubernetes/watch/mod.rs watches"
    );
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"],
        "no other objects (no Role, no second ClusterRole)"
    );
}

#[test]
fn cluster_role_binding_gives_the_role_to_the_service_account() {
    let docs = documents("deploy/kubernetes/rbac.yaml");
    let account = &one(&docs, "ServiceAccount")["metadata"];
    let role = one(&docs, "ClusterRole");
    let binding = one(&docs, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let subjects = binding["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], account["name"]);
    assert_eq!(subjects[0]["namespace"], account["namespace"]);
}

#[test]
fn daemonset_runs_on_the_host_network_with_net_admin_only_as_the_bound_account() {
    let rbac = documents("deploy/kubernetes/rbac.yaml");
    let account = &one(&rbac, "ServiceAccount")["metadata"];
    let docs = documents("deploy/kubernetes/daemonset.yaml");
    let ds = one(&docs, "DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], account["namespace"]);
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["serviceAccountName"], account["name"]);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(
        strings(&c["securityContext"]["capabilities"]["add"]),
        BTreeSet::from(["NET_ADMIN"])
    );
    assert_eq!(
        strings(&c["securityContext"]["capabilities"]["drop"]),
        BTreeSet::from(["ALL"])
    );
    assert_ne!(c["securityContext"]["privileged"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    // The config comes from the ConfigMap, mounted where the args point.
    let map = one(&docs, "ConfigMap");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"] == map["metadata"]["name"])
        .expect("a volume of the ConfigMap");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("the ConfigMap mounted");
    let config_path = format!("{}/edgenetd.toml", mount["mountPath"].as_str().unwrap());
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args, ["run", "--config", config_path.as_str()]);
}

#[test]
fn daemonset_config_is_in_cluster_and_loads() {
    let docs = documents("deploy/kubernetes/daemonset.yaml");
    let text = one(&docs, "ConfigMap")["data"]["edgenetd.toml"]
        .as_str()
        .expect("edgenetd.toml in the ConfigMap")
        .to_string();
    let loaded = edgenetd::config::load_str(&[("edgenetd.toml", &text)]);
    #[cfg(feature = "kubernetes")]
    {
        use edgenetd::config::kubernetes::Connection;
        let state = loaded.unwrap_or_else(|e| panic!("{e}"));
        let k = state.kubernetes.expect("[kubernetes]");
        assert_eq!(k.connection, Connection::InCluster);
        assert_eq!(k.feeds.len(), 3, "every feed");
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let err = loaded
            .expect_err("[kubernetes] needs the feature")
            .to_string();
        assert!(err.contains("`kubernetes` feature"), "{err}");
    }
}

#[test]
fn the_config_map_role_grants_get_list_watch_on_one_named_configmap_to_the_service_account() {
    let docs = documents("deploy/kubernetes/rbac-config-map.yaml");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Role", "RoleBinding"], "nothing else");
    let role = one(&docs, "Role");
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{role}");
    let rule = &rules[0];
    assert_eq!(strings(&rule["apiGroups"]), BTreeSet::from([""]));
    assert_eq!(strings(&rule["resources"]), BTreeSet::from(["configmaps"]));
    assert_eq!(
        strings(&rule["verbs"]),
        BTreeSet::from(["get", "list", "watch"])
    );
    assert_eq!(
        strings(&rule["resourceNames"]).len(),
        1,
        "exactly one ConfigMap"
    );
    let binding = one(&docs, "RoleBinding");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["metadata"]["namespace"],
        role["metadata"]["namespace"]
    );
    let rbac = documents("deploy/kubernetes/rbac.yaml");
    let account = &one(&rbac, "ServiceAccount")["metadata"];
    let subjects = binding["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], account["name"]);
    assert_eq!(subjects[0]["namespace"], account["namespace"]);
    // The watch names the one object, as a resourceNames grant requires of a list or watch.
    let code = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kubernetes/watch/mod.rs"),
    )
    .unwrap();
    assert!(code.contains("\"metadata.name={}\""), "the fieldSelector");
}

/// The verbs of the requests the Lease writer makes (`"GET"`, `"POST"`, `"PUT"` in its code),
/// and the API path it names.
fn lease_verbs_in_the_code() -> (BTreeSet<&'static str>, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kubernetes/lease/writer.rs");
    let code = std::fs::read_to_string(path).unwrap();
    let verbs = [
        ("\"GET\"", "get"),
        ("\"POST\"", "create"),
        ("\"PUT\"", "update"),
    ]
    .into_iter()
    .filter(|(method, _)| code.contains(method))
    .map(|(_, verb)| verb)
    .collect();
    for other in ["\"PATCH\"", "\"DELETE\"", "watch="] {
        assert!(
            !code.contains(other),
            "the writer makes {other} requests: grant them too"
        );
    }
    (verbs, code)
}

#[test]
fn status_role_grants_get_create_update_on_leases_in_its_one_namespace() {
    let docs = documents("deploy/kubernetes/status-rbac.yaml");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["Namespace", "Role", "RoleBinding"],
        "a Role, never a ClusterRole"
    );
    let namespace = one(&docs, "Namespace")["metadata"]["name"]
        .as_str()
        .unwrap();
    let role = one(&docs, "Role");
    assert_eq!(role["metadata"]["namespace"], namespace);
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{role}");
    let rule = &rules[0];
    assert_eq!(
        strings(&rule["apiGroups"]),
        BTreeSet::from(["coordination.k8s.io"])
    );
    assert_eq!(strings(&rule["resources"]), BTreeSet::from(["leases"]));
    let (verbs, code) = lease_verbs_in_the_code();
    assert_eq!(verbs, BTreeSet::from(["get", "create", "update"]));
    assert_eq!(
        strings(&rule["verbs"]),
        verbs,
        "the Role against the writer's requests"
    );
    assert!(
        code.contains("/apis/coordination.k8s.io/v1/namespaces/"),
        "a namespaced Lease"
    );
    // `create` cannot be narrowed by name; a rule with resourceNames would refuse it.
    assert!(rule.get("resourceNames").is_none(), "{rule}");
    let binding = one(&docs, "RoleBinding");
    assert_eq!(binding["metadata"]["namespace"], namespace);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let rbac = documents("deploy/kubernetes/rbac.yaml");
    let account = &one(&rbac, "ServiceAccount")["metadata"];
    let subjects = binding["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], account["name"]);
    assert_eq!(subjects[0]["namespace"], account["namespace"]);
    // The DaemonSet's config names this namespace (commented out: the Lease is opt-in), and
    // loads with it.
    let daemonset = documents("deploy/kubernetes/daemonset.yaml");
    let text = one(&daemonset, "ConfigMap")["data"]["edgenetd.toml"]
        .as_str()
        .unwrap()
        .to_string();
    let line = format!("# status_namespace = \"{namespace}\"");
    assert!(text.contains(&line), "{line} in the ConfigMap");
    let enabled = text.replace(&line, &line[2..]);
    let loaded = edgenetd::config::load_str(&[("edgenetd.toml", &enabled)]);
    #[cfg(feature = "kubernetes")]
    {
        let k = loaded.unwrap_or_else(|e| panic!("{e}")).kubernetes.unwrap();
        assert_eq!(k.status_namespace.as_deref(), Some(namespace));
    }
    #[cfg(not(feature = "kubernetes"))]
    assert!(loaded.is_err());
}
