//! The list+watch client against the fake API server (TLS on 127.0.0.1): paging, streamed
//! lists and their fallback to pages, events, resuming without a relist, 410 Gone,
//! Retry-After, hung connections, chunk-split lines, credentials.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::fake_apiserver::{FakeApiServer, Fault, On, Request, StreamedLists};
use common::wait::wait_until;
use edgenetd::kubernetes::client::json::{self, Decode, Reader};
use edgenetd::kubernetes::client::{
    Auth, Endpoint, HasMeta, ObjectMeta, Reflector, ReflectorConfig, Store,
};
use edgenetd::sync::{NoProgress, Progress, TriggerRx, trigger};
use serde_json::{Value, json};

/// A test-only object: metadata and an opaque spec.
#[derive(Debug, Clone)]
struct Obj {
    /// The metadata.
    metadata: ObjectMeta,
    /// The spec, as sent.
    spec: Value,
}

impl Decode for Obj {
    fn decode(r: &mut Reader<'_>) -> json::Result<Obj> {
        let mut o = Obj {
            metadata: ObjectMeta::default(),
            spec: Value::Null,
        };
        r.object(&mut |r, key| {
            match key {
                "metadata" => o.metadata = ObjectMeta::decode(r)?,
                "spec" => o.spec = serde_json::from_slice(r.raw()?).map_err(|e| e.to_string())?,
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(o)
    }
}

impl HasMeta for Obj {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// How long any wait in these tests may take.
const WAIT: Duration = Duration::from_secs(10);

/// Counts heartbeats.
#[derive(Default)]
struct Beats(AtomicUsize);

impl Progress for Beats {
    fn beat(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running reflector on its own thread; stopped and joined on drop.
struct Running {
    /// The heartbeats it gave.
    beats: Arc<Beats>,
    /// Its store.
    store: Store<Obj>,
    /// Its change notifications.
    changed: TriggerRx,
    /// Ends `run`.
    stop: Option<async_channel::Sender<()>>,
    /// The thread.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Test bounds: quick back-off, small pages, lists in pages (the streamed lists have their
/// own tests, at the end).
fn config() -> ReflectorConfig {
    let mut c = ReflectorConfig::new("/api/v1/services");
    c.streaming = false;
    c.page_size = 2;
    c.watch_timeout = Duration::from_secs(60);
    c.idle_timeout = Duration::from_secs(5);
    c.backoff_initial = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(300);
    c
}

/// Starts a reflector on `fake` with `auth`.
fn run_with(fake: &FakeApiServer, config: ReflectorConfig, auth: Auth) -> Running {
    let endpoint = Endpoint::from_url(&fake.url(), fake.client_ca().as_deref(), auth).unwrap();
    let (tx, rx) = trigger();
    let mut reflector = Reflector::<Obj>::new(endpoint, config, tx);
    let store = reflector.store();
    let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
    let beats = Arc::new(Beats::default());
    let progress = beats.clone();
    let thread = std::thread::spawn(move || {
        smol::block_on(reflector.run(&*progress, async {
            let _ = stop_rx.recv().await;
        }))
    });
    Running {
        beats,
        store,
        changed: rx,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

/// Starts a reflector without credentials.
fn run(fake: &FakeApiServer, config: ReflectorConfig) -> Running {
    run_with(fake, config, Auth::None)
}

/// A Service-like object.
fn svc(ns: &str, name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": name}},
        "spec": {"ports": [{"port": port}]},
    })
}

/// The names in the store.
fn names(store: &Store<Obj>) -> BTreeSet<String> {
    store
        .snapshot()
        .keys()
        .map(|(ns, n)| format!("{ns}/{n}"))
        .collect()
}

/// The list requests (not watches).
fn lists(fake: &FakeApiServer) -> Vec<Request> {
    fake.requests()
        .into_iter()
        .filter(|r| !r.is_watch())
        .collect()
}

/// The watch requests.
fn watches(fake: &FakeApiServer) -> Vec<Request> {
    fake.requests()
        .into_iter()
        .filter(|r| r.is_watch())
        .collect()
}

/// Waits until a watch request numbered `n` (from 1) was answered 200.
fn wait_watch(fake: &FakeApiServer, n: usize) {
    wait_until(&format!("watch #{n} open"), WAIT, || {
        watches(fake).iter().filter(|r| r.code == 200).count() >= n
    });
}

#[test]
fn paged_list_assembles_every_object_then_watches_from_its_version() {
    let fake = FakeApiServer::start();
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    fake.apply(
        "endpointslices",
        json!({"metadata": {"namespace": "default", "name": "x"}}),
    );
    let r = run(&fake, config());
    wait_until("synced", WAIT, || r.store.is_synced());
    assert_eq!(r.store.snapshot().len(), 5);
    assert!(r.changed.take_pending(), "the list fired the trigger");
    let pages = lists(&fake);
    assert_eq!(pages.len(), 3, "5 objects in pages of 2: {pages:?}");
    assert!(pages.iter().all(|p| p.query["limit"] == "2"));
    assert!(!pages[0].query.contains_key("continue"));
    assert!(pages[1].query.contains_key("continue") && pages[2].query.contains_key("continue"));
    wait_watch(&fake, 1);
    let w = &watches(&fake)[0];
    assert_eq!(w.query["resourceVersion"], "6", "the list's version");
    assert_eq!(w.query["allowWatchBookmarks"], "true");
    assert_eq!(w.query["timeoutSeconds"], "60");
    assert_eq!(r.store.status().resource_version, "6");
}

#[test]
fn watch_applies_added_modified_and_deleted() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("a", "one", 80));
    let r = run(&fake, config());
    wait_until("synced", WAIT, || r.store.is_synced());
    wait_watch(&fake, 1);
    r.changed.take_pending();
    fake.apply("services", svc("b", "two", 81));
    wait_until("ADDED applied", WAIT, || r.store.get("b", "two").is_some());
    assert!(r.changed.take_pending(), "the event fired the trigger");
    fake.apply("services", svc("b", "two", 82));
    wait_until("MODIFIED applied", WAIT, || {
        r.store
            .get("b", "two")
            .is_some_and(|o| o.spec["ports"][0]["port"] == 82)
    });
    fake.delete("services", "a", "one");
    wait_until("DELETED applied", WAIT, || {
        r.store.get("a", "one").is_none()
    });
    assert_eq!(names(&r.store), BTreeSet::from(["b/two".to_string()]));
    assert_eq!(
        r.store.status().resource_version,
        fake.resource_version().to_string()
    );
    assert_eq!(r.store.status().events, 3);
    assert_eq!(lists(&fake).len(), 1);
}

#[test]
fn dropped_watch_resumes_from_the_last_resource_version_without_a_relist() {
    let fake = FakeApiServer::start();
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    let last = fake.apply("services", svc("a", "one", 80));
    wait_until("event applied", WAIT, || r.store.get("a", "one").is_some());
    fake.drop_connections();
    // Written while the client is away: the resumed watch replays it from the history.
    fake.apply("services", svc("a", "two", 80));
    wait_until("missed event replayed", WAIT, || {
        r.store.get("a", "two").is_some()
    });
    let w = watches(&fake);
    assert!(w.len() >= 2, "{w:?}");
    assert_eq!(w[1].query["resourceVersion"], last.to_string());
    assert_eq!(lists(&fake).len(), 1, "no relist");
}

#[test]
fn server_timeout_ends_the_watch_and_it_resumes_without_a_relist() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("a", "one", 80));
    let mut c = config();
    c.watch_timeout = Duration::from_secs(1);
    let r = run(&fake, c);
    wait_watch(&fake, 3);
    assert_eq!(lists(&fake).len(), 1, "no relist");
    assert!(
        watches(&fake)
            .iter()
            .all(|w| w.query["timeoutSeconds"] == "1")
    );
    assert!(r.store.is_synced());
}

#[test]
fn bookmarks_move_the_resume_version() {
    let fake = FakeApiServer::start();
    fake.set_bookmarks(Some(Duration::from_millis(50)));
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    // Writes to another resource move the global version; only a bookmark tells the watch.
    let rv = fake.apply(
        "endpointslices",
        json!({"metadata": {"namespace": "a", "name": "e"}}),
    );
    wait_until("bookmark seen", WAIT, || {
        r.store.status().resource_version == rv.to_string()
    });
    fake.drop_connections();
    wait_watch(&fake, 2);
    assert_eq!(watches(&fake)[1].query["resourceVersion"], rv.to_string());
    assert_eq!(r.store.status().events, 0, "bookmarks are not events");
}

/// Watches the store from another thread and counts every time it held fewer than `floor`
/// objects: a relist that cleared the store before refilling it would show up here.
fn watch_for_gaps(store: Store<Obj>, floor: usize) -> (Arc<AtomicBool>, Arc<AtomicUsize>) {
    let (done, gaps) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (d, g) = (done.clone(), gaps.clone());
    std::thread::spawn(move || {
        while !d.load(Ordering::Relaxed) {
            if store.snapshot().len() < floor {
                g.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    (done, gaps)
}

/// Makes the client's version too old while it is away, then lets it come back: it must
/// relist (slowly: the second page waits), keep the old store until the relist is complete,
/// then hold the new state.
fn relist_after_gone(gone_as_http: bool) {
    let mut fake = FakeApiServer::start();
    fake.set_gone_as_http(gone_as_http);
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    assert_eq!(r.store.snapshot().len(), 5);
    let (done, gaps) = watch_for_gaps(r.store.clone(), 5);

    fake.stop();
    fake.apply("services", svc("default", "s0", 8080));
    fake.apply("services", svc("default", "s5", 80));
    fake.compact();
    fake.inject(On::List, Fault::Delay(Duration::ZERO));
    fake.inject(On::List, Fault::Delay(Duration::from_millis(500)));
    fake.restart();

    wait_until("relisted", WAIT, || r.store.status().lists == 2);
    done.store(true, Ordering::Relaxed);
    assert_eq!(
        gaps.load(Ordering::Relaxed),
        0,
        "the store lost objects during the relist"
    );
    assert_eq!(r.store.snapshot().len(), 6);
    assert_eq!(
        r.store.get("default", "s0").unwrap().spec["ports"][0]["port"],
        8080
    );
    assert_eq!(r.store.status().relists_gone, 1);
    let gone = fake.requests().into_iter().find(|q| {
        q.is_watch() && q.code != 200 || {
            q.is_watch() && !gone_as_http && q.query["resourceVersion"] == "5"
        }
    });
    assert!(gone.is_some(), "a watch from the old version was refused");
    assert_eq!(
        lists(&fake).len(),
        3 + 3,
        "two complete lists of three pages"
    );
    wait_watch(&fake, 2 + usize::from(!gone_as_http));
    let last = watches(&fake).pop().unwrap();
    assert_eq!(
        last.query["resourceVersion"], "7",
        "the watch resumes from the relist"
    );
}

#[test]
fn gone_as_an_error_event_relists_and_swaps_the_store_when_complete() {
    relist_after_gone(false);
}

#[test]
fn gone_as_http_410_relists_and_swaps_the_store_when_complete() {
    relist_after_gone(true);
}

#[test]
fn injected_gone_event_in_a_live_watch_relists() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("a", "one", 80));
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    fake.inject(On::Watch, Fault::WatchGoneEvent);
    fake.drop_connections();
    wait_until("relisted", WAIT, || r.store.status().lists == 2);
    assert_eq!(lists(&fake).len(), 2);
    assert!(r.store.get("a", "one").is_some());
}

#[test]
fn retry_after_on_429_and_504_is_waited_for() {
    let fake = FakeApiServer::start();
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    fake.inject(
        On::Watch,
        Fault::Status {
            code: 429,
            retry_after: Some(1),
        },
    );
    fake.inject(
        On::Watch,
        Fault::Status {
            code: 504,
            retry_after: Some(1),
        },
    );
    fake.drop_connections();
    wait_watch(&fake, 2);
    let w = watches(&fake);
    let codes: Vec<u16> = w.iter().map(|q| q.code).collect();
    assert_eq!(&codes[..4], &[200, 429, 504, 200]);
    for pair in w[1..4].windows(2) {
        let gap = pair[1].at - pair[0].at;
        // The back-off is at most 300 ms here: a gap of a second is the server's Retry-After.
        assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    }
    assert_eq!(lists(&fake).len(), 1);
    assert!(r.store.is_synced());
}

#[test]
fn other_errors_back_off_and_are_reported() {
    let fake = FakeApiServer::start();
    fake.inject(
        On::List,
        Fault::Status {
            code: 500,
            retry_after: None,
        },
    );
    fake.inject(
        On::List,
        Fault::Status {
            code: 500,
            retry_after: None,
        },
    );
    let r = run(&fake, config());
    wait_until("synced after two failures", WAIT, || r.store.is_synced());
    let l = lists(&fake);
    assert_eq!(
        l.iter().map(|q| q.code).collect::<Vec<_>>(),
        [500, 500, 200]
    );
    // The second wait is at least twice the first back-off (20 ms, doubled).
    assert!(l[2].at - l[1].at >= Duration::from_millis(40));
}

#[test]
fn hung_connection_is_detected_and_reopened() {
    let fake = FakeApiServer::start();
    let mut c = config();
    c.idle_timeout = Duration::from_millis(400);
    let r = run(&fake, c);
    wait_watch(&fake, 1);
    let first_rv = watches(&fake)[0].query["resourceVersion"].clone();
    fake.inject(On::Watch, Fault::HangAfterHead);
    fake.inject(On::Watch, Fault::Hang);
    let started = Instant::now();
    fake.drop_connections();
    // Silent after its head, then silent before it: both are given up and reopened.
    wait_until("a third watch answered", WAIT, || watches(&fake).len() >= 4);
    assert!(started.elapsed() >= Duration::from_millis(800));
    fake.apply("services", svc("a", "late", 80));
    wait_until("events flow again", WAIT, || {
        r.store.get("a", "late").is_some()
    });
    assert!(
        watches(&fake)
            .iter()
            .all(|w| w.query["resourceVersion"] == first_rv)
    );
    assert_eq!(lists(&fake).len(), 1, "no relist");
}

#[test]
fn events_split_across_chunks_parse() {
    let fake = FakeApiServer::start();
    fake.set_chunk_size(7);
    fake.set_bookmarks(Some(Duration::from_millis(30)));
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    for i in 0..20 {
        fake.apply("services", svc("ns", &format!("split-{i}"), 1000 + i));
    }
    wait_until("every event applied", WAIT, || {
        r.store.snapshot().len() == 20
    });
    assert_eq!(
        r.store.get("ns", "split-19").unwrap().spec["ports"][0]["port"],
        1019
    );
    assert_eq!(watches(&fake).len(), 1, "one stream carried them all");
}

#[test]
fn label_selector_filters_lists_and_watches() {
    let fake = FakeApiServer::start();
    let labelled = |name: &str, app: &str, tier: &str| {
        let mut o = svc("a", name, 80);
        o["metadata"]["labels"] = json!({"app": app, "tier": tier});
        o
    };
    fake.apply("services", labelled("web", "web", "front"));
    fake.apply("services", labelled("api", "api", "front"));
    fake.apply("services", labelled("db", "api", "db"));
    fake.apply("services", labelled("other", "other", "front"));
    let mut c = config();
    c.label_selector = Some("app in (web,api),tier!=db".to_string());
    let r = run(&fake, c);
    wait_until("synced", WAIT, || r.store.is_synced());
    assert_eq!(
        names(&r.store),
        BTreeSet::from(["a/api".to_string(), "a/web".to_string()])
    );
    wait_watch(&fake, 1);
    // Stops matching: the watch reports it deleted.
    fake.apply("services", labelled("web", "web", "db"));
    wait_until("unmatched object removed", WAIT, || {
        r.store.get("a", "web").is_none()
    });
    fake.apply("services", labelled("other", "web", "front"));
    wait_until("newly matching object added", WAIT, || {
        r.store.get("a", "other").is_some()
    });
    assert!(
        fake.requests()
            .iter()
            .all(|q| q.query["labelSelector"] == "app in (web,api),tier!=db")
    );
}

#[test]
fn token_is_read_again_at_each_connect() {
    let fake = FakeApiServer::start();
    let token = fake.path("token");
    std::fs::write(&token, "first\n").unwrap();
    fake.require_token("first");
    let r = run_with(&fake, config(), Auth::TokenFile(token.clone()));
    wait_watch(&fake, 1);
    // The token rotates: the server wants the new one, the file holds it.
    fake.require_token("second");
    std::fs::write(&token, "second").unwrap();
    fake.drop_connections();
    wait_watch(&fake, 2);
    let w = watches(&fake);
    assert_eq!(
        w.last().unwrap().authorization.as_deref(),
        Some("Bearer second")
    );
    assert!(r.store.is_synced());
}

#[test]
fn unauthorized_is_retried_and_reported() {
    let fake = FakeApiServer::start();
    fake.require_token("right");
    let token = fake.path("token");
    std::fs::write(&token, "wrong").unwrap();
    let r = run_with(&fake, config(), Auth::TokenFile(token.clone()));
    wait_until("401 reported", WAIT, || {
        r.store
            .status()
            .last_error
            .is_some_and(|e| e.contains("401"))
    });
    assert!(!r.store.is_synced());
    std::fs::write(&token, "right").unwrap();
    wait_until("synced with the right token", WAIT, || r.store.is_synced());
}

#[test]
fn client_certificate_authenticates() {
    let fake = FakeApiServer::start();
    fake.require_token("nobody-has-this");
    fake.apply("services", svc("a", "one", 80));
    let (cert, key) = fake.client_cert_files();
    let r = run_with(&fake, config(), Auth::ClientCert { cert, key });
    wait_until("synced", WAIT, || r.store.is_synced());
    assert!(r.store.get("a", "one").is_some());
    assert!(fake.requests().iter().all(|q| q.authorization.is_none()));
}

/// A node-local proxy (KubeEdge's MetaServer, OpenYurt's YurtHub) serves the API over plain
/// HTTP on loopback: the same list, watch, resume and chunk handling as over TLS, and no
/// credentials needed (the proxy authenticates upstream).
#[test]
fn over_plain_http_on_loopback_a_paged_list_watches_and_resumes_after_a_drop() {
    let fake = FakeApiServer::start_plain();
    assert!(
        fake.url().starts_with("http://127.0.0.1:"),
        "{}",
        fake.url()
    );
    fake.set_chunk_size(7);
    for i in 0..3 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run_with(&fake, config(), Auth::None);
    wait_until("synced", WAIT, || r.store.is_synced());
    assert_eq!(names(&r.store).len(), 3);
    assert_eq!(lists(&fake).len(), 2, "3 objects in pages of 2");
    wait_watch(&fake, 1);
    let last = fake.apply("services", svc("default", "s3", 81));
    wait_until("ADDED over plain HTTP", WAIT, || {
        r.store.get("default", "s3").is_some()
    });
    fake.drop_connections();
    fake.delete("services", "default", "s0");
    wait_until("missed DELETED replayed", WAIT, || {
        r.store.get("default", "s0").is_none()
    });
    let w = watches(&fake);
    assert!(w.len() >= 2, "{w:?}");
    assert_eq!(w[1].query["resourceVersion"], last.to_string());
    assert_eq!(lists(&fake).len(), 2, "resumed, no relist");
    assert!(fake.requests().iter().all(|q| q.authorization.is_none()));
}

/// YurtHub passes a bearer token upstream: over plain HTTP the token file is read and sent
/// as over TLS; a streamed list works there too.
#[test]
fn over_plain_http_a_token_is_sent_and_a_streamed_list_goes_on_as_the_watch() {
    let fake = FakeApiServer::start_plain();
    fake.require_token("edge-token");
    fake.apply("services", svc("a", "one", 80));
    let token = fake.path("token");
    std::fs::write(&token, "edge-token\n").unwrap();
    let r = run_with(&fake, streaming_config(), Auth::TokenFile(token));
    wait_until("listed", WAIT, || r.store.is_synced());
    fake.apply("services", svc("a", "two", 80));
    wait_until("watched", WAIT, || r.store.get("a", "two").is_some());
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer edge-token")
    );
    assert_eq!(r.store.status().lists_streamed, 1);
}

#[test]
fn server_with_an_unknown_ca_is_refused() {
    let fake = FakeApiServer::start();
    let other = FakeApiServer::start();
    let endpoint = Endpoint::from_url(&fake.url(), Some(&other.ca_file()), Auth::None).unwrap();
    let (tx, _rx) = trigger();
    let mut reflector = Reflector::<Obj>::new(endpoint, config(), tx);
    let store = reflector.store();
    smol::block_on(reflector.step(&NoProgress));
    assert!(!store.is_synced());
    let err = store.status().last_error.unwrap();
    assert!(err.contains("certificate"), "{err}");
    assert!(fake.requests().is_empty());
}

#[test]
fn expired_continue_token_restarts_the_list_from_the_first_page() {
    let fake = FakeApiServer::start();
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    // The second page is refused as the API server refuses an expired continue token.
    fake.inject(On::List, Fault::Delay(Duration::ZERO));
    fake.inject(
        On::List,
        Fault::Status {
            code: 410,
            retry_after: None,
        },
    );
    let r = run(&fake, config());
    wait_until("synced", WAIT, || r.store.is_synced());
    assert_eq!(r.store.snapshot().len(), 5);
    let codes: Vec<u16> = lists(&fake).iter().map(|q| q.code).collect();
    assert_eq!(codes, [200, 410, 200, 200, 200]);
    let l = lists(&fake);
    assert!(
        !l[2].query.contains_key("continue"),
        "restarted from the first page"
    );
}

#[test]
fn oversized_list_page_is_refused() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("default", "s", 80));
    let mut c = config();
    c.max_page_bytes = 100;
    let r = run(&fake, c);
    wait_until("page refused", WAIT, || {
        r.store
            .status()
            .last_error
            .is_some_and(|e| e.contains("list page longer than 100 bytes"))
    });
    assert!(!r.store.is_synced());
}

/// A watch line over the page cap (the most read at all) still fails the watch, unread.
#[test]
fn oversized_watch_line_is_refused_and_the_store_keeps_its_state() {
    let fake = FakeApiServer::start();
    fake.set_chunk_size(64);
    fake.apply("services", svc("default", "small", 80));
    let mut c = config();
    c.max_line_bytes = 512;
    c.max_page_bytes = 1024;
    let r = run(&fake, c);
    wait_watch(&fake, 1);
    let mut big = svc("default", "big", 80);
    big["metadata"]["labels"]["filler"] = Value::String("x".repeat(4096));
    fake.apply("services", big);
    wait_until("line refused", WAIT, || {
        r.store
            .status()
            .last_error
            .is_some_and(|e| e.contains("watch line longer than 1024 bytes"))
    });
    assert!(r.store.get("default", "big").is_none());
    assert!(r.store.get("default", "small").is_some());
}

#[test]
fn fake_api_server_is_honest_for_the_official_python_client() {
    let fake = FakeApiServer::start();
    fake.require_token("tok");
    fake.set_chunk_size(5);
    fake.set_bookmarks(Some(Duration::from_millis(100)));
    let edge = |name: &str, tier: &str, port: u16| {
        let mut o = svc("default", name, port);
        o["metadata"]["labels"] = json!({"app": name, "tier": tier});
        o
    };
    for i in 0..5 {
        fake.apply("services", edge(&format!("s{i}"), "edge", 80));
    }
    fake.apply("services", edge("x", "core", 80));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common/scripts/k8s_python_client.py");
    let child = std::process::Command::new("/usr/bin/python3")
        .arg(&script)
        .args([&fake.url(), fake.ca_file().to_str().unwrap(), "tok"])
        .args(["tier=edge,app notin (s4)", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (scripts/install-deps.sh --test installs python3-kubernetes)");
    let open = common::wait::poll_for(WAIT, || {
        watches(&fake).iter().any(|w| w.code == 200).then_some(())
    });
    if open.is_none() {
        let mut child = child;
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "the Python client never watched: {:?}\n{}\n{}",
            fake.requests(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fake.apply("services", edge("late", "edge", 80));
    fake.apply("services", edge("s0", "edge", 81));
    fake.delete("services", "default", "s1");
    fake.apply("services", edge("s2", "core", 80));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python client failed: {stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0]["list"],
        json!(["default/s0", "default/s1", "default/s2", "default/s3"]),
        "{stderr}"
    );
    assert_eq!(lines[0]["pages"], 2);
    let events: Vec<(String, String)> = lines[1..]
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().into(),
                e["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = [
        ("ADDED", "late"),
        ("MODIFIED", "s0"),
        ("DELETED", "s1"),
        ("DELETED", "s2"),
    ];
    assert_eq!(events, expect.map(|(t, n)| (t.to_string(), n.to_string())));
    assert_eq!(lines[2]["port"], 81);
    let w = watches(&fake);
    assert_eq!(
        w[0].query["resourceVersion"],
        lines[0]["rv"].as_str().unwrap()
    );
    assert!(
        fake.requests()
            .iter()
            .all(|q| q.authorization.as_deref() == Some("Bearer tok"))
    );
}

#[test]
fn watches_that_end_at_once_are_backed_off() {
    let fake = FakeApiServer::start();
    let mut c = config();
    c.backoff_initial = Duration::from_millis(100);
    c.backoff_max = Duration::from_secs(5);
    // timeoutSeconds=1 and a server that ends the watch at once: the client must not loop.
    let r = run(&fake, c);
    wait_watch(&fake, 1);
    for _ in 0..3 {
        fake.inject(On::Watch, Fault::EmptyWatch);
    }
    fake.drop_connections();
    wait_until("three empty watches and a real one", WAIT, || {
        watches(&fake).len() >= 5
    });
    let w = watches(&fake);
    let gaps: Vec<Duration> = w[1..5].windows(2).map(|p| p[1].at - p[0].at).collect();
    assert!(
        gaps[1] >= Duration::from_millis(200),
        "no back-off: {gaps:?}"
    );
    assert!(r.store.is_synced());
}

#[test]
fn api_server_restart_resumes_the_watch_without_a_relist() {
    let mut fake = FakeApiServer::start();
    fake.apply("services", svc("a", "one", 80));
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    let listed_at = watches(&fake)[0].query["resourceVersion"].clone();
    fake.stop();
    // Written while the server is down (kept, as etcd keeps it) and still in its history.
    fake.apply("services", svc("a", "two", 80));
    wait_until("the client saw the outage", WAIT, || {
        r.store.status().last_error.is_some()
    });
    assert!(
        r.store.get("a", "one").is_some(),
        "an outage keeps the store"
    );
    fake.restart();
    wait_until("missed change delivered", WAIT, || {
        r.store.get("a", "two").is_some()
    });
    let w: Vec<Request> = watches(&fake)
        .into_iter()
        .filter(|q| q.code == 200)
        .collect();
    assert_eq!(w[1].query["resourceVersion"], listed_at);
    assert_eq!(lists(&fake).len(), 1, "no relist");
    assert!(r.store.is_synced());
}

#[test]
fn every_page_and_event_line_beats() {
    let fake = FakeApiServer::start();
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run(&fake, config());
    wait_watch(&fake, 1);
    // One beat at the step's start and one per page (three pages).
    wait_until("list beats", WAIT, || {
        r.beats.0.load(Ordering::Relaxed) >= 4
    });
    let before = r.beats.0.load(Ordering::Relaxed);
    for i in 0..10 {
        fake.apply("services", svc("default", &format!("e{i}"), 80));
    }
    wait_until("events applied", WAIT, || r.store.snapshot().len() == 15);
    let after = r.beats.0.load(Ordering::Relaxed);
    assert!(
        after >= before + 10,
        "{before} -> {after} beats for 10 event lines"
    );
}

/// A resource the server may not serve (`absent_ok`): 404 and 403 are an empty complete list,
/// listed again after `absent_recheck` (not backed off and retried), and a list that comes
/// back after that fills the store.
#[test]
fn an_absent_resource_is_an_empty_list_rechecked_later() {
    for code in [404, 403] {
        let fake = FakeApiServer::start();
        fake.apply("services", svc("a", "web", 80));
        fake.inject(
            On::List,
            Fault::Status {
                code,
                retry_after: None,
            },
        );
        let mut c = config();
        c.absent_ok = true;
        c.absent_recheck = Duration::from_secs(2);
        let r = run(&fake, c);
        wait_until(&format!("{code}: synced empty"), WAIT, || {
            r.store.is_synced()
        });
        assert!(names(&r.store).is_empty(), "{code}: {:?}", names(&r.store));
        let status = r.store.status();
        assert!(
            status.absent && status.last_error.is_none(),
            "{code}: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(lists(&fake).len(), 1, "{code}: no retry before the recheck");
        wait_until(&format!("{code}: the recheck lists it"), WAIT, || {
            names(&r.store) == BTreeSet::from(["a/web".to_string()])
        });
        assert!(!r.store.status().absent);
    }
}

/// The bug: an API server whose history keeps answering 410 got 64-98 lists and watches per
/// second per kind, because a successful list reset the back-off and a 410 relisted at once.
/// Now every relist waits the back-off, which keeps growing while the storm lasts.
#[test]
fn a_410_relist_storm_is_backed_off() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("a", "one", 80));
    for _ in 0..200 {
        fake.inject(On::Watch, Fault::WatchGoneEvent);
    }
    let mut c = config();
    c.backoff_initial = Duration::from_millis(100);
    c.backoff_max = Duration::from_secs(5);
    let r = run(&fake, c);
    wait_until("synced", WAIT, || r.store.is_synced());
    std::thread::sleep(Duration::from_millis(2000));
    let l = lists(&fake);
    // 100 ms, 200 ms, 400 ms, 800 ms (+ up to half as jitter) fit at most 5 lists in 2 s;
    // without a back-off it was well over a hundred.
    assert!(
        (2..=5).contains(&l.len()),
        "{} lists in 2 s of 410s",
        l.len()
    );
    let gaps: Vec<Duration> = l.windows(2).map(|p| p[1].at - p[0].at).collect();
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(100)),
        "relisted sooner than the first back-off: {gaps:?}"
    );
    assert!(
        gaps.windows(2).all(|g| g[1] > g[0]),
        "the back-off grows while the storm lasts: {gaps:?}"
    );
    assert!(r.store.status().relists_gone >= 2);
    assert_eq!(names(&r.store), BTreeSet::from(["a/one".to_string()]));
}

/// The bug: one huge object in a list page (a 100,000-endpoint EndpointSlice) was parsed
/// into a value tree of many times its size. Now an item over the one-object cap (the watch
/// line cap) is refused unparsed, counted, and the rest of the list is taken.
#[test]
fn one_huge_object_in_a_list_page_is_refused_and_counted_the_rest_is_taken() {
    let fake = FakeApiServer::start();
    fake.apply("services", svc("default", "a", 80));
    let mut big = svc("default", "big", 80);
    big["metadata"]["labels"]["filler"] = Value::String("x".repeat(8192));
    fake.apply("services", big);
    fake.apply("services", svc("default", "c", 80));
    let mut c = config();
    c.page_size = 10;
    c.max_line_bytes = 4096;
    let r = run(&fake, c);
    wait_until("synced", WAIT, || r.store.is_synced());
    assert_eq!(
        names(&r.store),
        BTreeSet::from(["default/a".to_string(), "default/c".to_string()])
    );
    assert_eq!(r.store.status().refused_too_large, 1);
    assert_eq!(r.store.status().last_error, None);
}

/// The bug: one huge object arriving by watch (a line over the one-object cap) failed the
/// whole watch, and every watch after it (each resume brought the same event again). Now it
/// is refused undecoded and counted once, an older version of it is left out as a list would
/// leave it out, and the watch goes on with the next line.
#[test]
fn one_huge_object_in_a_watch_is_refused_and_counted_the_watch_goes_on() {
    let fake = FakeApiServer::start();
    fake.set_chunk_size(64);
    fake.apply("services", svc("default", "a", 80));
    fake.apply("services", svc("default", "grows", 80));
    let mut c = config();
    c.max_line_bytes = 4096;
    let r = run(&fake, c);
    wait_watch(&fake, 1);
    let huge = |name: &str| {
        let mut big = svc("default", name, 80);
        big["metadata"]["labels"]["filler"] = Value::String("x".repeat(8192));
        big
    };
    fake.apply("services", huge("big"));
    fake.apply("services", huge("grows"));
    wait_until("both refused", WAIT, || {
        r.store.status().refused_too_large == 2
    });
    assert!(
        r.store.get("default", "grows").is_none(),
        "the older version is left out"
    );
    fake.apply("services", svc("default", "after", 81));
    wait_until("the watch went on", WAIT, || {
        r.store.get("default", "after").is_some()
    });
    assert_eq!(r.store.status().last_error, None);
    assert!(r.store.get("default", "big").is_none());
    assert!(r.store.get("default", "a").is_some());
    assert_eq!(watches(&fake).len(), 1, "one watch, never reopened");
    // The next watch resumes after the refused objects (not from before them): they are
    // neither replayed nor counted again.
    fake.drop_connections();
    wait_watch(&fake, 2);
    fake.apply("services", svc("default", "later", 82));
    wait_until("resumed", WAIT, || {
        r.store.get("default", "later").is_some()
    });
    assert_eq!(r.store.status().refused_too_large, 2);
}

/// [`config`] with streamed lists tried first, as the daemon runs.
fn streaming_config() -> ReflectorConfig {
    let mut c = config();
    c.streaming = true;
    c.initial_events_timeout = Duration::from_millis(500);
    c
}

#[test]
fn streamed_list_takes_every_object_in_one_watch_that_goes_on_as_the_watch() {
    let fake = FakeApiServer::start();
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run(&fake, streaming_config());
    wait_until("listed", WAIT, || r.store.is_synced());
    assert_eq!(names(&r.store).len(), 5);
    let status = r.store.status();
    assert_eq!((status.lists, status.lists_streamed), (1, 1));
    assert_eq!(status.resource_version, "5", "the end bookmark's version");
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        1,
        "one request lists and watches: {requests:?}"
    );
    let q = &requests[0].query;
    assert_eq!(q["sendInitialEvents"], "true");
    assert_eq!(q["resourceVersionMatch"], "NotOlderThan");
    assert_eq!(q["allowWatchBookmarks"], "true");
    assert!(!q.contains_key("limit") && !q.contains_key("resourceVersion"));
    // The same connection brings the changes after the list.
    fake.apply("services", svc("default", "s5", 80));
    fake.delete("services", "default", "s0");
    wait_until("watched", WAIT, || {
        let n = names(&r.store);
        n.contains("default/s5") && !n.contains("default/s0")
    });
    assert_eq!(fake.requests().len(), 1, "no second request");
    assert_eq!(r.store.status().events, 2);
}

#[test]
fn a_server_that_refuses_streamed_lists_is_listed_in_pages_from_then_on() {
    let mut fake = FakeApiServer::start();
    fake.set_streamed_lists(StreamedLists::Rejected);
    for i in 0..5 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run(&fake, streaming_config());
    wait_watch(&fake, 1);
    assert_eq!(names(&r.store).len(), 5);
    let status = r.store.status();
    assert_eq!((status.lists, status.lists_streamed), (1, 0));
    let requests = fake.requests();
    assert!(requests[0].is_streamed_list() && requests[0].code == 422);
    assert_eq!(
        requests.iter().filter(|q| q.is_paged_list()).count(),
        3,
        "5 objects in pages of 2: {requests:?}"
    );
    // A relist (410) goes straight to pages: the server said it does not stream.
    fake.stop();
    fake.apply("services", svc("default", "s5", 80));
    fake.compact();
    fake.restart();
    wait_until("relisted", WAIT, || r.store.status().lists == 2);
    assert_eq!(names(&r.store).len(), 6);
    let streamed = fake
        .requests()
        .iter()
        .filter(|q| q.is_streamed_list())
        .count();
    assert_eq!(streamed, 1, "streaming was tried once");
}

#[test]
fn a_streamed_list_without_its_end_bookmark_falls_back_to_pages_in_bounded_time() {
    let fake = FakeApiServer::start();
    fake.set_streamed_lists(StreamedLists::Ignored);
    for i in 0..3 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let started = Instant::now();
    let r = run(&fake, streaming_config());
    wait_until("listed", WAIT, || r.store.is_synced());
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "not before the bound"
    );
    assert_eq!(names(&r.store).len(), 3);
    let status = r.store.status();
    assert_eq!((status.lists, status.lists_streamed), (1, 0));
    assert!(fake.requests().iter().any(|q| q.is_paged_list()), "paged");
}

#[test]
fn a_streamed_list_resumes_without_a_relist_and_streams_again_after_410() {
    let mut fake = FakeApiServer::start();
    for i in 0..3 {
        fake.apply("services", svc("default", &format!("s{i}"), 80));
    }
    let r = run(&fake, streaming_config());
    wait_until("listed", WAIT, || r.store.is_synced());
    // A dropped connection resumes from the last version, without a list.
    fake.drop_connections();
    fake.apply("services", svc("default", "s3", 80));
    wait_until("resumed", WAIT, || names(&r.store).contains("default/s3"));
    let resumed = fake.requests().pop().unwrap();
    assert!(!resumed.is_streamed_list(), "{resumed:?}");
    assert_eq!(resumed.query["resourceVersion"], "3");
    assert_eq!(r.store.status().lists, 1);
    // A version gone from the history: listed again, streamed again.
    fake.stop();
    fake.apply("services", svc("default", "s4", 80));
    fake.delete("services", "default", "s0");
    fake.compact();
    fake.restart();
    wait_until("relisted", WAIT, || r.store.status().lists == 2);
    let status = r.store.status();
    assert_eq!((status.lists_streamed, status.relists_gone), (2, 1));
    assert_eq!(
        names(&r.store),
        ["default/s1", "default/s2", "default/s3", "default/s4"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

#[test]
fn a_streamed_list_whose_watch_ends_before_its_end_bookmark_falls_back_to_pages() {
    let fake = FakeApiServer::start();
    fake.set_streamed_lists(StreamedLists::Ignored);
    fake.apply("services", svc("default", "s0", 80));
    let mut c = streaming_config();
    // The server ends the watch (timeoutSeconds) long before the bound.
    c.watch_timeout = Duration::from_secs(1);
    c.initial_events_timeout = Duration::from_secs(30);
    let started = Instant::now();
    let r = run(&fake, c);
    wait_until("listed", WAIT, || r.store.is_synced());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not held to the bound"
    );
    assert_eq!(r.store.status().lists_streamed, 0);
    assert!(fake.requests().iter().any(|q| q.is_paged_list()), "paged");
}

#[test]
fn a_streamed_list_that_goes_quiet_without_its_end_bookmark_falls_back_to_pages_before_the_bound() {
    // A server (an offline node proxy, say) that takes the streamed list for a plain watch:
    // the objects as ADDED, then nothing, and its watch does not end for minutes.
    let fake = FakeApiServer::start();
    fake.set_streamed_lists(StreamedLists::Ignored);
    fake.apply("services", svc("default", "s0", 80));
    let mut c = streaming_config();
    c.watch_timeout = Duration::from_secs(290);
    c.initial_events_timeout = Duration::from_secs(60);
    c.initial_events_quiet = Duration::from_secs(1);
    let started = Instant::now();
    let r = run(&fake, c);
    wait_until("listed", WAIT, || r.store.is_synced());
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "held {took:?}, not the quiet gap"
    );
    assert_eq!(r.store.status().lists_streamed, 0);
    assert!(fake.requests().iter().any(|q| q.is_paged_list()), "paged");
    assert!(names(&r.store).contains("default/s0"));
}
