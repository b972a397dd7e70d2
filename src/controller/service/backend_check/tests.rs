//! Start states and the fallback in the model. The probes start at a random offset within a
//! minute, so they are dropped before they run (and would only knock on loopback).

use std::sync::Arc;
use std::time::Duration;

use super::BackendChecks;
use crate::config::service::{Affinity, Backend, BackendCheck, BackendCheckKind, Initial, Service};
use crate::controller::service::model::{Action, Selection, entry_with};
use crate::sync::trigger;

fn service(initial: Initial, affinity: Affinity, fallback: Option<&str>) -> Service {
    Service {
        name: "web".into(),
        address: "10.96.0.10".parse().unwrap(),
        port: 80,
        protocol: crate::config::service::Protocol::Tcp,
        backends: vec![Backend {
            address: "127.0.0.1:9".parse().unwrap(),
            weight: 1,
        }],
        affinity,
        masquerade: crate::config::service::Masquerade::Never,
        source_ranges: Vec::new(),
        internal_backends: None,
        reject_unserved_ports: false,
        when_empty: Default::default(),
        fallback: fallback.map(|f| f.parse().unwrap()),
        backend_check: BackendCheck {
            check: BackendCheckKind::Tcp,
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(1),
            initial,
            ..BackendCheck::default()
        },
    }
}

#[test]
fn initial_down_holds_a_new_backend_down_and_the_default_holds_it_up() {
    let (t, _rx) = trigger();
    let mut checks = BackendChecks::new(t);
    let down = service(Initial::Down, Affinity::None, None);
    checks.reconcile(&[Arc::new(down.clone())]);
    assert!(!checks.is_up(&down, down.backends[0].address));
    assert_eq!(
        entry_with(&down, &[], &|s, b| checks.is_up(s, b), None).action,
        Action::Reject
    );
    let up = service(Initial::Up, Affinity::None, None);
    checks.reconcile(&[Arc::new(up.clone())]);
    assert!(checks.is_up(&up, up.backends[0].address));
    assert!(checks.down().is_empty(), "the initial = down probe is gone");
}

#[test]
fn the_fallback_is_dealt_at_random_only_while_no_backend_is_up() {
    let sticky = Affinity::Sticky {
        timeout: Duration::from_secs(60),
    };
    let s = service(Initial::Up, sticky, Some("192.0.2.99:80"));
    let sorry = "192.0.2.99:80".parse().unwrap();
    match entry_with(&s, &[], &|_, _| false, None).action {
        Action::Balance { selection, slots } => {
            assert_eq!(selection, Selection::Random, "never remembered");
            assert!(slots.iter().all(|b| *b == sorry), "{slots:?}");
        }
        other => panic!("{other:?}"),
    }
    match entry_with(&s, &[], &|_, _| true, None).action {
        Action::Balance { selection, slots } => {
            assert_eq!(selection, Selection::Sticky { timeout: 60 });
            assert!(!slots.contains(&sorry), "{slots:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// Counts what the watch tells its heartbeat.
#[derive(Default)]
struct Told {
    beats: std::sync::atomic::AtomicU32,
    rests: std::sync::atomic::AtomicU32,
}

impl crate::sync::Progress for Told {
    fn beat(&self) {
        self.beats.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn rest(&self) {
        self.rests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The idle daemon's async-io thread woke about ten times for each tick of this watch (smol's
/// reactor backs off in steps after every event it handles): it ticked every 5 s with nothing
/// to watch.
#[test]
fn bug_the_watch_ticks_every_5_s_while_no_backend_is_checked() {
    use std::sync::atomic::Ordering::SeqCst;
    let told = std::sync::Arc::new(Told::default());
    let (t, _rx) = trigger();
    let mut checks = BackendChecks::new(t);
    checks.watch(told.clone());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(told.rests.load(SeqCst), 1, "rests at once with no probe");
    let looked = told.beats.load(SeqCst);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(told.beats.load(SeqCst), looked, "and sleeps: no tick");
    let checked = service(Initial::Up, Affinity::None, None);
    checks.reconcile(&[Arc::new(checked.clone())]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        told.beats.load(SeqCst) >= looked + 2,
        "a probe wakes the watch, which beats on its tick"
    );
    checks.reconcile(&[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        told.rests.load(SeqCst),
        2,
        "rests again once no probe is left"
    );
}
