//! The cost of the pure pipeline for the benchmark's cluster, runnable without the daemon:
//! the lists as JSON pages decoded into the lean objects, the translation to service entries,
//! the compose with the TOML state, the cache write; then one endpoint change (a watch line
//! decoded, everything translated and composed again, as the daemon does on a change); and
//! the same lists fetched by the real client over TLS from the fake API server.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgenetd::kubernetes::cache::Cache;
use edgenetd::kubernetes::client::json::Decode;
use edgenetd::kubernetes::client::meta::read_page;
use edgenetd::kubernetes::client::{Auth, Endpoint, Reflector, ReflectorConfig};
use edgenetd::kubernetes::compose::{ClusterPart, Composer};
use edgenetd::kubernetes::objects::{EndpointSlice, Service, WatchEvent};
use edgenetd::kubernetes::translate::services::{ThisNode, Translated, translate};
use edgenetd::sync::{NoProgress, trigger};
use serde_json::{Value, json};

use crate::common::fake_apiserver::FakeApiServer;
use crate::common::scratch::ScratchDir;
use crate::data;
use crate::ms;

/// Objects per list page (the reflector's default `limit`).
const PAGE: usize = 500;

/// `resource`'s objects as the list pages the API server sends.
fn pages(objects: &[(&str, Value)], resource: &str, kind: &str) -> Vec<Vec<u8>> {
    let items: Vec<&Value> = objects
        .iter()
        .filter(|(r, _)| *r == resource)
        .map(|(_, o)| o)
        .collect();
    let n = items.len().div_ceil(PAGE);
    items
        .chunks(PAGE)
        .enumerate()
        .map(|(p, chunk)| {
            let mut meta = json!({"resourceVersion": "100000"});
            if p + 1 < n {
                meta["continue"] = Value::String(format!("token-{p}"));
            }
            let page = json!({"kind": kind, "apiVersion": "v1", "metadata": meta, "items": chunk});
            serde_json::to_vec(&page).unwrap()
        })
        .collect()
}

/// Decodes every page, item by item, as the reflector does.
fn decode<T: Decode>(pages: &[Vec<u8>]) -> Vec<T> {
    let mut out = Vec::new();
    for p in pages {
        read_page(p, usize::MAX, &mut |item| {
            out.push(T::decode(item)?);
            Ok(())
        })
        .unwrap();
    }
    out
}

/// The node the translation runs for.
fn this_node(addresses: &[IpAddr]) -> ThisNode<'_> {
    ThisNode {
        name: data::NODE,
        zone: None,
        addresses,
    }
}

/// Checks the translation found every service and endpoint.
fn check(t: &Translated) {
    let backends: usize = t.services.iter().map(|s| s.backends.len()).sum();
    assert_eq!(
        t.services.len(),
        data::services(),
        "skipped: {:?}",
        t.skipped
    );
    assert_eq!(backends, data::services() * data::ENDPOINTS);
}

/// Runs `f`, returns its result and how long it took.
fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

/// Prints the pure pipeline's figures.
pub fn run(objects: &[(&str, Value)]) {
    let svc_pages = pages(objects, "services", "ServiceList");
    let slice_pages = pages(objects, "endpointslices", "EndpointSliceList");
    let bytes: usize = svc_pages.iter().chain(&slice_pages).map(Vec::len).sum();
    println!(
        "pure pipeline: {} Services, {} endpoints in {} EndpointSlices; lists {:.1} MB of JSON in {} pages",
        data::services(),
        data::services() * data::ENDPOINTS,
        data::services(),
        bytes as f64 / 1e6,
        svc_pages.len() + slice_pages.len()
    );
    let (services, d_svc) = timed(|| decode::<Service>(&svc_pages));
    let (mut slices, d_slices) = timed(|| decode::<EndpointSlice>(&slice_pages));
    println!("  decode Service lists           {}", ms(d_svc));
    println!("  decode EndpointSlice lists     {}", ms(d_slices));
    let addresses = [IpAddr::V4(data::NODE_IP)];
    let (translated, d_tr) = timed(|| translate(&services, &slices, this_node(&addresses)));
    check(&translated);
    println!("  translate                      {}", ms(d_tr));
    let toml = Arc::new(edgenetd::config::load_str(&[("edgenetd.toml", "")]).unwrap());
    let mut composer = Composer::new(toml);
    let (composed, d_co) = timed(|| {
        composer.set_cluster(ClusterPart::services(translated.services));
        composer.take_if_changed()
    });
    assert!(composed.is_some_and(|s| s.services.services.len() == data::services()));
    println!("  compose                        {}", ms(d_co));
    let dir = ScratchDir::new("bench-kubernetes");
    let cache = Cache::new(dir.path().join("cluster.json"));
    let (stored, d_ca) =
        timed(|| cache.store(composer.cluster(), Some(std::time::SystemTime::now())));
    stored.unwrap();
    let size = std::fs::metadata(cache.path()).unwrap().len();
    println!(
        "  cache write ({:.1} MB)            {}",
        size as f64 / 1e6,
        ms(d_ca)
    );
    println!(
        "  total, list to composed        {}",
        ms(d_svc + d_slices + d_tr + d_co)
    );
    one_change(&services, &mut slices, &mut composer, &addresses);
}

/// One endpoint moves: the watch line decoded, the slice replaced, everything translated and
/// composed again (median of 7).
fn one_change(
    services: &[Service],
    slices: &mut [EndpointSlice],
    composer: &mut Composer,
    addresses: &[IpAddr],
) {
    let mut runs = Vec::new();
    for n in 0..7 {
        let mut moved = data::addresses(0);
        moved[0] = data::moved_ip(n);
        let line = json!({"type": "MODIFIED", "object": data::slice(0, &moved)}).to_string();
        let t = Instant::now();
        let WatchEvent::Modified(slice) =
            WatchEvent::<EndpointSlice>::from_line(line.as_bytes(), usize::MAX).unwrap()
        else {
            panic!("not MODIFIED");
        };
        let at = slices
            .iter()
            .position(|s| s.metadata.name == slice.metadata.name)
            .unwrap();
        slices[at] = slice;
        let translated = translate(services, slices.iter(), this_node(addresses));
        composer.set_cluster(ClusterPart::services(translated.services));
        assert!(composer.take_if_changed().is_some(), "the change was seen");
        runs.push(t.elapsed());
    }
    runs.sort();
    println!(
        "  one endpoint change: decode + translate all + compose {} (median of 7)",
        ms(runs[3])
    );
}

/// Lists Services and EndpointSlices with the real client (TLS) from `fake`, both ways: in
/// pages of 500 (`limit`/`continue`) and streamed (one watch with `sendInitialEvents`).
pub fn client_list(fake: &FakeApiServer) {
    let paged = client_list_once(fake, false);
    let streamed = client_list_once(fake, true);
    println!(
        "  client list over TLS from the fake, both kinds at once: paged {}, streamed {}",
        ms(paged),
        ms(streamed)
    );
}

/// One list of both kinds, streamed or in pages; how long until both stores were complete.
fn client_list_once(fake: &FakeApiServer, streaming: bool) -> Duration {
    let (cert, key) = fake.client_cert_files();
    let endpoint = Endpoint::from_url(
        &fake.url(),
        Some(&fake.ca_file()),
        Auth::ClientCert { cert, key },
    )
    .unwrap();
    let (changed, _rx) = trigger();
    let config = |path: &str| {
        let mut c = ReflectorConfig::new(path);
        c.streaming = streaming;
        c
    };
    let mut svc: Reflector<Service> = Reflector::new(
        endpoint.clone(),
        config("/api/v1/services"),
        changed.clone(),
    );
    let mut eps: Reflector<EndpointSlice> = Reflector::new(
        endpoint,
        config("/apis/discovery.k8s.io/v1/endpointslices"),
        changed,
    );
    let t = Instant::now();
    let (svc_store, eps_store) = (svc.store(), eps.store());
    let both_listed = async {
        while !(svc_store.is_synced() && eps_store.is_synced()) {
            smol::Timer::after(Duration::from_millis(1)).await;
        }
        t.elapsed()
    };
    let took = smol::block_on(futures_lite::future::or(both_listed, async {
        futures_lite::future::zip(svc.step(&NoProgress), eps.step(&NoProgress)).await;
        futures_lite::future::pending().await
    }));
    assert_eq!(svc.store().snapshot().len(), data::services());
    assert_eq!(eps.store().snapshot().len(), data::services());
    let streamed = svc.store().status().lists_streamed + eps.store().status().lists_streamed;
    assert_eq!(
        streamed,
        if streaming { 2 } else { 0 },
        "the mode asked for"
    );
    took
}
