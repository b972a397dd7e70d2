//! Slots kept across a backend change, with real packets (issue 24): forty client addresses
//! on one client host hash (`affinity = "source-ip"`) to the slots of a service whose
//! backends are three servers; replacing one of them must leave every client of the other
//! two on its backend, and write only the replaced backend's slots; a restarted controller
//! keeps the kernel's slots.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;

use common::controller::Driver;
use common::service_lab::{Family, client_and_three_backends};
use common::topology::Topology;

/// How many client addresses connect.
const CLIENTS: u32 = 40;

/// One TCP connection from each source address given: `SRC ANSWER` lines.
const ONCE_EACH: &str = r#"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
for src in sys.argv[3:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.bind((src, 0))
        s.connect((host, port))
        with s.makefile() as f:
            answer = f.readline().strip() or 'empty'
    except Exception as e:
        answer = 'fail:' + type(e).__name__
    finally:
        s.close()
    print(src, answer, flush=True)
"#;

fn service(backends: &[&str]) -> String {
    let list: Vec<String> = backends.iter().map(|b| format!("\"{b}\"")).collect();
    format!(
        "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\naffinity = \"source-ip\"\nbackends = [{}]\n",
        list.join(", ")
    )
}

/// Every client address's backend (by the name its server answers with).
fn backend_of_each(net: &Topology, script: &str) -> BTreeMap<String, String> {
    let sources: Vec<String> = (0..CLIENTS)
        .map(|i| format!("192.168.10.{}", 100 + i))
        .collect();
    let out = net.host("cl").sh(&format!(
        "python3 {script} 10.96.0.10 80 {}",
        sources.join(" ")
    ));
    out.lines()
        .map(|l| {
            let (src, got) = l.split_once(' ').expect("SRC ANSWER");
            (src.to_string(), got.to_string())
        })
        .collect()
}

netns_test! {
    fn source_ip_clients_of_unchanged_backends_keep_them_when_another_is_replaced() {
        let (net, _servers) = client_and_three_backends(Family::V4);
        // The replacement: a second server on b3's host (another port, another name).
        net.serve_named(net.host("b3"), "b3x", 8081);
        for i in 0..CLIENTS {
            net.host("cl").sh(&format!("ip addr add 192.168.10.{}/24 dev eth0", 100 + i));
        }
        let script = net.script("once_each.py", ONCE_EACH);
        let mut ctrl = Driver::service();
        ctrl.sync(&service(&["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"]))
            .expect("sync");
        let before = backend_of_each(&net, &script);
        assert_eq!(before.len(), CLIENTS as usize, "{before:?}");
        for b in ["b1", "b2", "b3"] {
            assert!(before.values().any(|g| g == b), "some client on {b}: {before:?}");
        }
        // b1 replaced by a backend that sorts last: dealt again over the sorted backends,
        // b2 and b3 would each move one slot down and take most of their clients along.
        let r = ctrl
            .sync(&service(&["10.0.2.2:8080", "10.0.3.2:8080", "10.0.3.2:8081"]))
            .expect("sync");
        assert_eq!(
            r.changes, 3,
            "b1's one slot (a delete and an add) and its address's hairpin element: {r:?}"
        );
        let after = backend_of_each(&net, &script);
        for (src, was) in &before {
            let now = &after[src];
            if was == "b1" {
                assert_eq!(now, "b3x", "{src}: b1's clients go to its replacement");
            } else {
                assert_eq!(now, was, "{src} left unchanged {was} for {now}");
            }
        }
        // A restart deals afresh (b2 first) but adopts the kernel's places: nothing written,
        // nobody moves.
        drop(ctrl);
        let mut restarted = Driver::service();
        let r = restarted
            .sync(&service(&["10.0.2.2:8080", "10.0.3.2:8080", "10.0.3.2:8081"]))
            .expect("sync");
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        assert_eq!(backend_of_each(&net, &script), after, "a restart moved clients");
    }
}
