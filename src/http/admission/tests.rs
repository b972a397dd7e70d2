use std::net::Ipv4Addr;

use super::*;

fn v4(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Fills the table with connections already being answered (never evictable), one per source.
fn fill_answering(a: &mut Admission, n: u32) -> Vec<Ticket> {
    (0..n)
        .map(|i| {
            let t = a.admit(v4(i), false).expect("room");
            a.answering(t.id);
            t
        })
        .collect()
}

#[test]
fn a_source_turned_away_at_the_global_cap_leaves_no_zero_entry() {
    let limits = Limits {
        max_connections: 4,
        max_per_source: 2,
        reserved: 0,
    };
    let mut a = Admission::new(limits);
    let held = fill_answering(&mut a, 4);
    for i in 1000..21_000 {
        assert!(a.admit(v4(i), false).is_none(), "the table is full");
    }
    assert_eq!(
        a.sources_tracked(),
        4,
        "20,000 turned-away sources left entries"
    );
    assert_eq!(a.untrusted, 4);
    for t in &held {
        a.release(t.id);
    }
    assert_eq!((a.open(), a.sources_tracked(), a.untrusted), (0, 0, 0));
}

#[test]
fn slow_clients_from_ten_addresses_do_not_lock_out_a_probe_from_an_eleventh() {
    let mut a = Admission::new(LIMITS);
    let mut slow = Vec::new();
    for source in 0..10 {
        for _ in 0..LIMITS.max_per_source {
            if let Some(t) = a.admit(v4(source), false) {
                slow.push(t);
            }
        }
    }
    assert_eq!(a.open(), LIMITS.max_connections - LIMITS.reserved);
    let closed = |slow: &[Ticket]| slow.iter().filter(|t| t.evicted.is_closed()).count();
    let before = closed(&slow);
    for probe in 0..100 {
        let t = a
            .admit(v4(100 + probe), false)
            .expect("a probe gets a slot");
        a.answering(t.id);
        a.release(t.id);
    }
    let after = closed(&slow);
    assert_eq!(
        after,
        before + 1,
        "the first probe evicted a slow client; the next ones reused the freed slot"
    );
    // Victims come from the sources holding the most slots, each source's oldest first.
    assert_eq!(slow.len(), 10 * LIMITS.max_per_source);
    for (source, conns) in slow.chunks(LIMITS.max_per_source).enumerate() {
        let lost = conns.iter().filter(|t| t.evicted.is_closed()).count();
        assert!(
            conns[..lost].iter().all(|t| t.evicted.is_closed()),
            "source {source}: the oldest first"
        );
    }
}

#[test]
fn thirty_three_local_slow_clients_do_not_lock_out_local_probes() {
    let mut a = Admission::new(LIMITS);
    let slow: Vec<Ticket> = (0..33).filter_map(|_| a.admit(LOOPBACK, true)).collect();
    assert_eq!(slow.len(), 33, "the 33rd evicted the 1st");
    assert!(slow[0].evicted.is_closed() && !slow[1].evicted.is_closed());
    let probe = a.admit(LOOPBACK, true).expect("the probe gets a slot");
    a.answering(probe.id);
    assert_eq!(a.open(), LIMITS.max_per_source);
}

#[test]
fn trusted_sources_keep_a_reserve_that_untrusted_ones_cannot_take() {
    let mut a = Admission::new(LIMITS);
    let n = (LIMITS.max_connections - LIMITS.reserved) as u32;
    let _held = fill_answering(&mut a, n);
    assert!(
        a.admit(v4(9999), false).is_none(),
        "untrusted: only the reserve is left"
    );
    for _ in 0..LIMITS.reserved {
        let t = a
            .admit(LOOPBACK, true)
            .expect("the reserve is for trusted sources");
        a.answering(t.id);
    }
    assert!(
        a.admit(LOOPBACK, true).is_none(),
        "everything answering: nobody to evict"
    );
    assert_eq!(a.open(), LIMITS.max_connections);
}

#[test]
fn ipv6_sources_are_counted_per_64() {
    let mut a = Admission::new(LIMITS);
    let in_64 = |n: u16| -> IpAddr { format!("2001:db8:0:1::{n:x}").parse().unwrap() };
    let tickets: Vec<Ticket> = (1..=32).filter_map(|n| a.admit(in_64(n), false)).collect();
    assert_eq!(a.sources_tracked(), 1);
    for t in &tickets {
        a.answering(t.id);
    }
    assert!(
        a.admit(in_64(0xffff), false).is_none(),
        "the /64 is at its cap"
    );
    assert!(a.admit("2001:db8:0:2::1".parse().unwrap(), false).is_some());
    assert_eq!(
        source_key("::ffff:10.1.2.3".parse().unwrap()),
        "10.1.2.3".parse::<IpAddr>().unwrap()
    );
}

#[test]
fn a_connection_being_answered_is_never_evicted() {
    let limits = Limits {
        max_connections: 2,
        max_per_source: 2,
        reserved: 0,
    };
    let mut a = Admission::new(limits);
    let answering = a.admit(LOOPBACK, true).unwrap();
    a.answering(answering.id);
    let slow = a.admit(LOOPBACK, true).unwrap();
    let probe = a.admit(LOOPBACK, true).expect("evicts the slow one");
    assert!(slow.evicted.is_closed() && !answering.evicted.is_closed());
    a.release(slow.id);
    a.release(answering.id);
    a.release(probe.id);
    assert_eq!((a.open(), a.sources_tracked()), (0, 0));
}

#[test]
fn a_probe_not_read_yet_is_not_evicted_by_a_burst_from_busier_sources() {
    // Issue 21, item 11: 2,000 idle clients from 100 sources arrive faster than heads are
    // read; evicting the oldest connection of any source took a probe that had just been
    // accepted once 256 more came in behind it.
    let mut a = Admission::new(LIMITS);
    let mut flood: Vec<Ticket> = (0..255)
        .filter_map(|i| a.admit(v4(i % 100), true))
        .collect();
    let probe = a.admit(v4(5000), true).expect("a slot for the probe");
    flood.extend((0..2000).filter_map(|i| a.admit(v4(i % 100), true)));
    assert_eq!(
        flood.len(),
        2255,
        "every flood connection got a slot by eviction"
    );
    assert!(
        !probe.evicted.is_closed(),
        "the probe's source holds one slot"
    );
    assert_eq!(a.open(), LIMITS.max_connections);
}
