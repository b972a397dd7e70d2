//! The kubernetes wiring: settings from `[kubernetes]`, readiness, the cache, reloads.

use std::path::Path;

use super::*;
use crate::clock::FakeClock;
use crate::config::route::Route;
use crate::config::service::Service;
use crate::kubernetes::compose::ClusterState;
use crate::liveness::Liveness;
use crate::metrics::render_with;

const TOML: &str = "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\nbackends = [\"10.0.1.2:8080\"]\n\n[[route]]\nto = \"10.244.2.0/24\"\nvia = \"192.0.2.2\"\n";

/// A cluster service and a cluster route (made from TOML entries, renamed).
fn cluster_entries() -> (Service, Route) {
    let state = crate::config::load_str(&[("a.toml", TOML)]).unwrap();
    let mut svc = state.services.services[0].clone();
    svc.name = "k8s:default/web:http".into();
    svc.address = "10.96.0.20".parse().unwrap();
    (svc, state.routing.routes[0].clone())
}

fn shared(cache: &Path, cached: Option<ClusterState>) -> (Arc<Shared>, Arc<Liveness>) {
    let toml = Arc::new(crate::config::load_str(&[("a.toml", "")]).unwrap());
    let had_cache = cached.is_some();
    let (composer, first) = Composer::start(toml, cached);
    let cached = had_cache.then(|| composer.generation());
    let liveness = Liveness::new(FakeClock::new());
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            composer,
            cache: Cache::new(cache),
            cached,
            cache_failing: false,
        }),
        snapshots: Snapshots::new(first),
        kinds: vec![Kind::Services, Kind::Routes],
        heartbeat: liveness.register("kubernetes", watch::WINDOW),
        ready: AtomicBool::new(false),
        statuses: Statuses::default(),
        incomplete_reported: AtomicBool::new(false),
        in_force: None,
    });
    (shared, liveness)
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("edgenetd-k8s-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("cluster.json")
}

fn section(text: &str) -> KubernetesConfig {
    let state = crate::config::load_str(&[("a.toml", text)]).unwrap();
    state.kubernetes.unwrap()
}

#[test]
fn in_cluster_reads_the_service_account_and_the_service_address() {
    let config = section("[kubernetes]\nin_cluster = true\nnode_name = \"edge-1\"\n");
    let env = |name: &str| match name {
        "KUBERNETES_SERVICE_HOST" => Some("fd00::1".to_string()),
        "KUBERNETES_SERVICE_PORT" => Some("443".to_string()),
        _ => None,
    };
    let s = settings(&config, env).unwrap();
    assert_eq!(s.endpoint.authority(), "[fd00::1]:443");
    let token = PathBuf::from(SERVICE_ACCOUNT).join("token");
    assert_eq!(s.endpoint.auth, Auth::TokenFile(token));
    assert_eq!(s.node_name, "edge-1");
    let e = settings(&config, |_| None).unwrap_err();
    assert!(e.contains("KUBERNETES_SERVICE_HOST"), "{e}");
}

#[test]
fn credentials_resolve_in_the_credentials_directory_and_the_path_prefixes_the_api() {
    let config = section(
        "[kubernetes]\nserver = \"https://10.0.0.1:6443/k8s\"\nca_file = \"/etc/ca.pem\"\n\
         client_cert = \"credential:cert\"\nclient_key = \"credential:key\"\n",
    );
    let env = |name: &str| (name == "CREDENTIALS_DIRECTORY").then(|| "/run/creds".to_string());
    let s = settings(&config, env).unwrap();
    assert_eq!(s.path_prefix, "/k8s");
    assert_eq!(s.endpoint.ca_file, PathBuf::from("/etc/ca.pem"));
    let want = Auth::ClientCert {
        cert: PathBuf::from("/run/creds/cert"),
        key: PathBuf::from("/run/creds/key"),
    };
    assert_eq!(s.endpoint.auth, want);
    assert_eq!(
        Some(s.node_name),
        local::host_name(),
        "no node_name: the host name"
    );
    let e = settings(&config, |_| None).unwrap_err();
    assert!(e.contains("CREDENTIALS_DIRECTORY"), "{e}");
}

#[test]
fn readiness_and_the_cache_wait_for_every_enabled_kind() {
    let path = scratch("ready");
    let (shared, liveness) = shared(&path, None);
    let (svc, route) = cluster_entries();
    shared.cluster(vec![ClusterPart::services(vec![svc.clone()])]);
    assert!(!liveness.report().ready(), "routes not listed yet");
    assert!(!path.exists(), "a partial state is not cached");
    assert_eq!(shared.snapshots.current().services.services.len(), 1);
    shared.cluster(vec![ClusterPart::Routes(vec![route])]);
    assert!(liveness.report().ready());
    let cached = Cache::new(&path).read().unwrap().unwrap();
    assert_eq!((cached.services.len(), cached.routes.len()), (1, 1));
}

#[test]
fn a_loaded_cache_is_ready_at_once_and_in_the_first_snapshot() {
    let (svc, route) = cluster_entries();
    let state = ClusterState {
        services: vec![svc],
        routes: vec![route],
        ..ClusterState::default()
    };
    let (shared, liveness) = shared(&scratch("restored"), Some(state));
    assert_eq!(shared.snapshots.current().services.services.len(), 1);
    assert_eq!(shared.snapshots.current().routing.routes.len(), 1);
    shared.compose(&mut shared.inner.lock().unwrap());
    assert!(liveness.report().ready());
}

#[test]
fn a_reload_through_the_composer_keeps_the_cluster_entries() {
    let (shared, _health) = shared(&scratch("reload"), None);
    let (svc, _) = cluster_entries();
    shared.cluster(vec![ClusterPart::services(vec![svc])]);
    let toml = crate::config::load_str(&[("a.toml", TOML)]).unwrap();
    shared.take_toml(Arc::new(toml), None);
    let now = shared.snapshots.current();
    let names: Vec<&str> = now.services.services.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["web", "k8s:default/web:http"]);
    assert_eq!(now.routing.routes.len(), 1, "the TOML route");
}

#[test]
fn a_failed_cache_write_is_counted_and_not_fatal() {
    // A path under a regular file can never be created.
    let file = scratch("unwritable");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "").unwrap();
    let (shared, liveness) = shared(&file.join("cluster.json"), None);
    let (svc, route) = cluster_entries();
    let out = render_with(|| {
        shared.cluster(vec![
            ClusterPart::services(vec![svc]),
            ClusterPart::Routes(vec![route]),
        ]);
        shared.cluster(vec![ClusterPart::Routes(Vec::new())]);
    });
    let failures = out
        .lines()
        .find_map(|l| l.strip_prefix("edgenetd_kubernetes_cache_write_failures_total "))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(failures, "2");
    assert!(
        liveness.report().ready(),
        "the cluster state is in force all the same"
    );
    assert_eq!(shared.snapshots.current().routing.routes.len(), 0);
}

#[test]
fn the_lease_shows_each_loop_by_the_registrys_verdict() {
    use crate::kubernetes::lease::annotations::LoopState;
    use std::time::Duration;
    let clock = FakeClock::new();
    let liveness = Liveness::new(clock.clone());
    let ok = liveness.register("policy", Duration::from_secs(10));
    ok.source_ready();
    let failing = liveness.register("service", Duration::from_secs(10));
    failing.source_incomplete("not listed yet".into());
    let _starting = liveness.register("route", Duration::from_secs(60));
    let probe = loops_probe(liveness.clone());
    let (live, loops) = probe();
    assert!(live);
    let states: Vec<(&str, LoopState)> = loops.iter().map(|l| (&*l.name, l.state)).collect();
    assert_eq!(
        states,
        [
            ("policy", LoopState::Ready),
            ("service", LoopState::Failing),
            ("route", LoopState::Starting)
        ]
    );
    assert_eq!(loops[1].error.as_deref(), Some("not listed yet"));
    clock.advance(Duration::from_secs(11));
    ok.beat();
    let (live, loops) = probe();
    assert!(!live, "the service loop's window passed");
    assert_eq!(loops[1].state, LoopState::Stalled);
    assert_eq!(loops[0].state, LoopState::Ready);
}
