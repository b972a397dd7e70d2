//! Service dataplane benchmark: edgenetd's layout versus kube-proxy's nftables layout.
//!
//! Run it in a throwaway network namespace (it programs nftables): `scripts/bench-services.sh`
//! or `unshare --net target/release/examples/bench_services [sizes...]`. Prints figures; it
//! asserts nothing about time.
//!
//! For each size (default 1000 and 10000 services × 2 backends):
//! - kube-proxy's layout (a `service-ips` vmap -> a chain per service with an anonymous
//!   `numgen random mod N vmap {…}` -> a chain per endpoint with dnat), written by the
//!   generator below and loaded with `nft -f`;
//! - the same services in edgenetd's layout as text, loaded with `nft -f`;
//! - the controller's own cold sync (netlink batch), a one-backend change with everything
//!   installed, a no-op resync (kernel writes must be 0), a full compare, peak RSS.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use edgenetd::config::service::{Affinity, Backend, BackendCheck, Protocol, Service, WhenEmpty};
use edgenetd::controller::nft_core::NftCore;
use edgenetd::controller::service::Kernel;
use edgenetd::controller::service::elements::{full_table, render_text};
use edgenetd::controller::service::model;
use edgenetd::dataplane::nft::GenerationWatch;
use edgenetd::dataplane::nft::{Batch, Nft, Op, TableRef, ir::Family};

fn vip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, (i >> 8) as u8, i as u8)
}

fn backend(i: usize, j: usize) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 200 + j as u8, (i >> 8) as u8, i as u8)),
        8080,
    )
}

fn services(n: usize) -> Vec<Service> {
    (0..n)
        .map(|i| Service {
            name: format!("svc-{i}"),
            address: IpAddr::V4(vip(i)),
            port: 80,
            protocol: Protocol::Tcp,
            backends: (0..2)
                .map(|j| Backend {
                    address: backend(i, j),
                    weight: 1,
                })
                .collect(),
            affinity: Affinity::None,
            masquerade: edgenetd::config::service::Masquerade::Never,
            source_ranges: Vec::new(),
            internal_backends: None,
            reject_unserved_ports: false,
            when_empty: WhenEmpty::Reject,
            fallback: None,
            backend_check: BackendCheck::default(),
        })
        .collect()
}

/// kube-proxy's nftables layout (proxy/nftables in Kubernetes) for `n` services × 2
/// endpoints: the service-ips vmap, a chain per service that picks an endpoint with an
/// anonymous `numgen random mod 2 vmap`, and a chain per endpoint that DNATs.
fn kube_proxy_text(n: usize) -> String {
    let mut t = String::with_capacity(n * 600);
    t.push_str("table ip kube-proxy {\n");
    t.push_str("\tmap service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }\n");
    t.push_str("\tchain mark-for-masquerade { mark set mark or 0x4000; }\n");
    t.push_str("\tchain services { ip daddr . meta l4proto . th dport vmap @service-ips; }\n");
    t.push_str("\tchain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }\n");
    t.push_str("\tchain nat-output { type nat hook output priority -100; policy accept; jump services; }\n");
    t.push_str("\tchain nat-postrouting { type nat hook postrouting priority srcnat; policy accept; mark and 0x4000 == 0 return; mark set mark xor 0x4000; masquerade fully-random; }\n");
    for i in 0..n {
        let svc = format!("service-{i:08X}-ns/svc-{i}/tcp/http");
        let eps: Vec<String> = (0..2)
            .map(|j| {
                format!(
                    "endpoint-{i:04X}{j:04X}-ns/svc-{i}/tcp/http__{}/{}",
                    backend(i, j).ip(),
                    backend(i, j).port()
                )
            })
            .collect();
        let _ = writeln!(t, "\tchain {svc} {{");
        let _ = writeln!(
            t,
            "\t\tip daddr {} tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade",
            vip(i)
        );
        let _ = writeln!(
            t,
            "\t\tnumgen random mod 2 vmap {{ 0 : goto {}, 1 : goto {} }}",
            eps[0], eps[1]
        );
        t.push_str("\t}\n");
        for (j, ep) in eps.iter().enumerate() {
            let b = backend(i, j);
            let _ = writeln!(
                t,
                "\tchain {ep} {{ ip saddr {} jump mark-for-masquerade; meta l4proto tcp dnat to {b}; }}",
                b.ip()
            );
        }
    }
    t.push_str("}\nadd element ip kube-proxy service-ips {\n");
    for i in 0..n {
        let _ = writeln!(
            t,
            "\t\t\t{} . tcp . 80 : goto service-{i:08X}-ns/svc-{i}/tcp/http,",
            vip(i)
        );
    }
    t.push_str("}\n");
    t
}

fn nft_f(text: &str, path: &str) -> Duration {
    std::fs::write(path, text).expect("write nft file");
    let start = Instant::now();
    let out = Command::new("nft")
        .args(["-f", path])
        .output()
        .expect("run nft");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "nft -f {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn delete_table(family: &str, name: &str) {
    let _ = Command::new("nft")
        .args(["delete", "table", family, name])
        .output();
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if args.is_empty() {
        vec![1000, 10000]
    } else {
        args
    };
    let skip_kube = std::env::var_os("SKIP_KUBE_PROXY").is_some();
    let table = TableRef::new(Family::Inet, "edgenetd-service");
    let dir = std::env::temp_dir();
    println!("service benchmark: N services × 2 backends, fresh network namespace");
    println!(
        "{:>7} | {:>22} | {:>20} | {:>20} | {:>7}",
        "N", "kube-proxy nft -f", "edgenetd text nft -f", "edgenetd cold sync", "ratio"
    );
    let mut details = Vec::new();
    for &n in &sizes {
        let svcs = services(n);
        let start = Instant::now();
        let model = model::build_list(&svcs);
        let build_time = start.elapsed();
        // The controller's cold sync.
        let mut kernel = Kernel::open(table.clone(), &NftCore::unwatched(GenerationWatch::new()))
            .expect("nft socket");
        let start = Instant::now();
        let period = Duration::from_secs(3600);
        let r = kernel
            .sync(model.clone(), period, Instant::now())
            .expect("cold sync");
        let cold = start.elapsed();
        let cold_writes = kernel.last_writes;
        let hwm_cold = rss_kib("VmHWM:");
        // From here on each sync builds its model from the config, as the daemon does, so the
        // times below are what a daemon sync costs.
        // One backend of one service changes (repeated, alternating; median and worst).
        let mut changed = svcs.clone();
        changed[n / 2].backends[1].address = SocketAddr::new("10.250.0.1".parse().unwrap(), 8080);
        let mut times = Vec::new();
        let mut r1 = None;
        let mut one_writes = 0;
        for round in 0..11 {
            let config = if round % 2 == 0 { &changed } else { &svcs };
            let start = Instant::now();
            let m = model::build_list(config);
            let r = kernel.sync(m, period, Instant::now()).expect("one change");
            times.push(start.elapsed());
            one_writes = kernel.last_writes;
            r1.get_or_insert(r);
        }
        let r1 = r1.unwrap();
        times.sort();
        let (one, one_max) = (times[times.len() / 2], times[times.len() - 1]);
        // No-op resync (repeated; median).
        let mut times = Vec::new();
        let mut noop_writes = 0;
        for _ in 0..11 {
            let start = Instant::now();
            let m = model::build_list(&changed);
            kernel.sync(m, period, Instant::now()).expect("no-op");
            times.push(start.elapsed());
            noop_writes += kernel.last_writes;
        }
        times.sort();
        let noop = times[times.len() / 2];
        let changed_model = model::build_list(&changed);
        // Periodic full compare (dump and diff, nothing to repair); peak RSS reset first so
        // its own peak shows.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let rss_before_full = rss_kib("VmRSS:");
        let start = Instant::now();
        let rf = kernel
            .sync(changed_model, Duration::ZERO, Instant::now())
            .expect("full compare");
        let full = start.elapsed();
        let full_writes = kernel.last_writes;
        let hwm_full = rss_kib("VmHWM:");
        let hwm = hwm_cold.max(hwm_full);
        let mut b = Batch::new();
        b.table(&table, Op::Delete);
        Nft::open().unwrap().execute(b).unwrap();
        drop(kernel);
        // Text loads after the controller's figures, so the peak RSS above is the controller's.
        // kube-proxy's layout.
        let kube = if skip_kube {
            None
        } else {
            let text = kube_proxy_text(n);
            let t = nft_f(&text, &dir.join("bench-kube-proxy.nft").to_string_lossy());
            delete_table("ip", "kube-proxy");
            Some(t)
        };
        // Our layout as text.
        let text = render_text(&full_table(&table.name, &model, None));
        let ours_text = nft_f(&text, &dir.join("bench-edgenetd.nft").to_string_lossy());
        delete_table("inet", &table.name);
        let ratio = kube
            .map(|k| format!("{:.0}×", k.as_secs_f64() / cold.as_secs_f64()))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>7} | {:>22} | {:>20} | {:>20} | {:>7}",
            n,
            kube.map(ms).unwrap_or_else(|| "skipped".into()),
            ms(ours_text),
            ms(cold),
            ratio
        );
        details.push(format!(
            "N={n}: cold sync {} ({} elements, {cold_writes} netlink messages); one-backend change median {} (worst {}; {} element writes, {one_writes} messages); no-op resync median {} ({noop_writes} kernel writes in 11); a model built from scratch {}; full compare {} ({full_writes} writes, {} drift); peak RSS {:.1} MiB (cold sync {:.1}, full compare {:.1} from {:.1} resident before it)",
            ms(cold),
            r.changes,
            ms(one),
            ms(one_max),
            r1.changes,
            ms(noop),
            ms(build_time),
            ms(full),
            rf.drift_repairs,
            hwm as f64 / 1024.0,
            hwm_cold as f64 / 1024.0,
            hwm_full as f64 / 1024.0,
            rss_before_full as f64 / 1024.0
        ));
    }
    for d in details {
        println!("{d}");
    }
}
