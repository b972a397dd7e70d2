//! The incremental build and plan against the full ones: over random service changes, the
//! memo's patch applied to the mirror's model equals `model::build_with`'s model, and the
//! delta of the patched keys alone equals the full diff.

use std::net::SocketAddr;

use super::*;
use crate::config::load_str;
use crate::config::service::{Backend, Masquerade};
use crate::controller::service::plan::Mirror;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn base() -> Service {
    let state = load_str(&[(
        "edgenetd.toml",
        r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.5:8080"]
"#,
    )])
    .unwrap_or_else(|e| panic!("{e}"));
    Service::clone(&state.services.services[0])
}

fn service(rng: &mut Rng, base: &Service, i: u64) -> Service {
    let mut s = base.clone();
    s.name = format!("s{i}");
    s.address = format!("10.96.0.{i}").parse().unwrap();
    s.backends = (0..rng.below(5))
        .map(|_| Backend {
            address: SocketAddr::new(
                format!("10.0.1.{}", 1 + rng.below(6)).parse().unwrap(),
                8080,
            ),
            weight: 1 + rng.below(3) as u32,
        })
        .collect();
    s.backends.sort_by_key(|b| b.address);
    s.backends.dedup_by_key(|b| b.address);
    s.masquerade = [Masquerade::Never, Masquerade::OffCluster][rng.below(2) as usize];
    if rng.below(6) == 0 {
        s.backend_check.check = BackendCheckKind::Tcp;
    }
    s
}

#[test]
fn the_incremental_model_and_plan_equal_the_full_ones_over_random_changes() {
    let mut rng = Rng(0x0dd5_eed5_0000_0024);
    let base = base();
    let mut cfg = ServicesConfig::default();
    let mut memo = Memo::default();
    let mut mirror: Option<Mirror> = None;
    let mut down: Vec<SocketAddr> = Vec::new();
    let (mut narrow, mut lone) = (0, 0);
    for step in 0..2000 {
        let mut touched = 0;
        for _ in 0..rng.below(3) {
            touched += 1;
            let i = rng.below(12);
            let at = cfg.services.iter().position(|s| s.name == format!("s{i}"));
            match (rng.below(8), at) {
                (0, Some(at)) => {
                    cfg.services.remove(at);
                }
                (_, Some(at)) => cfg.services[at] = service(&mut rng, &base, i).into(),
                (_, None) => cfg.services.push(service(&mut rng, &base, i).into()),
            }
        }
        match rng.below(40) {
            0 => cfg.cluster_cidrs = vec!["10.0.0.0/16".parse().unwrap()],
            1 => cfg.cluster_cidrs.clear(),
            2 => {
                touched += 1;
                down = vec![SocketAddr::new("10.0.1.1".parse().unwrap(), 8080)];
            }
            3 => {
                touched += 1;
                down.clear();
            }
            _ => {}
        }
        let up = |s: &Service, b: SocketAddr| {
            s.backend_check.check == BackendCheckKind::None || !down.contains(&b)
        };
        let previous = mirror.as_ref().map(|m| &m.model);
        let full = model::build_with(&cfg, &up, previous);
        let built = memo.build(&cfg, &up, previous);
        let patch = match &built {
            Desired::Patch(p) => Some(p.clone()),
            Desired::Whole(_) => None,
        };
        let model = built.into_model(previous);
        assert_eq!(model, full, "step {step}: the model");
        let committed = rng.below(10) != 0;
        if let Some(m) = &mut mirror {
            let delta = m.diff(&model);
            if let Some(p) = patch {
                if p.entries.len() < cfg.services.len() {
                    narrow += 1;
                }
                let checked = cfg
                    .services
                    .iter()
                    .filter(|s| s.backend_check.check != BackendCheckKind::None)
                    .count();
                if touched == 1 {
                    assert!(
                        p.entries.len() <= 1 + checked,
                        "step {step}: one change patches its key and the checked services, no more"
                    );
                    lone += 1;
                }
                // As an incremental sync plans it: the patch applied to the mirror's model
                // in place, its keys compared alone.
                let mut patched = m.model.clone();
                let (old, keys) = p.apply(&mut patched);
                assert_eq!(patched, model, "step {step}: the patch applied");
                let before = Mirror {
                    model: old,
                    shared_refs: m.shared_refs.clone(),
                };
                assert_eq!(
                    before.diff_keys(&patched, &keys),
                    delta,
                    "step {step}: the plan"
                );
            }
            if committed {
                m.commit(model, &delta);
            }
        } else if committed {
            mirror = Some(Mirror::of(model));
        }
        if !committed {
            // A failed sync: the controller forgets the mirror, the memo starts over.
            mirror = None;
        }
        memo.synced(committed);
    }
    assert!(
        narrow > 500,
        "the memo rebuilt everything too often: {narrow}"
    );
    assert!(lone > 100, "too few lone changes: {lone}");
}

#[test]
fn a_failed_sync_makes_the_next_build_start_over() {
    let base = base();
    let cfg = ServicesConfig {
        services: vec![base.clone().into()],
        ..ServicesConfig::default()
    };
    let mut memo = Memo::default();
    let first = memo.build(&cfg, &|_, _| true, None);
    let Desired::Whole(mirror) = first else {
        panic!("no mirror: the whole model")
    };
    memo.synced(true);
    let again = memo.build(&cfg, &|_, _| true, Some(&mirror));
    assert_eq!(
        again,
        Desired::Patch(Patch {
            cluster_cidrs: mirror.cluster_cidrs.clone(),
            service_cidrs: mirror.service_cidrs.clone(),
            ..Patch::default()
        }),
        "nothing changed: an empty patch"
    );
    memo.synced(false);
    let after = memo.build(&cfg, &|_, _| true, Some(&mirror));
    assert!(
        matches!(after, Desired::Whole(_)),
        "after a failure: the whole model"
    );
}

#[test]
fn the_backend_count_is_the_distinct_backends_of_the_slots() {
    let base = base();
    let mut s = base.clone();
    s.backends = (1..=3)
        .map(|i| Backend {
            address: SocketAddr::new(format!("10.0.1.{i}").parse().unwrap(), 80),
            weight: i,
        })
        .collect();
    let e = model::entry(&s);
    assert_eq!(e.backend_count(), e.backends().len());
    assert_eq!(e.backend_count(), 3);
    s.backends = (1..=100)
        .map(|i| Backend {
            address: SocketAddr::new(format!("10.0.2.{i}").parse().unwrap(), 80),
            weight: 1,
        })
        .collect();
    let many = model::entry(&s);
    assert_eq!(
        many.backend_count(),
        100,
        "past 64 slots, counted by sorting"
    );
}

/// A TOML reload makes every service anew: other allocations, the same content. Compared by
/// position alone, every one would be built again and planned (5,000 at a time).
#[test]
fn a_reload_that_makes_every_service_anew_with_the_same_content_builds_none() {
    let mut rng = Rng(24);
    let base = base();
    let cfg = ServicesConfig {
        services: (0..20)
            .map(|i| {
                let mut s = service(&mut rng, &base, i);
                s.backend_check.check = BackendCheckKind::None;
                Arc::new(s)
            })
            .collect(),
        ..ServicesConfig::default()
    };
    let mut memo = Memo::default();
    let Desired::Whole(mirror) = memo.build(&cfg, &|_, _| true, None) else {
        panic!("no mirror: the whole model")
    };
    memo.synced(true);
    let reloaded = ServicesConfig {
        services: cfg
            .services
            .iter()
            .map(|s| Arc::new(Service::clone(s)))
            .collect(),
        ..cfg.clone()
    };
    let Desired::Patch(p) = memo.build(&reloaded, &|_, _| true, Some(&mirror)) else {
        panic!("a patch of the mirror")
    };
    assert!(p.entries.is_empty(), "{:?}", p.entries.keys());
    // One changed among them is the one built.
    let mut one = reloaded.clone();
    let mut s = Service::clone(&one.services[7]);
    s.backends.clear();
    one.services[7] = Arc::new(s);
    memo.synced(true);
    let Desired::Patch(p) = memo.build(&one, &|_, _| true, Some(&mirror)) else {
        panic!("a patch of the mirror")
    };
    assert_eq!(p.entries.len(), 1);
}
