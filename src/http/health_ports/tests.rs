//! kube-proxy's `TestServer` (pkg/proxy/healthcheck/healthcheck_test.go) step by step on the
//! answers, the exact bytes of one answer, and the listeners on real loopback sockets.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::clock::FakeClock;
use crate::http::response::encode;
use crate::liveness::Heartbeat;

fn port(service: &str, port: u16, count: u32) -> HealthPort {
    let (namespace, name) = service.split_once('/').unwrap();
    HealthPort {
        namespace: namespace.into(),
        name: name.into(),
        port,
        local_endpoints: count,
        local_endpoints_v6: count,
    }
}

/// A registry with one live loop, its clock and handle.
fn liveness() -> (Arc<FakeClock>, Arc<Liveness>, Heartbeat) {
    let clock = FakeClock::new();
    let liveness = Liveness::new(clock.clone());
    let handle = liveness.register("service", Duration::from_secs(10));
    (clock, liveness, handle)
}

/// What the handler of `port` says now: (status, namespace/name, localEndpoints,
/// serviceProxyHealthy), or None when the port is not served.
fn probe(
    ports: &Arc<HealthPorts>,
    liveness: &Arc<Liveness>,
    p: u16,
) -> Option<(u16, String, u64, bool)> {
    ports.get(p)?;
    let site = PortSite {
        port: p,
        ports: Arc::clone(ports),
        liveness: Arc::clone(liveness),
    };
    let r = site.answer(&Method::Get, "/healthz", "192.0.2.1".parse().unwrap());
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let weight: u64 = r.headers[1].1.parse().unwrap();
    let count = v["localEndpoints"].as_u64().unwrap();
    assert_eq!(
        weight, count,
        "X-Load-Balancing-Endpoint-Weight is the count"
    );
    assert_eq!(r.content_type, "application/json");
    assert_eq!(r.headers[0], ("X-Content-Type-Options", "nosniff".into()));
    let service = format!(
        "{}/{}",
        v["service"]["namespace"].as_str().unwrap(),
        v["service"]["name"].as_str().unwrap()
    );
    Some((
        r.status,
        service,
        count,
        v["serviceProxyHealthy"].as_bool().unwrap(),
    ))
}

#[test]
fn test_server() {
    let (clock, liveness, handle) = liveness();
    let ports = Arc::new(HealthPorts::default());
    type Want = &'static [(u16, Option<(u16, &'static str, u64, bool)>)];
    // (what, the ports set, whether the loops are live, the answers wanted).
    let steps: &[(&str, Vec<HealthPort>, bool, Want)] = &[
        ("sync nothing", vec![], true, &[(9376, None)]),
        (
            "a real service without endpoints",
            vec![port("a/b", 9376, 0)],
            true,
            &[(9376, Some((503, "a/b", 0, true)))],
        ),
        (
            "an endpoint",
            vec![port("a/b", 9376, 18)],
            true,
            &[(9376, Some((200, "a/b", 18, true)))],
        ),
        (
            "zero endpoints",
            vec![port("a/b", 9376, 0)],
            true,
            &[(9376, Some((503, "a/b", 0, true)))],
        ),
        (
            "the endpoints back",
            vec![port("a/b", 9376, 11)],
            true,
            &[(9376, Some((200, "a/b", 11, true)))],
        ),
        ("delete the service", vec![], true, &[(9376, None)]),
        (
            "several services",
            vec![
                port("a/b", 9376, 9),
                port("c/d", 12909, 3),
                port("e/f", 11113, 7),
            ],
            true,
            &[
                (9376, Some((200, "a/b", 9, true))),
                (12909, Some((200, "c/d", 3, true))),
                (11113, Some((200, "e/f", 7, true))),
            ],
        ),
        (
            "remove one, leave one, change one's port, add one",
            vec![
                port("c/d", 12909, 3),
                port("e/f", 11114, 0),
                port("g/h", 11878, 6),
            ],
            true,
            &[
                (9376, None),
                (12909, Some((200, "c/d", 3, true))),
                (11113, None),
                (11114, Some((503, "e/f", 0, true))),
                (11878, Some((200, "g/h", 6, true))),
            ],
        ),
        (
            "a temporarily unhealthy proxy",
            vec![
                port("c/d", 12909, 0),
                port("e/f", 11114, 7),
                port("g/h", 11878, 6),
            ],
            false,
            &[
                (12909, Some((503, "c/d", 0, false))),
                (11114, Some((503, "e/f", 7, false))),
                (11878, Some((503, "g/h", 6, false))),
            ],
        ),
        (
            "healthy again",
            vec![
                port("c/d", 12909, 0),
                port("e/f", 11114, 7),
                port("g/h", 11878, 6),
            ],
            true,
            &[
                (12909, Some((503, "c/d", 0, true))),
                (11114, Some((200, "e/f", 7, true))),
                (11878, Some((200, "g/h", 6, true))),
            ],
        ),
    ];
    for (what, set, live, want) in steps {
        ports.set(set.clone());
        if *live {
            handle.beat();
        } else {
            clock.advance(Duration::from_secs(11));
        }
        for (p, want) in *want {
            let got = probe(&ports, &liveness, *p);
            let want = want.map(|(s, n, c, h)| (s, n.to_string(), c, h));
            assert_eq!(got, want, "{what}: port {p}");
        }
    }
}

#[test]
fn the_answer_is_kube_proxys_byte_for_byte() {
    let reply = answer(&port("ns1/svc1", 30000, 2), false, true);
    let wire = String::from_utf8(encode(&reply, false, SystemTime::UNIX_EPOCH)).unwrap();
    let want_head = "HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
        Content-Type: application/json\r\nContent-Length: 111\r\nConnection: close\r\n\
        X-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: 2\r\n\r\n";
    let want_body = "{\n\t\"service\": {\n\t\t\"namespace\": \"ns1\",\n\t\t\"name\": \"svc1\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}";
    assert_eq!(want_body.len(), 111);
    assert_eq!(wire, format!("{want_head}{want_body}"));
    let head_only = String::from_utf8(encode(&reply, true, SystemTime::UNIX_EPOCH)).unwrap();
    assert_eq!(head_only, want_head, "HEAD: the same head, no body");
    let down = answer(&port("ns1/svc1", 30000, 0), false, true);
    assert_eq!((down.status, down.headers[1].1.as_str()), (503, "0"));
}

#[test]
fn a_probe_gets_the_count_of_the_family_it_came_over() {
    let mut p = port("ns1/dual", 30000, 2);
    p.local_endpoints_v6 = 0;
    let (_clock, liveness, _h) = liveness();
    let ports = Arc::new(HealthPorts::default());
    ports.set([p]);
    let site = PortSite {
        port: 30000,
        ports,
        liveness,
    };
    let over = |ip: &str| site.answer(&Method::Get, "/", ip.parse().unwrap()).status;
    assert_eq!(over("192.0.2.1"), 200);
    assert_eq!(over("2001:db8::1"), 503);
}

#[test]
fn only_a_change_in_the_set_of_ports_wakes_the_listener_task() {
    let ports = HealthPorts::default();
    ports.set([port("a/b", 9376, 1)]);
    assert!(ports.woken.try_recv().is_ok(), "a new port");
    ports.set([port("a/b", 9376, 5)]);
    assert!(ports.woken.try_recv().is_err(), "a new count only");
    ports.set([port("c/d", 9376, 5)]);
    assert!(
        ports.woken.try_recv().is_ok(),
        "another service on the port"
    );
    ports.set([port("c/d", 9377, 5), port("e/f", 9377, 1)]);
    assert!(ports.woken.try_recv().is_ok(), "a moved port");
    assert_eq!(
        ports.get(9377).unwrap().name,
        "d",
        "the first entry of a port wins"
    );
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET over loopback: the status and body, or None when the port refuses (or resets a
/// connection it queued as it closed).
fn get(port: u16) -> Option<(u16, String)> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run(ports: Arc<HealthPorts>, liveness: Arc<Liveness>) {
    std::thread::spawn(move || {
        let ex = Rc::new(smol::LocalExecutor::new());
        smol::block_on(ex.run(serve(Rc::clone(&ex), ports, liveness)));
    });
}

#[test]
fn listeners_open_move_and_close_as_the_ports_change() {
    let (_clock, liveness, _h) = liveness();
    let ports = Arc::new(HealthPorts::default());
    run(Arc::clone(&ports), liveness);
    let (a, b) = (free_port(), free_port());
    ports.set([port("ns1/svc1", a, 1)]);
    wait_for("port a to answer", || get(a).is_some_and(|(s, _)| s == 200));
    ports.set([port("ns1/svc1", a, 0)]);
    let (status, body) = get(a).unwrap();
    assert_eq!(status, 503, "a new count is in force at once: {body}");
    assert!(body.contains("\"localEndpoints\": 0"), "{body}");
    ports.set([port("ns1/svc1", b, 3)]);
    wait_for("the listener to move to b", || {
        get(b).is_some_and(|(s, _)| s == 200)
    });
    wait_for("port a to close", || get(a).is_none());
    ports.set([]);
    wait_for("port b to close", || get(b).is_none());
}

#[test]
fn a_port_that_cannot_be_bound_is_skipped_and_the_others_serve() {
    let (_clock, liveness, _h) = liveness();
    let ports = Arc::new(HealthPorts::default());
    run(Arc::clone(&ports), liveness);
    let taken = crate::sys::dual_stack_listener(0, 16).unwrap();
    let busy = taken.local_addr().unwrap().port();
    let free = free_port();
    ports.set([port("ns1/busy", busy, 1), port("ns1/free", free, 1)]);
    wait_for("the free port to answer", || {
        get(free).is_some_and(|(s, _)| s == 200)
    });
    wait_for("the pass to end with the failure", || {
        ports.failing.load(Ordering::Relaxed)
    });
    drop(taken);
    // Tried again with the next answers, though the ports are the same.
    ports.set([port("ns1/busy", busy, 2), port("ns1/free", free, 1)]);
    wait_for("the freed port to answer", || {
        get(busy).is_some_and(|(s, _)| s == 200)
    });
}

#[test]
fn an_idle_flood_on_a_health_port_evicts_without_closing() {
    // Issue 21, item 11, on the health-check node ports: a closed idle client comes back at
    // once, so an eviction must not close it before its head deadline.
    let (_clock, liveness, _h) = liveness();
    let ports = Arc::new(HealthPorts::default());
    run(Arc::clone(&ports), liveness);
    let p = free_port();
    ports.set([port("ns1/svc1", p, 1)]);
    wait_for("the port to answer", || {
        get(p).is_some_and(|(s, _)| s == 200)
    });
    let mut idle: Vec<TcpStream> = (0..LIMITS.max_per_source + 1)
        .map(|_| TcpStream::connect((Ipv4Addr::LOCALHOST, p)).unwrap())
        .collect();
    // The last one took the first one's slot (one source, at its cap).
    wait_for("a probe behind them to be answered", || {
        get(p).is_some_and(|(s, _)| s == 200)
    });
    let first = &mut idle[0];
    first
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = first.read(&mut byte);
    assert!(
        read.as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the evicted connection was closed (or answered): {read:?}"
    );
}
