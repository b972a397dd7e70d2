//! The kubernetes wiring: settings from `[kubernetes]`, readiness, the cache, reloads.

use std::path::Path;
use std::time::SystemTime;

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
    let mut svc = Service::clone(&state.services.services[0]);
    svc.name = "k8s:default/web:http".into();
    svc.address = "10.96.0.20".parse().unwrap();
    (svc, state.routing.routes[0].clone())
}

fn shared(cache: &Path, cached: Option<ClusterState>) -> (Arc<Shared>, Arc<Liveness>) {
    shared_stamped(cache, cached.map(|c| (c, None)))
}

/// [`shared`] with a cache loaded with its stamp.
fn shared_stamped(
    cache: &Path,
    cached: Option<(ClusterState, Option<SystemTime>)>,
) -> (Arc<Shared>, Arc<Liveness>) {
    let toml = Arc::new(crate::config::load_str(&[("a.toml", "")]).unwrap());
    let stamp = cached.as_ref().map(|(_, s)| *s);
    let (composer, first) = Composer::start(toml, cached.map(|(c, _)| c));
    let cached = stamp.is_some().then(|| composer.generation());
    let liveness = Liveness::new(FakeClock::new());
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            composer,
            cache: Cache::new(cache),
            cached,
            cache_failing: false,
            cache_tried: None,
            written: stamp.flatten(),
        }),
        snapshots: Snapshots::new(first),
        kinds: vec![Kind::Services, Kind::Routes],
        heartbeat: liveness.register("kubernetes", watch::WINDOW),
        ready: AtomicBool::new(false),
        statuses: Statuses::default(),
        incomplete_reported: AtomicBool::new(false),
        freshness: Arc::new(Mutex::new(Freshness::start(stamp))),
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
    let tls = Transport::Tls {
        ca_file: PathBuf::from("/etc/ca.pem"),
    };
    assert_eq!(s.endpoint.transport, tls);
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
fn a_local_proxy_is_a_plain_endpoint_with_a_token_or_none() {
    let config =
        section("[kubernetes]\nserver = \"http://127.0.0.1:10550\"\nnode_name = \"edge-1\"\n");
    let s = settings(&config, |_| None).unwrap();
    assert_eq!(s.endpoint.transport, Transport::Plain);
    assert_eq!(s.endpoint.auth, Auth::None);
    assert_eq!(s.endpoint.authority(), "127.0.0.1:10550");
    let config = section(
        "[kubernetes]\nserver = \"http://localhost:10261\"\ntoken_file = \"credential:tok\"\nnode_name = \"edge-1\"\n",
    );
    let env = |name: &str| (name == "CREDENTIALS_DIRECTORY").then(|| "/run/creds".to_string());
    let s = settings(&config, env).unwrap();
    assert_eq!(
        s.endpoint.auth,
        Auth::TokenFile(PathBuf::from("/run/creds/tok"))
    );
    assert_eq!(s.endpoint.transport, Transport::Plain);
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

/// Issue 24: the 2 MB file of a 5,000-Service cluster was written after every endpoint
/// change, on the watcher's thread, while the change was on its way to the kernel.
#[test]
fn the_cache_is_written_when_complete_then_at_most_every_cache_every_and_at_a_stop() {
    let path = scratch("paced");
    let (shared, _liveness) = shared(&path, None);
    let (svc, route) = cluster_entries();
    shared.cluster(vec![
        ClusterPart::services(vec![svc]),
        ClusterPart::Routes(vec![route]),
    ]);
    let routes = || Cache::new(&path).read().unwrap().unwrap().routes.len();
    assert_eq!(routes(), 1, "the first complete state is written at once");
    shared.cluster(vec![ClusterPart::Routes(Vec::new())]);
    assert_eq!(
        shared.snapshots.current().routing.routes.len(),
        0,
        "the change is in force"
    );
    assert_eq!(routes(), 1, "its write waits for CACHE_EVERY");
    // The watcher's tick after the interval writes it (here: the interval made to have passed).
    shared.inner.lock().unwrap().cache_tried = Some(Instant::now() - CACHE_EVERY);
    shared.cluster(Vec::new());
    assert_eq!(
        routes(),
        0,
        "written at the first compose after the interval"
    );
    shared.cluster(vec![ClusterPart::Routes(vec![cluster_entries().1])]);
    assert_eq!(routes(), 0);
    shared.stopping();
    assert_eq!(routes(), 1, "a clean stop writes what was put off");
}

#[test]
fn a_loaded_cache_is_ready_at_once_and_in_the_first_snapshot() {
    let (svc, route) = cluster_entries();
    let state = ClusterState {
        services: vec![svc.into()],
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
        // The second change's write is put off (CACHE_EVERY), then tried at the stop.
        shared.stopping();
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

/// The freshness /healthz shows: `state`, `asOf`, `ageSeconds`.
fn freshness_healthz(shared: &Shared) -> serde_json::Value {
    let f = shared.freshness.lock().unwrap();
    state_healthz(&f, SystemTime::now())
}

#[test]
fn a_restored_cache_is_in_force_as_of_its_stamp_then_listing_makes_it_current_and_stamped() {
    let path = scratch("stamped");
    let (svc, route) = cluster_entries();
    let state = ClusterState {
        services: vec![svc.clone().into()],
        routes: vec![route.clone()],
        ..ClusterState::default()
    };
    let stamp = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let (shared, _liveness) = shared_stamped(&path, Some((state, Some(stamp))));
    shared.compose(&mut shared.inner.lock().unwrap());
    let v = freshness_healthz(&shared);
    assert_eq!(v["state"], "cached", "{v}");
    assert_eq!(v["asOf"], "2023-11-14T22:13:20.000Z", "{v}");
    assert!(v["ageSeconds"].as_u64().unwrap() > 3600, "{v}");
    assert!(!path.exists(), "nothing new to write");
    // One kind listed: still the cache's for the other, and written with the cache's stamp.
    shared.cluster(vec![ClusterPart::services(Vec::new())]);
    assert_eq!(freshness_healthz(&shared)["state"], "cached");
    let on_disk = Cache::new(&path).read_stamped().unwrap().unwrap();
    assert_eq!(
        on_disk.as_of,
        Some(stamp),
        "the unlisted routes are that old"
    );
    // Both listed (and, with no kind watched here, every watch live): current, stamped now
    // (at the first compose CACHE_EVERY after the last write: made to have passed).
    let before = SystemTime::now() - std::time::Duration::from_secs(1);
    shared.inner.lock().unwrap().cache_tried = Some(Instant::now() - CACHE_EVERY);
    shared.cluster(vec![ClusterPart::Routes(vec![route])]);
    let v = freshness_healthz(&shared);
    assert_eq!(v["state"], "current", "{v}");
    assert!(v["ageSeconds"].as_u64().unwrap() < 5, "{v}");
    let on_disk = Cache::new(&path).read_stamped().unwrap().unwrap();
    assert!(on_disk.as_of.unwrap() >= before, "{on_disk:?}");
}

#[test]
fn without_a_cache_nothing_is_claimed_until_every_kind_is_listed() {
    let (shared, _liveness) = shared(&scratch("unclaimed"), None);
    let (svc, _) = cluster_entries();
    shared.cluster(vec![ClusterPart::services(vec![svc])]);
    let v = freshness_healthz(&shared);
    assert_eq!(
        (&v["state"], &v["asOf"]),
        (&"listing".into(), &serde_json::Value::Null),
        "{v}"
    );
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

/// The cache's pacing as docs/kubernetes.md states it, read from the constant the daemon runs.
#[test]
fn the_docs_state_the_cache_pacing() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kubernetes.md"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let want = format!(
        "then at most every {} s while it changes",
        CACHE_EVERY.as_secs()
    );
    assert!(
        docs.contains(&want),
        "docs/kubernetes.md does not say {want:?}"
    );
}
