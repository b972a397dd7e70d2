//! Golden tests of the pure planner: model, slots and the mirror diff.

use std::sync::Arc;

use crate::config::load_str;
use crate::dataplane::nft::ir::{ElemKey, Element, Value, Verdict};

use super::layout::SetId;
use super::model::{self, Model};
use super::plan::{Delta, Mirror};

fn model_of(toml: &str) -> Model {
    let state = load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"));
    model::build(&state.services)
}

fn show_value(v: &Value) -> String {
    match v {
        Value::Ipv4(a) => a.to_string(),
        Value::Ipv6(a) => a.to_string(),
        Value::Port(p) => p.to_string(),
        Value::Proto(6) => "tcp".into(),
        Value::Proto(17) => "udp".into(),
        Value::Mark(m) => m.to_string(),
        Value::Verdict(Verdict::Goto(c)) => format!("goto {c}"),
        Value::Verdict(Verdict::Drop) => "drop".into(),
        Value::Concat(parts) => parts.iter().map(show_value).collect::<Vec<_>>().join(" . "),
        other => format!("{other:?}"),
    }
}

fn show(set: SetId, e: &Element) -> String {
    let k = match &e.key {
        ElemKey::Value(k) => k,
        ElemKey::Prefix(n) => return format!("{} {n}", set.name()),
        ElemKey::Range(a, b) => {
            return format!("{} {}-{}", set.name(), show_value(a), show_value(b));
        }
    };
    match &e.data {
        Some(d) => format!("{} {{ {} : {} }}", set.name(), show_value(k), show_value(d)),
        None => format!("{} {{ {} }}", set.name(), show_value(k)),
    }
}

/// The delta as lines: `- set { key }` and `+ set { key : data }`.
fn lines(d: &Delta) -> Vec<String> {
    let mut out = Vec::new();
    for c in d.services.iter().chain(std::iter::once(&d.shared)) {
        if !c.summary.is_empty() {
            out.push(c.summary.clone());
        }
        out.extend(c.deletes.iter().map(|(s, e)| format!("- {}", show(*s, e))));
        out.extend(c.adds.iter().map(|(s, e)| format!("+ {}", show(*s, e))));
    }
    out
}

fn mirror(m: &Model) -> Mirror {
    let mut mirror = Mirror::default();
    let d = mirror.diff(m);
    mirror.commit(m.clone(), &d);
    mirror
}

const WEB: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.5:8080", "10.0.1.6:8080"]
"#;

#[test]
fn a_new_service_is_one_verdict_and_its_slots() {
    let d = Mirror::default().diff(&model_of(WEB));
    let mut want = vec![
        "+ service web 10.96.0.10:80/tcp: random over 2 slots: 10.0.1.5:8080×1 10.0.1.6:8080×1"
            .to_string(),
        "+ services4 { 10.96.0.10 . tcp . 80 : goto random2_4 }".to_string(),
    ];
    for i in 0..2 {
        want.push(format!(
            "+ backends4 {{ 10.96.0.10 . tcp . 80 . {i} : 10.0.1.{} . 8080 }}",
            5 + i % 2
        ));
    }
    want.extend([
        "~ shared: +3 -0 address elements; cluster [] service []".to_string(),
        "+ hairpin4 { 10.0.1.5 . 10.0.1.5 }".to_string(),
        "+ hairpin4 { 10.0.1.6 . 10.0.1.6 }".to_string(),
        "+ owned4 { 10.96.0.10 }".to_string(),
    ]);
    assert_eq!(lines(&d), want);
    assert_eq!(
        d.writes(),
        6,
        "one slot per equal backend, the verdict, the shared three"
    );
}

#[test]
fn an_unchanged_config_is_an_empty_delta() {
    let m = model_of(WEB);
    assert!(mirror(&m).diff(&m).is_empty());
}

#[test]
fn replacing_one_backend_touches_only_its_slots() {
    let two = format!(
        "{WEB}\n[[service]]\nname = \"dns\"\naddress = \"10.96.0.53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"10.0.2.5:53\", \"10.0.2.6:53\"]\n"
    );
    let before = model_of(&two);
    let after = model_of(&two.replace("10.0.2.6:53", "10.0.2.7:53"));
    let d = mirror(&before).diff(&after);
    let mut want = vec![
        "~ service dns 10.96.0.53:53/udp: random over 2 slots: 10.0.2.5:53×1 10.0.2.6:53×1 -> random over 2 slots: 10.0.2.5:53×1 10.0.2.7:53×1".to_string(),
        "- backends4 { 10.96.0.53 . udp . 53 . 1 }".to_string(),
        "+ backends4 { 10.96.0.53 . udp . 53 . 1 : 10.0.2.7 . 53 }".to_string(),
    ];
    want.extend([
        "~ shared: +1 -1 address elements; cluster [] service []".to_string(),
        "- hairpin4 { 10.0.2.6 . 10.0.2.6 }".to_string(),
        "+ hairpin4 { 10.0.2.7 . 10.0.2.7 }".to_string(),
    ]);
    assert_eq!(lines(&d), want);
    assert_eq!(
        d.udp_drained
            .iter()
            .map(|(k, b)| format!("{k} {b}"))
            .collect::<Vec<_>>(),
        vec!["10.96.0.53:53/udp 10.0.2.6:53"]
    );
}

#[test]
fn removing_every_backend_switches_to_the_empty_verdict() {
    let before = model_of(WEB);
    let after = model_of(&WEB.replace(
        "backends = [\"10.0.1.5:8080\", \"10.0.1.6:8080\"]",
        "backends = []\nwhen_empty = \"drop\"",
    ));
    let d = mirror(&before).diff(&after);
    let l = lines(&d);
    assert_eq!(l[1], "- services4 { 10.96.0.10 . tcp . 80 }");
    assert_eq!(l.iter().filter(|x| x.starts_with("- backends4")).count(), 2);
    assert_eq!(l[4], "+ services4 { 10.96.0.10 . tcp . 80 : drop }");
    assert_eq!(
        l[5..],
        [
            "~ shared: +0 -2 address elements; cluster [] service []",
            "- hairpin4 { 10.0.1.5 . 10.0.1.5 }",
            "- hairpin4 { 10.0.1.6 . 10.0.1.6 }"
        ],
        "the address stays owned"
    );
    assert!(d.udp_drained.is_empty(), "TCP drains on its own");
}

#[test]
fn a_removed_service_deletes_all_its_elements_and_nothing_else() {
    let two = format!(
        "{WEB}\n[[service]]\nname = \"v6\"\naddress = \"fd96::1\"\nport = 443\nbackends = [\"[fd01::5]:443\"]\naffinity = \"source-ip\"\n"
    );
    let d = mirror(&model_of(&two)).diff(&model_of(WEB));
    let l = lines(&d);
    assert_eq!(
        l[0],
        "- service v6 [fd96::1]:443/tcp (was source-ip over 1 slot: [fd01::5]:443×1)"
    );
    assert_eq!(l[1], "- services6 { fd96::1 . tcp . 443 }");
    assert_eq!(l.len(), 2 + 1 + 3);
    assert_eq!(l[2], "- backends6 { fd96::1 . tcp . 443 . 0 }");
    assert_eq!(
        l[4..],
        ["- hairpin6 { fd01::5 . fd01::5 }", "- owned6 { fd96::1 }"]
    );
}

#[test]
fn elements_shared_by_the_entries_of_one_address_are_reference_counted() {
    let svc = |name: &str, port: u16| {
        format!(
            "[[service]]\nname = \"{name}\"\naddress = \"10.96.0.1\"\nport = {port}\nbackends = [\"10.0.1.5:8080\"]\nmasquerade = true\n"
        )
    };
    let both = model_of(&format!("{}{}", svc("a", 80), svc("b", 81)));
    let one = model_of(&svc("a", 80));
    let none = model_of("");
    let d = Mirror::default().diff(&both);
    let l = lines(&d);
    assert_eq!(
        l[l.len() - 2..],
        [
            "+ hairpin4 { 10.0.1.5 . 10.0.1.5 }".to_string(),
            "+ owned4 { 10.96.0.1 }".to_string()
        ],
        "{l:#?}"
    );
    assert_eq!(d.shared.adds.len(), 2, "one of each for two services");
    // Masquerade is the address's own element, one per entry: nothing shared.
    assert!(l.contains(&"+ masqvips4 { 10.96.0.1 . tcp . 80 }".to_string()));
    assert!(l.contains(&"+ masqvips4 { 10.96.0.1 . tcp . 81 }".to_string()));
    let m = mirror(&both);
    let d = m.diff(&one);
    assert!(d.shared.adds.is_empty() && d.shared.deletes.is_empty());
    let mut m2 = m.clone();
    m2.commit(one.clone(), &d);
    let d = m2.diff(&none);
    let l = lines(&d);
    assert_eq!(
        l[l.len() - 2..],
        [
            "- hairpin4 { 10.0.1.5 . 10.0.1.5 }".to_string(),
            "- owned4 { 10.96.0.1 }".to_string()
        ]
    );
}

#[test]
fn affinity_and_slot_class_pick_the_dispatch_chain() {
    let m = model_of(
        r#"
[[service]]
name = "sticky"
address = "10.96.0.12"
port = 80
affinity = "source-ip"
backends = ["10.0.1.2:80", "10.0.1.3:80", "10.0.1.4:80"]
"#,
    );
    let d = Mirror::default().diff(&m);
    assert_eq!(
        lines(&d)[1],
        "+ services4 { 10.96.0.12 . tcp . 80 : goto source3_4 }"
    );
    assert_eq!(
        d.writes(),
        4 + 3 + 1,
        "and a hairpin element per backend, the address"
    );
}

// ------------------------------------------------------------------ sticky affinity

const STICKY: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
affinity = "sticky"
affinity_timeout = "30s"
backends = ["10.0.1.5:8080", "10.0.1.6:8080"]
"#;

#[test]
fn a_sticky_service_dispatches_to_the_sticky_chain_and_names_its_recorder() {
    let d = Mirror::default().diff(&model_of(STICKY));
    let l = lines(&d);
    assert_eq!(
        l[0],
        "+ service web 10.96.0.10:80/tcp: sticky 30s, else random over 2 slots: 10.0.1.5:8080×1 10.0.1.6:8080×1"
    );
    assert_eq!(
        l[1],
        "+ services4 { 10.96.0.10 . tcp . 80 : goto sticky2_4 }"
    );
    assert_eq!(
        l[2],
        "+ stickyvips4 { 10.96.0.10 . tcp . 80 : goto sticky_rec_30s_4 }"
    );
    assert_eq!(d.writes(), 4 + 3);
    assert!(d.sticky_lost.is_empty());
}

#[test]
fn adding_a_backend_to_a_sticky_service_forgets_no_client() {
    let before = model_of(STICKY);
    let after = model_of(&STICKY.replace(
        "\"10.0.1.6:8080\"]",
        "\"10.0.1.6:8080\", \"10.0.1.7:8080\"]",
    ));
    let d = mirror(&before).diff(&after);
    assert!(d.sticky_lost.is_empty(), "{:?}", d.sticky_lost);
    assert!(
        !lines(&d).iter().any(|l| l.contains("stickyvips")),
        "the recorder element stays: {:?}",
        lines(&d)
    );
}

#[test]
fn a_sticky_backend_removed_drained_or_the_mode_dropped_is_to_be_forgotten() {
    let before = model_of(STICKY);
    let lost = |toml: &str| -> Vec<String> {
        mirror(&before)
            .diff(&model_of(toml))
            .sticky_lost
            .iter()
            .map(|(k, b)| format!("{k} {b}"))
            .collect()
    };
    assert_eq!(
        lost(&STICKY.replace(", \"10.0.1.6:8080\"", "")),
        ["10.96.0.10:80/tcp 10.0.1.6:8080"]
    );
    assert_eq!(
        lost(&STICKY.replace(
            "\"10.0.1.6:8080\"",
            "{ address = \"10.0.1.6:8080\", weight = 0 }"
        )),
        ["10.96.0.10:80/tcp 10.0.1.6:8080"]
    );
    let none = STICKY.replace("affinity = \"sticky\"\naffinity_timeout = \"30s\"\n", "");
    assert_eq!(
        lost(&none),
        [
            "10.96.0.10:80/tcp 10.0.1.5:8080",
            "10.96.0.10:80/tcp 10.0.1.6:8080"
        ]
    );
    let d = mirror(&before).diff(&model_of(&none));
    assert!(
        lines(&d).contains(&"- stickyvips4 { 10.96.0.10 . tcp . 80 }".to_string()),
        "{:?}",
        lines(&d)
    );
    // Another timeout: the same backends stay remembered, the recorder element changes.
    let d = mirror(&before).diff(&model_of(&STICKY.replace("30s", "1h")));
    assert!(d.sticky_lost.is_empty());
    assert!(lines(&d).contains(
        &"+ stickyvips4 { 10.96.0.10 . tcp . 80 : goto sticky_rec_3600s_4 }".to_string()
    ));
}

#[test]
fn the_skeleton_grows_with_distinct_timeouts_not_with_services() {
    use super::layout::{Demand, OnDemand, parse_recorder_chain, recorder_chain, skeleton};
    let mut toml = String::new();
    for i in 0..50 {
        toml.push_str(&format!(
            "[[service]]\nname = \"s{i}\"\naddress = \"10.96.1.{i}\"\nport = 80\naffinity = \"sticky\"\naffinity_timeout = \"{}s\"\nbackends = [\"10.0.1.5:80\"]\n",
            if i % 2 == 0 { 10 } else { 20 }
        ));
    }
    toml.push_str("[[service]]\nname = \"v6\"\naddress = \"fd96::1\"\nport = 80\naffinity = \"sticky\"\nbackends = [\"[fd01::5]:80\"]\n");
    let recorders = model::recorders(&model_of(&toml));
    assert_eq!(
        recorders.iter().copied().collect::<Vec<_>>(),
        [(10, true), (20, true), (10800, false)]
    );
    let demand = model::on_demand(&model_of(&toml));
    let dispatch: Demand = demand
        .iter()
        .filter(|d| matches!(d, OnDemand::Dispatch { .. }))
        .copied()
        .collect();
    let plain = skeleton("t", &dispatch);
    let sticky = skeleton("t", &demand);
    // Two base chains (prerouting, output) and one chain per (timeout, family); a rule per
    // protocol in each base chain per family, and in each recorder chain.
    let protocols = crate::config::service::Protocol::ALL.len();
    assert_eq!(sticky.chains.len(), plain.chains.len() + 2 + 3);
    assert_eq!(
        sticky.rules.len(),
        plain.rules.len() + 2 * 2 * protocols + 3 * protocols
    );
    assert!(
        !plain
            .chains
            .iter()
            .any(|c| c.base.is_some_and(|b| b.priority == -99))
    );
    for (t, v4) in recorders {
        assert_eq!(parse_recorder_chain(&recorder_chain(t, v4)), Some((t, v4)));
    }
    assert_eq!(parse_recorder_chain("sticky_rec_010s_4"), None);
    assert_eq!(parse_recorder_chain("sticky16_4"), None);
    for d in &demand {
        assert_eq!(OnDemand::parse(&d.chain()), Some(*d));
    }
}

#[test]
fn the_example_config_plans_only_the_dispatch_chains_its_services_use() {
    use super::layout::OnDemand;
    let m = model_of(include_str!("../../../config/edgenetd.toml"));
    let table = super::elements::full_table("t", &m, None);
    let dispatch: Vec<&str> = table
        .chains
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| OnDemand::parse(n).is_some())
        .collect();
    // web: weights 1 and 2 over 3 slots; dns: 2 slots; both random, IPv4, no internal set.
    assert_eq!(dispatch, ["random2_4", "random3_4"]);
    let text = super::elements::render_text(&table);
    // 118 KB with every one of the 444 dispatch chains, 38 KB before there were 37 classes.
    assert!(text.len() < 40_000, "{} bytes", text.len());
    assert!(!text.contains("chain random4_4"), "{text}");
}

#[test]
fn a_sticky_service_needs_the_random_chain_of_its_class_and_internal_sets_their_own() {
    use super::layout::OnDemand;
    let m = model_of(STICKY);
    let names: Vec<String> = model::on_demand(&m).iter().map(|d| d.chain()).collect();
    assert_eq!(names, ["random2_4", "sticky2_4", "sticky_rec_30s_4"]);
    assert_eq!(
        OnDemand::parse("irandom1024_6")
            .map(|d| d.chain())
            .as_deref(),
        Some("irandom1024_6")
    );
    assert_eq!(OnDemand::parse("random33_4"), None, "not a slot class");
    assert_eq!(OnDemand::parse("random03_4"), None);
    assert_eq!(OnDemand::parse("services"), None);
    assert_eq!(OnDemand::parse("sticky_record_pre"), None);
}

#[test]
fn remembered_clients_are_read_from_the_sticky_map_bytes() {
    use super::layout::remembered;
    let key = [192, 168, 10, 2, 10, 96, 0, 10, 6, 0, 0, 0, 0, 80, 0, 0];
    let data = [10, 0, 1, 5, 0x1f, 0x90, 0, 0];
    let r = remembered(true, &key, &data).unwrap();
    assert_eq!(
        (
            r.client.to_string(),
            r.vip.to_string(),
            r.proto,
            r.port,
            r.backend.to_string()
        ),
        (
            "192.168.10.2".into(),
            "10.96.0.10".into(),
            6,
            80,
            "10.0.1.5:8080".into()
        )
    );
    assert_eq!(
        crate::dataplane::nft::encode::encode(match &r.key().key {
            ElemKey::Value(v) => v,
            _ => unreachable!(),
        })
        .unwrap(),
        key
    );
    assert!(remembered(true, &key[..12], &data).is_none());
    assert!(remembered(false, &key, &data).is_none());
}

// ------------------------------------------------------------------ paths (issue 20)

fn model_with(toml: &str, edit: impl FnOnce(&mut crate::config::service::ServicesConfig)) -> Model {
    let mut state = load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"));
    edit(&mut state.services);
    model::build(&state.services)
}

/// A Kubernetes Service port's entries: cluster IP 10.96.0.10:80 (off-cluster masquerade)
/// and node port 192.168.1.1:30080 (masquerade), one name, one backend.
fn one_port() -> Model {
    let toml = format!(
        "{WEB}[[service]]\nname = \"np\"\naddress = \"192.168.1.1\"\nport = 30080\nbackends = [\"10.0.1.5:8080\"]\n"
    )
    .replace(", \"10.0.1.6:8080\"", "");
    model_with(&toml, |c| {
        use crate::config::service::Masquerade;
        c.cluster_cidrs = vec!["10.0.0.0/16".parse().unwrap()];
        for s in c.services.iter_mut().map(Arc::make_mut) {
            s.name = "k8s:ns/web:80".into();
            s.masquerade = if s.port == 80 {
                Masquerade::OffCluster
            } else {
                Masquerade::Always
            };
        }
    })
}

#[test]
fn masquerade_is_an_element_of_the_address_not_of_its_backend() {
    let d = Mirror::default().diff(&one_port());
    let l = lines(&d);
    assert!(
        l.contains(&"+ offcluster4 { 10.96.0.10 . tcp . 80 }".to_string()),
        "{l:#?}"
    );
    assert!(
        l.contains(&"+ masqvips4 { 192.168.1.1 . tcp . 30080 }".to_string()),
        "{l:#?}"
    );
    assert!(
        !l.iter().any(|x| x.contains("masqvips4 { 10.96.0.10")),
        "{l:#?}"
    );
    // One hairpin element for the backend both addresses share, one owned per address.
    assert_eq!(l.iter().filter(|x| x.starts_with("+ hairpin4")).count(), 1);
    assert_eq!(l.iter().filter(|x| x.starts_with("+ owned4")).count(), 2);
    assert!(l.contains(&"+ cluster4 10.0.0.0/16".to_string()), "{l:#?}");
    // Both entries of the one name are planned.
    assert_eq!(d.services.len(), 2);
    assert!(d.services.iter().all(|c| c.name == "k8s:ns/web:80"));
}

#[test]
fn off_cluster_masquerade_without_cluster_prefixes_masquerades_nobody() {
    let m = model_with(WEB, |c| {
        Arc::make_mut(&mut c.services[0]).masquerade =
            crate::config::service::Masquerade::OffCluster;
        // A prefix of the other family is no detector for this one.
        c.cluster_cidrs = vec!["fd00::/8".parse().unwrap()];
    });
    let l = lines(&Mirror::default().diff(&m));
    assert!(
        !l.iter()
            .any(|x| x.contains("offcluster4") || x.contains("masqvips4")),
        "{l:#?}"
    );
}

#[test]
fn internal_backends_are_a_second_verdict_and_slots_from_65536() {
    let m = model_with(&WEB.replace(", \"10.0.1.6:8080\"", ""), |c| {
        let s = Arc::make_mut(&mut c.services[0]);
        s.internal_backends = Some(vec![
            crate::config::service::Backend {
                address: "10.0.1.5:8080".parse().unwrap(),
                weight: 1,
            },
            crate::config::service::Backend {
                address: "10.0.2.5:8080".parse().unwrap(),
                weight: 1,
            },
        ]);
        s.backends.clear();
        s.when_empty = crate::config::service::WhenEmpty::Drop;
    });
    let d = Mirror::default().diff(&m);
    let l = lines(&d);
    assert_eq!(
        l[1], "+ services4 { 10.96.0.10 . tcp . 80 : drop }",
        "{l:#?}"
    );
    assert_eq!(l[2], "+ shortcut4 { 10.96.0.10 . tcp . 80 }");
    assert_eq!(
        l[3],
        "+ internal4 { 10.96.0.10 . tcp . 80 : goto irandom2_4 }"
    );
    assert_eq!(
        l[4],
        "+ backends4 { 10.96.0.10 . tcp . 80 . 65536 : 10.0.1.5 . 8080 }"
    );
    assert_eq!(l.iter().filter(|x| x.starts_with("+ backends4")).count(), 2);
    // Gaining a local endpoint touches the external verdict and slots only.
    let local = model_with(&WEB.replace(", \"10.0.1.6:8080\"", ""), |c| {
        let s = Arc::make_mut(&mut c.services[0]);
        s.internal_backends = Some(vec![
            crate::config::service::Backend {
                address: "10.0.1.5:8080".parse().unwrap(),
                weight: 1,
            },
            crate::config::service::Backend {
                address: "10.0.2.5:8080".parse().unwrap(),
                weight: 1,
            },
        ]);
        s.when_empty = crate::config::service::WhenEmpty::Drop;
    });
    let d = mirror(&m).diff(&local);
    let l = lines(&d);
    assert_eq!(l[1], "- services4 { 10.96.0.10 . tcp . 80 }", "{l:#?}");
    assert_eq!(
        l[2],
        "+ services4 { 10.96.0.10 . tcp . 80 : goto random1_4 }"
    );
    assert_eq!(l.len(), 3 + 1, "{l:#?}");
    assert!(
        l[3..]
            .iter()
            .all(|x| x.starts_with("+ backends4 { 10.96.0.10 . tcp . 80 . "))
    );
}

#[test]
fn source_ranges_are_a_fence_and_one_element_per_prefix() {
    let m = model_with(WEB, |c| {
        Arc::make_mut(&mut c.services[0]).source_ranges = [
            "192.0.2.0/24",
            "198.51.100.7/32",
            "2001:db8::/32",
            "192.0.2.128/25",
        ]
        .iter()
        .map(|r| r.parse().unwrap())
        .collect();
    });
    let l = lines(&Mirror::default().diff(&m));
    assert_eq!(
        l[1..4],
        [
            "+ services4 { 10.96.0.10 . tcp . 80 : goto random2_4 }".to_string(),
            "+ fenced4 { 10.96.0.10 . tcp . 80 }".to_string(),
            // The /24's network with its marker bit (the first host bit) set; the /25 inside it
            // and the IPv6 prefix are gone; the host as it is.
            "+ ranges4 { 192.0.2.128 . 10.96.0.10 . tcp . 80 }".to_string(),
        ],
        "{l:#?}"
    );
    assert_eq!(l[4], "+ hosts4 { 198.51.100.7 . 10.96.0.10 . tcp . 80 }");
}

#[test]
fn unserved_ports_and_owned_addresses_are_counted_per_address() {
    let two_ports = format!(
        "{WEB}[[service]]\nname = \"web-alt\"\naddress = \"10.96.0.10\"\nport = 8080\nbackends = [\"10.0.1.5:8080\"]\n"
    );
    let cfg = |c: &mut crate::config::service::ServicesConfig| {
        c.service_cidrs = vec![
            "10.96.0.0/12".parse().unwrap(),
            "10.96.0.0/16".parse().unwrap(),
        ];
        for s in c.services.iter_mut().map(Arc::make_mut) {
            s.reject_unserved_ports = true;
        }
    };
    let both = model_with(&two_ports, cfg);
    assert_eq!(
        both.service_cidrs.len(),
        1,
        "a prefix inside another is dropped"
    );
    let l = lines(&Mirror::default().diff(&both));
    assert_eq!(
        l.iter()
            .filter(|x| x.starts_with("+ unserved4 { 10.96.0.10 }"))
            .count(),
        1,
        "{l:#?}"
    );
    assert_eq!(
        l.iter()
            .filter(|x| x.starts_with("+ owned4 { 10.96.0.10 }"))
            .count(),
        1
    );
    assert!(
        l.contains(&"+ servicecidrs4 10.96.0.0/12".to_string()),
        "{l:#?}"
    );
    // One of the two ports goes: the address stays unserved-checked and owned.
    let one = model_with(WEB, cfg);
    let d = mirror(&both).diff(&one);
    assert!(
        d.shared.adds.is_empty() && d.shared.deletes.is_empty(),
        "{:#?}",
        lines(&d)
    );
    // The last one goes: both go, and the service CIDR stays.
    let d = mirror(&one).diff(&model_with("", cfg));
    let l = lines(&d);
    assert!(
        l.contains(&"- unserved4 { 10.96.0.10 }".to_string()),
        "{l:#?}"
    );
    assert!(l.contains(&"- owned4 { 10.96.0.10 }".to_string()), "{l:#?}");
    assert!(!l.iter().any(|x| x.contains("servicecidrs4")), "{l:#?}");
}

// ------------------------------------------------------------------ full compare (verify)

mod verify_tests {
    use super::*;
    use crate::dataplane::nft::{ElemInfo, raw_elements};

    use super::super::elements::full_table;
    use super::super::observe::{Verifier, verify};

    /// The kernel form of every element of `m`, set by set.
    fn kernel_of(m: &Model) -> Vec<Vec<ElemInfo>> {
        let t = full_table("t", m, None);
        t.sets
            .iter()
            .map(|s| raw_elements(s, &s.elements).unwrap())
            .collect()
    }

    fn two() -> Model {
        model_of(&format!(
            "{WEB}\n[[service]]\nname = \"dns\"\naddress = \"10.96.0.53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"10.0.2.5:53\"]\nmasquerade = true\n"
        ))
    }

    #[test]
    fn an_exact_kernel_needs_nothing() {
        let m = two();
        let f = verify(&kernel_of(&m), &m, Some(&mirror(&m)));
        assert!(f.strays.is_empty() && f.missing.is_empty(), "{f:?}");
        assert_eq!(f.drift, 0);
    }

    #[test]
    fn an_empty_kernel_misses_everything_and_counts_drift_only_when_believed_installed() {
        let m = two();
        let empty = vec![Vec::new(); SetId::ALL.len()];
        let f = verify(&empty, &m, None);
        // Verdict and slots of each, dns's masquerade; the two addresses, three hairpins.
        assert_eq!(f.missing.len(), 1 + 2 + 1 + 1 + 1 + 2 + 3);
        assert_eq!(f.drift, 0, "nothing was believed installed");
        let f = verify(&empty, &m, Some(&mirror(&m)));
        assert_eq!(f.drift, 11);
    }

    #[test]
    fn a_changed_slot_and_a_foreign_element_are_drift_once_each() {
        let m = two();
        let mut kernel = kernel_of(&m);
        let other = model_of(&WEB.replace("10.0.1.6:8080", "10.0.1.9:8080"));
        let changed = kernel_of(&other)[SetId::Backends4.index()][1].clone();
        let i = kernel[SetId::Backends4.index()]
            .iter()
            .position(|e| e.key == changed.key)
            .unwrap();
        kernel[SetId::Backends4.index()][i] = changed;
        let foreign = model_of(
            "[[service]]\nname = \"x\"\naddress = \"10.96.9.9\"\nport = 1\nbackends = []\n",
        );
        kernel[SetId::Services4.index()]
            .push(kernel_of(&foreign)[SetId::Services4.index()][0].clone());
        let f = verify(&kernel, &m, Some(&mirror(&m)));
        let l: Vec<String> = f
            .strays
            .iter()
            .map(|(s, e)| format!("- {}", show(*s, e)))
            .chain(f.missing.iter().map(|(s, e)| format!("+ {}", show(*s, e))))
            .collect();
        assert_eq!(
            l,
            vec![
                "- services4 { 10.96.9.9 . tcp . 1 }".to_string(),
                "- backends4 { 10.96.0.10 . tcp . 80 . 1 }".to_string(),
                "+ backends4 { 10.96.0.10 . tcp . 80 . 1 : 10.0.1.6 . 8080 }".to_string(),
            ]
        );
        assert_eq!(f.drift, 2);
    }

    #[test]
    fn a_config_change_is_work_not_drift() {
        let before = two();
        let after = model_of(&format!(
            "{}\n[[service]]\nname = \"dns\"\naddress = \"10.96.0.53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"10.0.2.5:53\"]\nmasquerade = true\n",
            WEB.replace("10.0.1.6:8080", "10.0.1.9:8080")
        ));
        let f = verify(&kernel_of(&before), &after, Some(&mirror(&before)));
        // One slot and the old backend's hairpin element each way.
        assert_eq!((f.strays.len(), f.missing.len(), f.drift), (2, 2, 0));
    }

    #[test]
    fn a_restarted_dump_forgets_what_it_had_seen() {
        let m = two();
        let kernel = kernel_of(&m);
        let mut v = Verifier::new(&m, None);
        for (set, elems) in SetId::ALL.iter().zip(&kernel) {
            for e in elems {
                v.feed(*set, e);
            }
        }
        v.restart(SetId::Backends4);
        let f = v.finish();
        assert_eq!(f.missing.len(), 3, "every IPv4 slot must be seen again");
    }

    /// Every kind of element: per-path masquerade, short-circuit, fence, shared, prefixes.
    fn everything() -> Model {
        model_with(
            &format!(
                "{WEB}[[service]]\nname = \"dns\"\naddress = \"fd96::53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"[fd01::5]:53\"]\n"
            ),
            |c| {
                use crate::config::service::{Backend, Masquerade};
                c.cluster_cidrs =
                    vec!["10.0.0.0/16".parse().unwrap(), "fd00::/12".parse().unwrap()];
                c.service_cidrs = vec![
                    "10.96.0.0/16".parse().unwrap(),
                    "fd96::/64".parse().unwrap(),
                ];
                let web = Arc::make_mut(&mut c.services[0]);
                web.masquerade = Masquerade::OffCluster;
                web.reject_unserved_ports = true;
                web.source_ranges = vec![
                    "192.0.2.0/24".parse().unwrap(),
                    "192.0.2.9/32".parse().unwrap(),
                ];
                let dns = Arc::make_mut(&mut c.services[1]);
                dns.internal_backends = Some(vec![Backend {
                    address: "[fd02::5]:53".parse().unwrap(),
                    weight: 1,
                }]);
                dns.masquerade = Masquerade::Always;
            },
        )
    }

    #[test]
    fn every_set_of_an_exact_kernel_is_recognized() {
        let m = everything();
        let f = verify(&kernel_of(&m), &m, Some(&mirror(&m)));
        assert!(f.strays.is_empty() && f.missing.is_empty(), "{f:#?}");
        assert_eq!(f.drift, 0);
    }

    #[test]
    fn a_hand_edited_prefix_set_and_a_lost_shared_element_are_repaired_as_drift() {
        let m = everything();
        let mut kernel = kernel_of(&m);
        kernel[SetId::ServiceCidrs4.index()] = kernel_of(&model_with("", |c| {
            c.service_cidrs = vec!["10.97.0.0/16".parse().unwrap()];
        }))[SetId::ServiceCidrs4.index()]
        .clone();
        kernel[SetId::Hairpin6.index()].clear();
        kernel[SetId::Internal6.index()].clear();
        let f = verify(&kernel, &m, Some(&mirror(&m)));
        let l: Vec<String> = f
            .strays
            .iter()
            .map(|(s, e)| format!("- {}", show(*s, e)))
            .chain(f.missing.iter().map(|(s, e)| format!("+ {}", show(*s, e))))
            .collect();
        assert_eq!(
            l,
            [
                "- servicecidrs4 10.97.0.0-10.97.255.255",
                "+ internal6 { fd96::53 . udp . 53 : goto irandom1_6 }",
                "+ hairpin6 { fd01::5 . fd01::5 }",
                "+ hairpin6 { fd02::5 . fd02::5 }",
                "+ servicecidrs4 10.96.0.0/16",
            ]
        );
        assert_eq!(f.drift, 4);
    }

    #[test]
    fn a_udp_backend_the_kernel_still_has_is_flushed_after_a_full_compare() {
        let m = everything();
        let gone = model_with(
            "[[service]]\nname = \"dns\"\naddress = \"fd96::53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"[fd01::7]:53\"]\n",
            |_| {},
        );
        // The kernel has m's slots; the desired dns service moved to another backend.
        let f = verify(&kernel_of(&m), &gone, None);
        let flushed: Vec<String> = f.udp_gone.iter().map(|(k, b)| format!("{k} {b}")).collect();
        assert_eq!(
            flushed,
            [
                "[fd96::53]:53/udp [fd01::5]:53",
                "[fd96::53]:53/udp [fd02::5]:53"
            ]
        );
    }
}

// ------------------------------------------------------------------ slots kept across changes

const FOUR: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
affinity = "source-ip"
backends = ["10.0.1.5:8080", "10.0.1.6:8080", "10.0.1.7:8080", "10.0.1.8:8080"]
"#;

fn model_after(toml: &str, previous: &Model) -> Model {
    let state = load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"));
    model::build_with(&state.services, &|_, _| true, Some(previous))
}

#[test]
fn four_equal_endpoints_are_four_slots_and_a_verdict() {
    let d = Mirror::default().diff(&model_of(FOUR));
    let own: usize = d.services.iter().map(|c| c.adds.len()).sum();
    assert_eq!(own, 5, "{:#?}", lines(&d));
}

/// Issue 24: replacing one of four endpoints dealt the slots again over the sorted
/// backends, rewriting most of them and moving the unchanged backends' clients.
#[test]
fn replacing_one_of_four_endpoints_rewrites_its_slot_only() {
    let before = model_of(FOUR);
    // 10.0.1.1 sorts first: a fresh deal shifts .5 and .6 by a slot.
    let toml = FOUR.replace("10.0.1.7:8080", "10.0.1.1:8080");
    let fresh = model_of(&toml);
    let fresh_writes = mirror(&before).diff(&fresh).services[0].adds.len();
    assert_eq!(
        fresh_writes, 3,
        "the old way: .5's and .6's slots moved too"
    );
    let after = model_after(&toml, &before);
    let d = mirror(&before).diff(&after);
    assert_eq!(
        lines(&d)[1..3],
        [
            "- backends4 { 10.96.0.10 . tcp . 80 . 2 }".to_string(),
            "+ backends4 { 10.96.0.10 . tcp . 80 . 2 : 10.0.1.1 . 8080 }".to_string(),
        ]
    );
    assert_eq!(d.services[0].deletes.len() + d.services[0].adds.len(), 2);
}

#[test]
fn internal_slots_keep_their_backends_too() {
    let with_internal = |backends: &[&str]| {
        let list: Vec<crate::config::service::Backend> = backends
            .iter()
            .map(|b| crate::config::service::Backend {
                address: b.parse().unwrap(),
                weight: 1,
            })
            .collect();
        move |c: &mut crate::config::service::ServicesConfig| {
            Arc::make_mut(&mut c.services[0]).internal_backends = Some(list.clone());
        }
    };
    let state = load_str(&[("edgenetd.toml", WEB)]).unwrap();
    let mut cfg = state.services.clone();
    with_internal(&["10.0.2.5:8080", "10.0.2.6:8080", "10.0.2.7:8080"])(&mut cfg);
    let before = model::build_with(&cfg, &|_, _| true, None);
    with_internal(&["10.0.2.1:8080", "10.0.2.6:8080", "10.0.2.7:8080"])(&mut cfg);
    let after = model::build_with(&cfg, &|_, _| true, Some(&before));
    let d = mirror(&before).diff(&after);
    assert_eq!(
        lines(&d)[1..3],
        [
            "- backends4 { 10.96.0.10 . tcp . 80 . 65536 }".to_string(),
            "+ backends4 { 10.96.0.10 . tcp . 80 . 65536 : 10.0.2.1 . 8080 }".to_string(),
        ]
    );
}
