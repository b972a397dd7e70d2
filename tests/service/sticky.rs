//! Sticky affinity with real packets: twenty client addresses on one client host, the
//! router (the test's namespace) and three backends answering with their names. A client's
//! backend is remembered in the kernel (`nft list map ... sticky4`), kept while backends are
//! added, forgotten after the timeout, and never used again once it stops being a live
//! backend of the service.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::time::Duration;

use common::controller::{Driver, load};
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::shell::{sh, sh_status};
use common::topology::{ServerId, Topology};
use common::wait::wait_until;
use edgenetd::controller::service::{self, ServiceController};
use edgenetd::sync::SyncReport;

/// How many client addresses connect.
const CLIENTS: u32 = 20;

/// The topology and a service controller driven sync by sync.
struct Lab {
    /// The namespaces and servers.
    net: Topology,
    /// The controller under test.
    ctrl: Driver<ServiceController>,
    /// The backends' servers (b1..b3).
    servers: Vec<ServerId>,
    /// The client script: connections per source address, answers per source.
    script: String,
}

/// Connects (TCP) or sends a datagram from a new socket (UDP) `count` times from each source
/// address and prints `SRC ANSWER,ANSWER,...`.
const PER_CLIENT: &str = r#"
import socket, sys
host, port, count, proto = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
for src in sys.argv[5:]:
    got = []
    for i in range(count):
        s = socket.socket(fam, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)
        s.settimeout(2)
        try:
            s.bind((src, 0))
            if proto == 'tcp':
                s.connect((host, port))
                with s.makefile() as f:
                    got.append(f.readline().strip() or 'empty')
            else:
                s.sendto(b'x', (host, port))
                got.append(s.recvfrom(100)[0].decode().strip() or 'empty')
        except Exception as e:
            got.append('fail:' + type(e).__name__ + ':' + str(e).replace(',', ';'))
        finally:
            s.close()
    print(src, ','.join(got), flush=True)
"#;

impl Lab {
    fn new() -> Lab {
        let (net, servers) = client_and_three_backends(Family::Dual);
        for i in 0..CLIENTS {
            net.host("cl").sh(&format!(
                "ip addr add 192.168.10.{}/24 dev eth0 && ip addr add fd10::{:x}/64 dev eth0 nodad",
                100 + i,
                0x100 + i
            ));
            // The router learns each client address before the first connection from it.
            net.host("cl").sh(&format!(
                "ping -6 -c 1 -W 5 -I fd10::{:x} fd10::1 >/dev/null",
                0x100 + i
            ));
        }
        let script = net.script("per_client.py", PER_CLIENT);
        Lab {
            net,
            ctrl: Driver::service(),
            servers,
            script,
        }
    }

    fn sync(&mut self, toml: &str) -> SyncReport {
        self.ctrl.sync(toml).expect("sync")
    }

    /// The client addresses of a family.
    fn sources(v4: bool) -> Vec<String> {
        (0..CLIENTS)
            .map(|i| match v4 {
                true => format!("192.168.10.{}", 100 + i),
                false => format!("fd10::{:x}", 0x100 + i),
            })
            .collect()
    }

    /// `count` TCP connections from every client address: the answers per client.
    fn per_client(&self, vip: &str, count: u32) -> BTreeMap<String, Vec<String>> {
        self.per_client_over("tcp", vip, count)
    }

    /// `count` connections (`tcp`) or new flows (`udp`) to port 80 of `vip` from every
    /// client address: the answers per client.
    fn per_client_over(&self, proto: &str, vip: &str, count: u32) -> BTreeMap<String, Vec<String>> {
        let sources = Lab::sources(!vip.contains(':'));
        let out = self.net.host("cl").sh(&format!(
            "python3 {} {vip} 80 {count} {proto} {}",
            self.script,
            sources.join(" ")
        ));
        out.lines()
            .map(|l| {
                let (src, got) = l.split_once(' ').expect("SRC ANSWERS");
                (
                    src.to_string(),
                    got.split(',').map(str::to_string).collect(),
                )
            })
            .collect()
    }

    /// Every client's one backend (asserting each got only one).
    fn stuck(&self, vip: &str, count: u32) -> BTreeMap<String, String> {
        self.per_client(vip, count)
            .into_iter()
            .map(|(src, got)| {
                assert!(
                    got.iter().all(|g| g == &got[0]) && got[0].starts_with('b'),
                    "{src} did not keep one backend: {got:?}"
                );
                (src, got[0].clone())
            })
            .collect()
    }
}

fn sticky_map(v4: bool) -> String {
    sh(&format!(
        "nft list map inet edgenetd-service sticky{}",
        if v4 { 4 } else { 6 }
    ))
}

fn service(vip: &str, affinity: &str, backends: &[&str]) -> String {
    let list: Vec<String> = backends.iter().map(|b| format!("\"{b}\"")).collect();
    format!(
        "[[service]]\nname = \"{}\"\naddress = \"{vip}\"\nport = 80\nbackends = [{}]\n{affinity}\n",
        vip.replace([':', '.'], "-"),
        list.join(", ")
    )
}

const STICKY: &str = "affinity = \"sticky\"\naffinity_timeout = \"60s\"";
const SOURCE: &str = "affinity = \"source-ip\"";

netns_test! {
    fn sticky_clients_keep_their_backend_while_a_backend_is_added_and_source_ip_clients_move() {
        let mut t = Lab::new();
        let two = ["10.0.1.2:8080", "10.0.2.2:8080"];
        let three = ["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"];
        t.sync(&format!("{}{}", service("10.96.0.10", STICKY, &two), service("10.96.0.11", SOURCE, &two)));
        let sticky_before = t.stuck("10.96.0.10", 3);
        let source_before = t.stuck("10.96.0.11", 3);
        let used: std::collections::BTreeSet<&String> = sticky_before.values().collect();
        assert_eq!(used.len(), 2, "new clients are dealt over both backends: {sticky_before:?}");
        let map = sticky_map(true);
        for src in Lab::sources(true) {
            assert!(map.contains(&format!("{src} . 10.96.0.10 . tcp . 80 timeout 1m")), "{src} not remembered:\n{map}");
        }
        assert!(map.contains("expires"), "entries carry a timeout:\n{map}");
        t.sync(&format!("{}{}", service("10.96.0.10", STICKY, &three), service("10.96.0.11", SOURCE, &three)));
        let sticky_after = t.stuck("10.96.0.10", 5);
        assert_eq!(sticky_after, sticky_before, "a sticky client moved when a backend was added");
        let source_after = t.stuck("10.96.0.11", 3);
        let moved = source_before.iter().filter(|(s, b)| source_after[*s] != **b).count();
        eprintln!("source-ip clients moved by the added backend: {moved} of {CLIENTS}");
        assert!(moved > 0, "source-ip re-deals slots, so some clients move: {source_after:?}");
    }
}

netns_test! {
    fn a_remembered_client_is_forgotten_after_the_timeout() {
        let mut t = Lab::new();
        let two = ["10.0.1.2:8080", "10.0.2.2:8080"];
        t.sync(&service("10.96.0.10", "affinity = \"sticky\"\naffinity_timeout = \"2s\"", &two));
        t.stuck("10.96.0.10", 2);
        let map = sticky_map(true);
        assert!(map.contains("192.168.10.100 . 10.96.0.10 . tcp . 80 timeout 2s expires"), "{map}");
        std::thread::sleep(Duration::from_millis(3500));
        let map = sticky_map(true);
        assert!(!map.contains("192.168.10.100 ."), "still remembered after the timeout:\n{map}");
        // Dealt anew (and remembered again).
        t.stuck("10.96.0.10", 2);
        assert!(sticky_map(true).contains("192.168.10.100 . 10.96.0.10 . tcp . 80 timeout 2s"));
    }
}

netns_test! {
    fn drained_and_removed_backends_get_no_new_connections_from_clients_stuck_to_them() {
        let mut t = Lab::new();
        let all = ["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"];
        t.sync(&service("10.96.0.10", STICKY, &all));
        let before = t.stuck("10.96.0.10", 2);
        assert!(before.values().any(|b| b == "b1"), "nobody on b1: {before:?}");
        // b1 drains (weight 0): its clients are forgotten and dealt anew; the others stay.
        let drained = STICKY.to_string();
        let cfg = format!(
            "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\n{drained}\nbackends = [{{ address = \"10.0.1.2:8080\", weight = 0 }}, \"10.0.2.2:8080\", \"10.0.3.2:8080\"]\n"
        );
        t.sync(&cfg);
        assert!(!sticky_map(true).contains(": 10.0.1.2 . 8080"), "b1 still remembered:\n{}", sticky_map(true));
        let after = t.stuck("10.96.0.10", 3);
        for (src, b) in &before {
            assert_ne!(after[src], "b1", "{src} went to the drained backend");
            if b != "b1" {
                assert_eq!(&after[src], b, "{src} moved though its backend stayed");
            }
        }
        // b2 is removed: the same.
        t.sync(&service("10.96.0.10", STICKY, &["10.0.3.2:8080"]));
        assert!(!sticky_map(true).contains(": 10.0.2.2 . 8080"), "b2 still remembered");
        let last = t.stuck("10.96.0.10", 2);
        assert!(last.values().all(|b| b == "b3"), "{last:?}");
    }
}

netns_test! {
    fn a_full_compare_keeps_remembered_clients_and_counts_no_drift() {
        let mut t = Lab::new();
        let two = ["10.0.1.2:8080", "10.0.2.2:8080"];
        let cfg = service("10.96.0.10", STICKY, &two);
        t.sync(&cfg);
        let before = t.stuck("10.96.0.10", 2);
        // A foreign commit makes the next sync compare everything with the kernel.
        sh("nft add table inet other");
        let r = t.sync(&cfg);
        assert_eq!(r.drift_repairs, 0, "{r:?}");
        assert!(r.summary.contains("full compare"), "{r:?}");
        assert_eq!(t.stuck("10.96.0.10", 2), before);
        // A remembered client pointing at a backend the service does not have (written by
        // hand) is forgotten by the full compare.
        sh("nft add element inet edgenetd-service sticky4 '{ 192.168.10.2 . 10.96.0.10 . tcp . 80 timeout 1m : 10.0.3.2 . 8080 }'");
        let r = t.sync(&cfg);
        assert!(r.summary.contains("full compare"), "{r:?}");
        assert!(!sticky_map(true).contains("192.168.10.2 ."), "{}", sticky_map(true));
        assert!(sticky_map(true).contains("192.168.10.100 ."));
    }
}

netns_test! {
    fn ipv6_sticky_clients_keep_their_backend_while_a_backend_is_added() {
        let mut t = Lab::new();
        let two = ["[fd01::2]:8080", "[fd02::2]:8080"];
        let three = ["[fd01::2]:8080", "[fd02::2]:8080", "[fd03::2]:8080"];
        t.sync(&service("fd96::10", STICKY, &two));
        let before = t.stuck("fd96::10", 3);
        let map = sticky_map(false);
        assert!(map.contains("fd10::100 . fd96::10 . tcp . 80 timeout 1m"), "{map}");
        t.sync(&service("fd96::10", STICKY, &three));
        assert_eq!(t.stuck("fd96::10", 4), before);
        t.sync(&service("fd96::10", STICKY, &["[fd03::2]:8080"]));
        assert!(t.stuck("fd96::10", 2).values().all(|b| b == "b3"));
    }
}

netns_test! {
    fn recorder_chains_follow_the_distinct_timeouts_and_plan_shows_the_sticky_mode() {
        let mut t = Lab::new();
        let b = ["10.0.1.2:8080"];
        let a = service("10.96.0.10", STICKY, &b);
        let c = service("10.96.0.11", "affinity = \"sticky\"", &b);
        // `plan` names the mode and shows the recorder of each timeout.
        let text = smol::block_on(service::plan(&load(&format!("{a}{c}")))).unwrap();
        assert!(text.contains("sticky 60s, else random over 1 slot: 10.0.1.2:8080×1"), "{text}");
        assert!(text.contains("update @sticky4 { ip saddr . ct original ip daddr . meta l4proto . ct original proto-dst timeout 10800s : ip daddr . th dport }"), "{text}");
        let part = &text[text.find("# nft begin:").unwrap()..];
        let dir = ScratchDir::with_files("sticky-plan", &[("plan.nft", part)]);
        let (ok, _, err) = sh_status(&format!("nft -c -f {}", dir.join("plan.nft").display()));
        assert!(ok, "nft refuses the plan: {err}");
        t.sync(&format!("{a}{c}"));
        let chains = sh("nft list table inet edgenetd-service");
        assert!(chains.contains("chain sticky_rec_60s_4 ") && chains.contains("chain sticky_rec_10800s_4 "), "{chains}");
        assert!(chains.contains("chain sticky_record_pre "), "{chains}");
        let before = t.stuck("10.96.0.10", 1);
        let text = smol::block_on(service::plan(&load(&a.replace("60s", "1h")))).unwrap();
        assert!(
            text.contains("~ service 10-96-0-10 10.96.0.10:80/tcp: delete 1, add 1 elements (now sticky 3600s, else random over 1 slot"),
            "{text}"
        );
        // One timeout left: its chain goes, the other service's clients stay remembered.
        let r = t.sync(&a);
        assert_eq!(r.changes, 4, "only the removed service's one slot, verdict, recorder and its address's `owned` element: {r:?}");
        let chains = sh("nft list table inet edgenetd-service");
        assert!(!chains.contains("chain sticky_rec_10800s_4 "), "{chains}");
        assert!(sticky_map(true).contains("192.168.10.100 . 10.96.0.10"));
        assert_eq!(t.stuck("10.96.0.10", 1), before);
        // No sticky service: no recorder hook at all.
        t.sync(&service("10.96.0.10", "", &b));
        let chains = sh("nft list table inet edgenetd-service");
        assert!(!chains.contains("chain sticky_record"), "{chains}");
    }
}

/// The table's handle (global, so a replaced table gets a new one) and the handles of the
/// fence rules, which no service change touches.
fn handles(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.starts_with("table ") || l.contains("comment \"fence4: "))
        .map(|l| {
            l.rsplit_once("# handle ")
                .expect("listed with -a")
                .1
                .to_string()
        })
        .collect()
}

netns_test! {
    fn dispatch_chains_come_and_go_with_a_services_slot_class_in_place() {
        let mut t = Lab::new();
        t.net.serve_named(t.net.host("b1"), "b4", 8081);
        t.net.serve_named(t.net.host("b2"), "b5", 8081);
        let three = ["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"];
        let five = ["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080", "10.0.1.2:8081", "10.0.2.2:8081"];
        // A sticky service of another VIP: its remembered clients would go with a rewritten table.
        let other = service("10.96.0.11", STICKY, &["10.0.3.2:8080"]);
        let table = || sh("nft -a list table inet edgenetd-service");
        let answers = |t: &Lab| -> std::collections::BTreeSet<String> {
            t.per_client("10.96.0.10", 10).into_values().flatten().collect()
        };
        t.sync(&format!("{other}{}", service("10.96.0.10", "", &three)));
        t.stuck("10.96.0.11", 1);
        let first = table();
        assert!(first.contains("chain random3_4 ") && first.contains("chain sticky1_4 "), "{first}");
        for absent in ["chain random5_4 ", "chain random3_6 ", "chain irandom", "chain source", "chain sticky3_4 "] {
            assert!(!first.contains(absent), "{absent}: {first}");
        }
        assert_eq!(answers(&t), ["b1", "b2", "b3"].map(String::from).into());
        let r = t.sync(&format!("{other}{}", service("10.96.0.10", "", &five)));
        let grown = table();
        assert!(grown.contains("chain random5_4 ") && !grown.contains("chain random3_4 "), "{grown}");
        assert_eq!(handles(&grown), handles(&first), "the table was rewritten: {r:?}");
        assert_eq!(answers(&t), ["b1", "b2", "b3", "b4", "b5"].map(String::from).into());
        t.sync(&format!("{other}{}", service("10.96.0.10", "", &three)));
        let back = table();
        assert!(back.contains("chain random3_4 ") && !back.contains("chain random5_4 "), "{back}");
        assert_eq!(handles(&back), handles(&first));
        assert_eq!(answers(&t), ["b1", "b2", "b3"].map(String::from).into());
        assert!(sticky_map(true).contains("192.168.10.100 . 10.96.0.11"), "{}", sticky_map(true));
    }
}

netns_test! {
    fn clients_stuck_to_a_backend_that_fails_its_health_check_are_dealt_anew() {
        let mut t = Lab::new();
        let toml = format!(
            "{}[service.health]\ncheck = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n",
            service("10.96.0.10", STICKY, &["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"])
        );
        t.sync(&toml);
        let before = t.stuck("10.96.0.10", 2);
        assert!(before.values().any(|b| b == "b1"), "nobody on b1: {before:?}");
        t.net.stop(t.servers[0]);
        wait_until("b1 to be detected down", Duration::from_secs(5), || {
            !t.ctrl.controller.down_backends().is_empty()
        });
        t.sync(&toml);
        assert!(!sticky_map(true).contains(": 10.0.1.2 . 8080"), "{}", sticky_map(true));
        // Every client is answered (none sent to the dead backend), the others stay put.
        let after = t.stuck("10.96.0.10", 2);
        for (src, b) in &before {
            if b != "b1" {
                assert_eq!(&after[src], b, "{src} moved though its backend stayed up");
            }
        }
    }
}

netns_test! {
    fn udp_flows_of_a_sticky_service_keep_their_backend_while_a_backend_is_added() {
        let mut t = Lab::new();
        let cfg = |backends: &[&str]| service("10.96.0.53", STICKY, backends).replace("port = 80\n", "port = 80\nprotocol = \"udp\"\n");
        t.sync(&cfg(&["10.0.1.2:8080", "10.0.2.2:8080"]));
        let one = |got: Vec<String>| {
            assert!(got.iter().all(|g| g == &got[0]) && got[0].starts_with('b'), "{got:?}");
            got[0].clone()
        };
        let before: BTreeMap<String, String> = t
            .per_client_over("udp", "10.96.0.53", 3)
            .into_iter()
            .map(|(s, g)| (s, one(g)))
            .collect();
        assert!(sticky_map(true).contains("192.168.10.100 . 10.96.0.53 . udp . 80 timeout 1m"), "{}", sticky_map(true));
        t.sync(&cfg(&["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"]));
        let after: BTreeMap<String, String> = t
            .per_client_over("udp", "10.96.0.53", 3)
            .into_iter()
            .map(|(s, g)| (s, one(g)))
            .collect();
        assert_eq!(after, before);
    }
}

netns_test! {
    fn a_restarted_controller_adopts_a_sticky_table_without_writes_and_keeps_its_clients() {
        let mut t = Lab::new();
        let cfg = format!(
            "{}{}",
            service("10.96.0.10", STICKY, &["10.0.1.2:8080", "10.0.2.2:8080"]),
            service("fd96::10", "affinity = \"sticky\"", &["[fd01::2]:8080"])
        );
        t.sync(&cfg);
        let before = t.stuck("10.96.0.10", 2);
        let listed = sh("nft list table inet edgenetd-service");
        // A new process: nothing known, the full compare adopts what is there.
        t.ctrl = Driver::service();
        let r = t.sync(&cfg);
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        assert_eq!(t.ctrl.controller.last_writes(), 0, "{r:?}");
        assert_eq!(t.stuck("10.96.0.10", 2), before);
        let now = sh("nft list table inet edgenetd-service");
        assert_eq!(
            now.lines().filter(|l| l.contains("chain ")).collect::<Vec<_>>(),
            listed.lines().filter(|l| l.contains("chain ")).collect::<Vec<_>>()
        );
    }
}
