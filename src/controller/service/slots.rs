//! Spreading a service's backends over its slots.
//!
//! The dataplane picks a slot per new connection (`numgen random mod K`, or `jhash ip saddr
//! mod K` for source affinity) and looks up `vip . proto . port . slot` in one map. A
//! service's weights become slot counts (largest remainder, every backend with a weight above
//! 0 gets at least one slot), and the slots are dealt out in smooth weighted round-robin
//! order so each backend's slots are spread over the range rather than bunched. Everything
//! here is a pure function of the backends: the same config always gives the same slots.
//!
//! K comes from a few fixed classes (one dispatch chain per class and family), so the rule
//! count is constant and only elements grow with the number of services.

use std::net::SocketAddr;

use crate::config::service::Backend;

/// The slot counts a service can have; each has its own dispatch chains.
pub const SLOT_CLASSES: [u32; 4] = [16, 64, 256, 1024];

/// Slots for `n` backends with weight above 0: the smallest class with at least eight slots
/// per backend (capped at the largest), so weights and equal shares stay within a few percent.
pub fn slot_count(n: usize) -> u32 {
    let want = (n as u64 * 8).min(*SLOT_CLASSES.last().unwrap() as u64) as u32;
    SLOT_CLASSES
        .iter()
        .copied()
        .find(|k| *k >= want)
        .unwrap_or(*SLOT_CLASSES.last().unwrap())
}

/// The backend of each slot (`result.len()` = the slot count), or empty when no backend has
/// a weight above 0. Backends are ordered by address first, so reordering them in the config
/// changes nothing.
pub fn spread(backends: &[Backend]) -> Vec<SocketAddr> {
    let mut live: Vec<(SocketAddr, u64)> = backends
        .iter()
        .filter(|b| b.weight > 0)
        .map(|b| (b.address, b.weight as u64))
        .collect();
    if live.is_empty() {
        return Vec::new();
    }
    live.sort();
    let k = slot_count(live.len()) as u64;
    // Largest remainder on the weights, then every backend gets at least one slot (taken
    // from the backend with the most).
    let total: u64 = live.iter().map(|(_, w)| w).sum();
    let mut counts: Vec<u64> = live.iter().map(|(_, w)| k * w / total).collect();
    let mut left = k - counts.iter().sum::<u64>();
    let mut by_remainder: Vec<usize> = (0..live.len()).collect();
    by_remainder.sort_by_key(|&i| (std::cmp::Reverse((k * live[i].1) % total), i));
    for &i in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    for i in 0..counts.len() {
        if counts[i] == 0 {
            let richest = (0..counts.len()).max_by_key(|&j| (counts[j], std::cmp::Reverse(j)));
            if let Some(r) = richest {
                counts[r] -= 1;
                counts[i] = 1;
            }
        }
    }
    // Smooth weighted round-robin over the counts: exact counts, evenly interleaved.
    let mut current = vec![0i64; live.len()];
    let mut out = Vec::with_capacity(k as usize);
    for _ in 0..k {
        for (c, n) in current.iter_mut().zip(&counts) {
            *c += *n as i64;
        }
        let best = (0..live.len())
            .max_by_key(|&i| (current[i], std::cmp::Reverse(i)))
            .unwrap_or(0);
        current[best] -= k as i64;
        out.push(live[best].0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(addr: &str, weight: u32) -> Backend {
        Backend {
            address: addr.parse().unwrap(),
            weight,
        }
    }

    fn names(slots: &[SocketAddr]) -> String {
        slots
            .iter()
            .map(|s| s.ip().to_string().rsplit('.').next().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("")
    }

    #[test]
    fn classes() {
        assert_eq!(slot_count(1), 16);
        assert_eq!(slot_count(2), 16);
        assert_eq!(slot_count(3), 64);
        assert_eq!(slot_count(8), 64);
        assert_eq!(slot_count(9), 256);
        assert_eq!(slot_count(33), 1024);
        assert_eq!(slot_count(1024), 1024);
    }

    #[test]
    fn two_equal_backends_alternate() {
        let s = spread(&[b("10.0.0.2:80", 1), b("10.0.0.1:80", 1)]);
        assert_eq!(names(&s), "1212121212121212");
    }

    #[test]
    fn weights_one_to_three() {
        let s = spread(&[b("10.0.0.1:80", 1), b("10.0.0.2:80", 3)]);
        assert_eq!(names(&s), "2122212221222122");
        assert_eq!(
            s.iter()
                .filter(|a| a.ip().to_string() == "10.0.0.2")
                .count(),
            12
        );
    }

    #[test]
    fn three_backends_share_sixty_four_slots() {
        let s = spread(&[
            b("10.0.0.1:80", 1),
            b("10.0.0.2:80", 1),
            b("10.0.0.3:80", 1),
        ]);
        assert_eq!(s.len(), 64);
        let count = |x: &str| s.iter().filter(|a| a.ip().to_string() == x).count();
        assert_eq!(
            (count("10.0.0.1"), count("10.0.0.2"), count("10.0.0.3")),
            (22, 21, 21)
        );
        assert_eq!(&names(&s)[..12], "123123123123");
    }

    #[test]
    fn tiny_weight_still_gets_a_slot_and_zero_gets_none() {
        let s = spread(&[
            b("10.0.0.1:80", 1000),
            b("10.0.0.2:80", 1),
            b("10.0.0.3:80", 0),
        ]);
        assert_eq!(s.len(), 16);
        assert_eq!(names(&s), "1111111121111111");
    }

    #[test]
    fn nothing_up_means_no_slots() {
        assert!(spread(&[]).is_empty());
        assert!(spread(&[b("10.0.0.1:80", 0)]).is_empty());
    }

    #[test]
    fn order_in_config_does_not_matter() {
        let a = spread(&[
            b("10.0.0.1:80", 2),
            b("10.0.0.2:80", 1),
            b("10.0.0.3:80", 5),
        ]);
        let z = spread(&[
            b("10.0.0.3:80", 5),
            b("10.0.0.1:80", 2),
            b("10.0.0.2:80", 1),
        ]);
        assert_eq!(a, z);
    }
}
