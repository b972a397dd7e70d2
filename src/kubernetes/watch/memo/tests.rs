//! The memo against the full translation: over random Service, EndpointSlice and Node
//! changes, each update equals translating everything again, and an endpoint change
//! re-translates its Service alone.

use std::collections::BTreeMap;

use super::*;
use crate::kubernetes::objects::{
    Endpoint, EndpointConditions, EndpointPort, ObjectMeta, ServicePort, ServiceSpec,
};
use crate::kubernetes::translate::services::HEADLESS_LABEL;

/// A small deterministic generator (xorshift64*): the sequence is the same at every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
}

const NAMESPACES: &[&str] = &["a", "a-b"];
const NAMES: &[&str] = &["s0", "s1", "s2", "s3"];

fn meta(ns: &str, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: name.into(),
        namespace: ns.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ObjectMeta::default()
    }
}

fn service(rng: &mut Rng, ns: &str, name: &str) -> objects::Service {
    let ip = format!("10.96.{}.{}", rng.below(3), 1 + rng.below(200));
    let headless = rng.below(8) == 0;
    let local_lb = rng.below(3) == 0;
    objects::Service {
        metadata: meta(ns, name, &[]),
        spec: ServiceSpec {
            type_: Some(
                if local_lb {
                    "LoadBalancer"
                } else {
                    "ClusterIP"
                }
                .into(),
            ),
            cluster_ip: Some(if headless { "None".into() } else { ip.clone() }),
            cluster_ips: if headless { vec![] } else { vec![ip] },
            ports: vec![ServicePort {
                name: Some(rng.pick(&["http", "web"]).into()),
                protocol: Some("TCP".into()),
                port: 80,
                node_port: local_lb.then_some(30080),
            }],
            external_traffic_policy: local_lb.then(|| "Local".into()),
            health_check_node_port: local_lb.then_some(32000 + rng.below(100) as i32),
            ..ServiceSpec::default()
        },
        ..objects::Service::default()
    }
}

fn slice(rng: &mut Rng, ns: &str, name: &str) -> objects::EndpointSlice {
    let owner = rng.pick(NAMES);
    let mut labels = vec![(SERVICE_NAME_LABEL, owner)];
    if rng.below(10) == 0 {
        labels.push((HEADLESS_LABEL, ""));
    }
    if rng.below(12) == 0 {
        labels.clear();
    }
    let endpoints = (0..rng.below(4))
        .map(|_| Endpoint {
            addresses: vec![format!("10.244.0.{}", 1 + rng.below(20))],
            conditions: EndpointConditions {
                ready: Some(rng.below(4) != 0),
                ..EndpointConditions::default()
            },
            node_name: Some(rng.pick(&["me", "other"]).into()),
            ..Endpoint::default()
        })
        .collect();
    objects::EndpointSlice {
        metadata: meta(ns, name, &labels),
        address_type: "IPv4".into(),
        endpoints,
        ports: vec![EndpointPort {
            name: Some(rng.pick(&["http", "web"]).into()),
            protocol: Some("TCP".into()),
            port: Some(8080),
        }],
    }
}

/// Everything translated again, as the services part did before the memo.
fn full(
    svcs: &BTreeMap<ObjectKey, Box<objects::Service>>,
    slices: &BTreeMap<ObjectKey, Box<objects::EndpointSlice>>,
    node: ThisNode<'_>,
) -> Translation {
    let t = services::translate(
        svcs.values().map(|s| &**s),
        slices.values().map(|s| &**s),
        node,
    );
    Translation {
        services: t.services.into_iter().map(Arc::new).collect(),
        skipped: t.skipped,
        health_check_ports: health_ports::translate(
            svcs.values().map(|s| &**s),
            slices.values().map(|s| &**s),
            node.name,
        ),
    }
}

fn changed<'a, T>(now: &'a BTreeMap<ObjectKey, T>, changes: &'a Changes) -> Changed<'a, T> {
    Changed { now, changes }
}

fn keys(k: &[ObjectKey]) -> Changes {
    Changes::Keys(k.iter().cloned().collect())
}

#[test]
fn the_memo_equals_the_full_translation_over_random_changes() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut svcs: BTreeMap<ObjectKey, Box<objects::Service>> = BTreeMap::new();
    let mut slices: BTreeMap<ObjectKey, Box<objects::EndpointSlice>> = BTreeMap::new();
    let mut zone: Option<&str> = None;
    let mut addresses: Vec<IpAddr> = vec!["192.168.1.5".parse().unwrap()];
    let mut memo = ServicesMemo::default();
    let (mut partial, mut touched_alone) = (0, 0);
    for step in 0..3000 {
        let mut changed_svcs = Vec::new();
        let mut changed_slices = Vec::new();
        let mut all = false;
        let mut global = false;
        // A few changes per step (the pacer composes bursts), sometimes none.
        for _ in 0..rng.below(4) {
            let ns = rng.pick(NAMESPACES);
            match rng.below(10) {
                0..=1 => {
                    let key = (ns.to_string(), rng.pick(NAMES).to_string());
                    svcs.insert(key.clone(), Box::new(service(&mut rng, &key.0, &key.1)));
                    changed_svcs.push(key);
                }
                2 => {
                    let key = (ns.to_string(), rng.pick(NAMES).to_string());
                    svcs.remove(&key);
                    changed_svcs.push(key);
                }
                3..=6 => {
                    let key = (ns.to_string(), format!("e{}", rng.below(8)));
                    slices.insert(key.clone(), Box::new(slice(&mut rng, &key.0, &key.1)));
                    changed_slices.push(key);
                }
                7 => {
                    let key = (ns.to_string(), format!("e{}", rng.below(8)));
                    slices.remove(&key);
                    changed_slices.push(key);
                }
                8 => {
                    zone = [None, Some("z1"), Some("z2")][rng.below(3) as usize];
                    global = true;
                }
                _ => match rng.below(3) {
                    0 => {
                        addresses = vec!["192.168.1.5".parse().unwrap()];
                        global = true;
                    }
                    1 => {
                        addresses.push(format!("192.168.2.{}", rng.below(9)).parse().unwrap());
                        global = true;
                    }
                    _ => all = true,
                },
            }
        }
        let node = ThisNode {
            name: "me",
            zone,
            addresses: &addresses,
        };
        let (svc_changes, slice_changes) = match all {
            true => (Changes::All, keys(&changed_slices)),
            false => (keys(&changed_svcs), keys(&changed_slices)),
        };
        let before = memo.per.len();
        let got = memo.update(
            Changed {
                now: &svcs,
                changes: &svc_changes,
            },
            Changed {
                now: &slices,
                changes: &slice_changes,
            },
            node,
        );
        assert_eq!(got, full(&svcs, &slices, node), "step {step}");
        if memo.translated() < svcs.len() {
            partial += 1;
        }
        if changed_svcs.is_empty() && changed_slices.len() == 1 && !all && !global && before > 0 {
            assert!(
                memo.translated() <= 2,
                "step {step}: one slice touches its Service before and after, no more"
            );
            touched_alone += 1;
        }
    }
    assert!(
        partial > 1000,
        "the memo re-translated everything too often: {partial}"
    );
    assert!(
        touched_alone > 50,
        "too few lone slice changes: {touched_alone}"
    );
}

#[test]
fn an_endpoint_change_re_translates_its_service_alone() {
    let mut rng = Rng(7);
    let svcs: BTreeMap<ObjectKey, Box<objects::Service>> = (0..50)
        .map(|i| {
            let key = ("a".to_string(), format!("s{i}"));
            let mut s = service(&mut rng, &key.0, &key.1);
            s.spec.cluster_ip = Some(format!("10.96.1.{i}"));
            s.spec.cluster_ips = vec![format!("10.96.1.{i}")];
            (key, Box::new(s))
        })
        .collect();
    let mut slices: BTreeMap<ObjectKey, Box<objects::EndpointSlice>> = (0..50)
        .map(|i| {
            let key = ("a".to_string(), format!("s{i}-x"));
            let mut s = slice(&mut rng, &key.0, &key.1);
            s.metadata = meta("a", &key.1, &[(SERVICE_NAME_LABEL, &format!("s{i}"))]);
            (key, Box::new(s))
        })
        .collect();
    let node = ThisNode {
        name: "me",
        zone: None,
        addresses: &[],
    };
    let mut memo = ServicesMemo::default();
    memo.update(
        changed(&svcs, &Changes::All),
        changed(&slices, &Changes::All),
        node,
    );
    assert_eq!(memo.translated(), 50);
    let key = ("a".to_string(), "s7-x".to_string());
    slices.get_mut(&key).unwrap().endpoints[..].reverse();
    slices.get_mut(&key).unwrap().endpoints.push(Endpoint {
        addresses: vec!["10.244.9.9".into()],
        ..Endpoint::default()
    });
    let got = memo.update(
        changed(&svcs, &Changes::none()),
        changed(&slices, &keys(&[key])),
        node,
    );
    assert_eq!(memo.translated(), 1);
    assert_eq!(got, full(&svcs, &slices, node));
    let zone = ThisNode {
        zone: Some("z"),
        ..node
    };
    memo.update(
        changed(&svcs, &Changes::none()),
        changed(&slices, &Changes::none()),
        zone,
    );
    assert_eq!(
        memo.translated(),
        50,
        "a global input re-translates everything"
    );
}
