//! Spreading a service's backends over its slots.
//!
//! The dataplane picks a slot per new connection (`numgen random mod K`, or `jhash ip saddr
//! mod K` for source affinity) and looks up `vip . proto . port . slot` in one map, so a
//! service costs one kernel element per slot. K is the smallest slot class whose slots
//! carry every backend's weight within [`TOLERANCE_PERCENT`] (equal weights: one slot per
//! backend up to 32 backends, as kube-proxy's one vmap element per endpoint), else the
//! largest class.
//!
//! **Surviving backends keep their slots** (as consistent hashing such as Maglev does): the
//! planner is given the service's previous assignment, keeps every slot whose backend is
//! still wanted there (up to its new count), and deals only the freed slots. Replacing one
//! backend by another of the same weight thus rewrites only the replaced backend's slots,
//! and clients hashed (`source-ip`) to the other backends stay with them. Without a previous
//! assignment the slots are dealt in smooth weighted round-robin order (spread over the
//! range rather than bunched), in address order: the same config then gives the same slots.
//!
//! K comes from a fixed list of classes (one dispatch chain per class, selection and
//! family, present while some service uses it), so the rule count is bounded and only
//! elements grow with the number of services. A change of K (a backend added or removed) changes the slot of most clients:
//! `mod K` hashing keeps nothing across a different K.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::config::service::Backend;

/// Every slot count up to this one is a class: equal weights get one slot per backend.
pub const EXACT_CLASSES: u32 = 32;

/// The slot counts a service can have (ascending); each has its own dispatch chains.
pub const SLOT_CLASSES: [u32; EXACT_CLASSES as usize + 5] = classes();

const fn classes() -> [u32; EXACT_CLASSES as usize + 5] {
    let mut c = [0u32; EXACT_CLASSES as usize + 5];
    let mut i = 0;
    while i < EXACT_CLASSES as usize {
        c[i] = i as u32 + 1;
        i += 1;
    }
    let big = [64, 128, 256, 512, 1024];
    let mut j = 0;
    while j < big.len() {
        c[EXACT_CLASSES as usize + j] = big[j];
        j += 1;
    }
    c
}

/// How far (in percent of its own weight's share) a backend's share of the slots may be
/// from its share of the weights before a larger class is taken.
pub const TOLERANCE_PERCENT: u64 = 2;

/// The largest class: the cap for weights no smaller class carries within the tolerance.
pub fn max_slots() -> u32 {
    SLOT_CLASSES[SLOT_CLASSES.len() - 1]
}

/// Live backends (weight above 0), sorted by address, each once (weights of a repeated
/// address added).
fn live(backends: &[Backend]) -> Vec<(SocketAddr, u64)> {
    let mut m: BTreeMap<SocketAddr, u64> = BTreeMap::new();
    for b in backends.iter().filter(|b| b.weight > 0) {
        *m.entry(b.address).or_insert(0) += u64::from(b.weight);
    }
    m.into_iter().collect()
}

/// Slot counts per backend for `k` slots: largest remainder, ties to the backend that holds
/// its extra slot now (`held` beyond its floor: raw counts of different weights say nothing),
/// then by address; every backend gets at least one slot (taken from the one with the most).
fn apportion(live: &[(SocketAddr, u64)], k: u64, held: &[u64]) -> Vec<u64> {
    let total: u64 = live.iter().map(|(_, w)| w).sum();
    let floors: Vec<u64> = live.iter().map(|(_, w)| k * w / total).collect();
    let surplus = |i: usize| held[i].saturating_sub(floors[i]);
    let mut counts = floors.clone();
    let mut left = k - counts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..live.len()).collect();
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse((k * live[i].1) % total),
            std::cmp::Reverse(surplus(i)),
            i,
        )
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    for i in 0..counts.len() {
        if counts[i] == 0 {
            // The one with the most gives, preferring one that holds fewer than that now.
            let richest = (0..counts.len())
                .filter(|&j| counts[j] > 1)
                .max_by_key(|&j| {
                    (
                        counts[j],
                        std::cmp::Reverse(held[j].min(counts[j])),
                        std::cmp::Reverse(j),
                    )
                });
            if let Some(r) = richest {
                counts[r] -= 1;
                counts[i] = 1;
            }
        }
    }
    counts
}

/// True when every backend's share of `counts` is within the tolerance of its weight's.
fn within_tolerance(live: &[(SocketAddr, u64)], counts: &[u64], k: u64) -> bool {
    let total: u64 = live.iter().map(|(_, w)| w).sum();
    live.iter().zip(counts).all(|((_, w), c)| {
        // |c/k - w/total| <= TOLERANCE_PERCENT/100 * w/total, in integers.
        let (a, b) = ((*c as u128) * total as u128, k as u128 * *w as u128);
        100 * a.abs_diff(b) <= TOLERANCE_PERCENT as u128 * b
    })
}

/// The slot count of live backends: the smallest class with at least one slot per backend
/// that carries the weights within the tolerance, else the largest class.
fn slot_count_of(live: &[(SocketAddr, u64)]) -> u32 {
    let zero = vec![0; live.len()];
    SLOT_CLASSES
        .iter()
        .copied()
        .filter(|k| *k as usize >= live.len())
        .find(|k| within_tolerance(live, &apportion(live, *k as u64, &zero), *k as u64))
        .unwrap_or_else(max_slots)
}

/// The slot count of `backends` (those with weight 0 aside); 0 when none is live.
pub fn slots_for(backends: &[Backend]) -> u32 {
    let live = live(backends);
    if live.is_empty() {
        0
    } else {
        slot_count_of(&live)
    }
}

/// The slot count of `n` backends of equal weight (`n` itself up to [`EXACT_CLASSES`]).
pub fn slot_count(n: usize) -> u32 {
    if n == 0 {
        return 0;
    }
    let equal: Vec<(SocketAddr, u64)> = (0..n)
        .map(|i| (SocketAddr::from((std::net::Ipv4Addr::from(i as u32), 0)), 1))
        .collect();
    slot_count_of(&equal)
}

/// The backend of each slot, dealt afresh (see [`assign`]).
pub fn spread(backends: &[Backend]) -> Vec<SocketAddr> {
    assign(backends, &[])
}

/// The backend of each slot (`result.len()` = the slot count), or empty when no backend has
/// a weight above 0, given the service's `previous` slots (empty: none). Every slot of the
/// previous assignment below the new count whose backend is still live keeps it, as long as
/// that backend's new count allows; the other slots are dealt to the backends short of
/// their count.
pub fn assign(backends: &[Backend], previous: &[SocketAddr]) -> Vec<SocketAddr> {
    let live = live(backends);
    if live.is_empty() {
        return Vec::new();
    }
    let k = slot_count_of(&live) as usize;
    let index: BTreeMap<SocketAddr, usize> =
        live.iter().enumerate().map(|(i, (a, _))| (*a, i)).collect();
    let mut held = vec![0u64; live.len()];
    for b in previous.iter().take(k) {
        if let Some(&i) = index.get(b) {
            held[i] += 1;
        }
    }
    let counts = apportion(&live, k as u64, &held);
    if held.iter().all(|h| *h == 0) {
        return smooth(&counts, k).into_iter().map(|i| live[i].0).collect();
    }
    let mut out: Vec<Option<usize>> = vec![None; k];
    let mut kept = vec![0u64; live.len()];
    for (slot, b) in previous.iter().take(k).enumerate() {
        if let Some(&i) = index.get(b)
            && kept[i] < counts[i]
        {
            kept[i] += 1;
            out[slot] = Some(i);
        }
    }
    let short: Vec<u64> = counts.iter().zip(&kept).map(|(c, k)| c - k).collect();
    let free = out.iter().filter(|s| s.is_none()).count();
    let mut deal = smooth(&short, free).into_iter();
    out.into_iter()
        .map(|s| live[s.or_else(|| deal.next()).expect("counts sum to the slots")].0)
        .collect()
}

/// `fresh` (a deal of the same backends) with each slot of `previous` kept where its backend
/// still has that many slots in `fresh`: the same counts, the previous places. For an
/// assignment read back from the kernel, whose weights are not known (a restart adopting
/// the table: slots dealt afresh would move the clients of every backend that changed
/// place).
pub fn rebase(fresh: &[SocketAddr], previous: &[Option<SocketAddr>]) -> Vec<SocketAddr> {
    let mut left: BTreeMap<SocketAddr, usize> = BTreeMap::new();
    for b in fresh {
        *left.entry(*b).or_insert(0) += 1;
    }
    let mut out: Vec<Option<SocketAddr>> = vec![None; fresh.len()];
    for (slot, b) in previous.iter().take(fresh.len()).enumerate() {
        if let Some(b) = b
            && let Some(n) = left.get_mut(b)
            && *n > 0
        {
            *n -= 1;
            out[slot] = Some(*b);
        }
    }
    // The rest in the fresh deal's order: each backend's remaining slots, spread as dealt.
    let mut rest = fresh.iter().filter(|b| match left.get_mut(*b) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    });
    out.into_iter()
        .map(|s| {
            s.or_else(|| rest.next().copied())
                .expect("counts sum to the slots")
        })
        .collect()
}

/// Smooth weighted round-robin over `counts` (summing to `n`): `n` indexes, each index as
/// often as its count, evenly interleaved.
fn smooth(counts: &[u64], n: usize) -> Vec<usize> {
    let mut current = vec![0i64; counts.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        for (c, w) in current.iter_mut().zip(counts) {
            *c += *w as i64;
        }
        let best = (0..counts.len())
            .max_by_key(|&i| (current[i], std::cmp::Reverse(i)))
            .unwrap_or(0);
        current[best] -= n as i64;
        out.push(best);
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

    fn equal(n: usize) -> Vec<Backend> {
        (1..=n)
            .map(|i| b(&format!("10.0.{}.{}:80", i / 250, i % 250 + 1), 1))
            .collect()
    }

    #[test]
    fn equal_weights_get_one_slot_per_backend_up_to_thirty_two() {
        for n in 1..=32 {
            assert_eq!(slots_for(&equal(n)), n as u32, "{n} backends");
        }
        // Beyond, the largest class (64 and 128 are exact for their own counts).
        assert_eq!(slots_for(&equal(33)), 1024);
        assert_eq!(slots_for(&equal(64)), 64);
        assert_eq!(slots_for(&equal(2000)), 1024);
        assert_eq!(slot_count(4), 4);
        assert_eq!(slot_count(33), 1024);
    }

    #[test]
    fn weights_take_the_slots_they_need() {
        assert_eq!(slots_for(&[b("10.0.0.1:80", 1), b("10.0.0.2:80", 3)]), 4);
        assert_eq!(slots_for(&[b("10.0.0.1:80", 20), b("10.0.0.2:80", 60)]), 4);
        // 100:101 is 50/50 within 2 %: two slots, not 201.
        assert_eq!(
            slots_for(&[b("10.0.0.1:80", 100), b("10.0.0.2:80", 101)]),
            2
        );
        assert_eq!(slots_for(&[b("10.0.0.1:80", 0)]), 0);
    }

    #[test]
    fn two_equal_backends_alternate() {
        let s = spread(&[b("10.0.0.2:80", 1), b("10.0.0.1:80", 1)]);
        assert_eq!(names(&s), "12");
    }

    #[test]
    fn weights_one_to_three() {
        let s = spread(&[b("10.0.0.1:80", 1), b("10.0.0.2:80", 3)]);
        assert_eq!(names(&s), "2122");
    }

    #[test]
    fn tiny_weight_still_gets_a_slot_and_zero_gets_none() {
        let s = spread(&[
            b("10.0.0.1:80", 1000),
            b("10.0.0.2:80", 1),
            b("10.0.0.3:80", 0),
        ]);
        assert_eq!(s.len(), 1024, "1001 is no class: the cap");
        assert_eq!(
            s.iter()
                .filter(|a| a.ip().to_string() == "10.0.0.2")
                .count(),
            1
        );
        assert!(!s.iter().any(|a| a.ip().to_string() == "10.0.0.3"));
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
        assert_eq!(a.len(), 8);
    }

    #[test]
    fn replacing_one_of_four_rewrites_its_slot_only() {
        let before = spread(&equal(4));
        let mut next = equal(4);
        next[2] = b("10.9.9.9:80", 1);
        let after = assign(&next, &before);
        let changed: Vec<usize> = (0..4).filter(|&i| before[i] != after[i]).collect();
        assert_eq!(changed.len(), 1);
        assert_eq!(before[changed[0]], equal(4)[2].address);
        assert_eq!(after[changed[0]], next[2].address);
    }

    #[test]
    fn a_removed_backend_leaves_the_others_in_place() {
        // 3:3:2 is eight slots; without the third, two: both kept where they were.
        let mut set = vec![
            b("10.0.0.1:80", 3),
            b("10.0.0.2:80", 3),
            b("10.0.0.3:80", 2),
        ];
        let before = spread(&set);
        set.remove(2);
        let after = assign(&set, &before);
        assert_eq!(after.len(), 2);
        // Slots 0 and 1 were backends 1 and 2's (smooth order): kept.
        assert_eq!(&after[..], &before[..2]);
    }

    #[test]
    fn rebase_keeps_the_kernels_places_and_the_fresh_counts() {
        let a: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let c: SocketAddr = "10.0.0.3:80".parse().unwrap();
        let d: SocketAddr = "10.0.0.4:80".parse().unwrap();
        // After a replacement the kernel has d in slot 0; a fresh deal would put a there.
        let fresh = spread(&[
            b("10.0.0.1:80", 1),
            b("10.0.0.3:80", 1),
            b("10.0.0.4:80", 1),
        ]);
        assert_eq!(fresh, [a, c, d]);
        let kernel = [Some(d), Some(a), Some(c)];
        assert_eq!(rebase(&fresh, &kernel), [d, a, c]);
        // A slot the kernel lacks, or holds for a backend gone: dealt from the fresh counts.
        let gone: SocketAddr = "10.9.9.9:80".parse().unwrap();
        assert_eq!(rebase(&fresh, &[Some(gone), None, Some(c)]), [a, d, c]);
        assert_eq!(rebase(&fresh, &[]), fresh);
    }

    /// xorshift64*: a fixed-seed generator for the property tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_set(rng: &mut Rng, weighted: bool) -> Vec<Backend> {
        let n = 1 + rng.below(40) as usize;
        let mut v: Vec<Backend> = Vec::new();
        while v.len() < n {
            let a = format!(
                "10.{}.{}.{}:{}",
                rng.below(4),
                rng.below(256),
                rng.below(256),
                80 + rng.below(3)
            );
            let w = if weighted {
                1 + rng.below(100) as u32
            } else {
                1
            };
            if !v.iter().any(|x| x.address.to_string() == a) {
                v.push(b(&a, w));
            }
        }
        v
    }

    fn share_ok(set: &[Backend], slots: &[SocketAddr]) -> bool {
        let live = live(set);
        let counts: Vec<u64> = live
            .iter()
            .map(|(a, _)| slots.iter().filter(|s| *s == a).count() as u64)
            .collect();
        within_tolerance(&live, &counts, slots.len() as u64)
    }

    #[test]
    fn property_a_replacement_moves_only_the_replaced_backends_slots() {
        let mut rng = Rng(0x5eed_0001);
        for round in 0..1000 {
            let weighted = round % 2 == 1;
            let set = random_set(&mut rng, weighted);
            // A history first: the slots after a few replacements are no fresh deal.
            let mut slots = spread(&set);
            let mut set = set;
            for _ in 0..3 {
                let victim = rng.below(set.len() as u64) as usize;
                let gone = set[victim].address;
                let fresh = b(
                    &format!("10.200.{}.{}:80", rng.below(256), rng.below(256)),
                    set[victim].weight,
                );
                if set.iter().any(|x| x.address == fresh.address) {
                    continue;
                }
                set[victim] = fresh;
                let after = assign(&set, &slots);
                assert_eq!(
                    after.len(),
                    slots.len(),
                    "round {round}: the slot count stays"
                );
                for (i, (o, n)) in slots.iter().zip(&after).enumerate() {
                    if o != n {
                        assert_eq!(
                            *o, gone,
                            "round {round}: slot {i} of unchanged {o} moved to {n}"
                        );
                    }
                    if *n == fresh.address {
                        assert_eq!(
                            *o, gone,
                            "round {round}: the new backend took slot {i} of {o}"
                        );
                    }
                }
                // Exactly the replaced backend's slots were written.
                let written = slots.iter().zip(&after).filter(|(o, n)| o != n).count();
                assert_eq!(written, slots.iter().filter(|s| **s == gone).count());
                slots = after;
            }
        }
    }

    #[test]
    fn property_weights_are_carried_within_two_percent() {
        let mut rng = Rng(0x5eed_0002);
        for round in 0..3000 {
            let set = random_set(&mut rng, true);
            let slots = spread(&set);
            let need: u64 = {
                let live = live(&set);
                let g = live.iter().fold(0, |g, (_, w)| gcd(g, *w));
                live.iter().map(|(_, w)| w / g).sum()
            };
            // No smaller class (with a slot per backend) carries the weights: the count is
            // what the weights need, or the next class that carries them, or the cap.
            let k = slots.len() as u32;
            let live = live(&set);
            let zero = vec![0; live.len()];
            for c in SLOT_CLASSES
                .iter()
                .filter(|c| **c < k && **c as usize >= live.len())
            {
                let counts = apportion(&live, *c as u64, &zero);
                assert!(
                    !within_tolerance(&live, &counts, *c as u64),
                    "round {round}: {c} < {k}"
                );
            }
            if (need as u32) <= EXACT_CLASSES {
                assert!(k as u64 <= need, "round {round}: {k} slots for {need}");
            }
            if slots.len() as u32 != max_slots() {
                assert!(share_ok(&set, &slots), "round {round}: {set:?}");
            }
            // An unrelated history does not break the weights.
            let other = spread(&random_set(&mut rng, true));
            let again = assign(&set, &other);
            assert_eq!(again.len(), slots.len());
            if slots.len() as u32 != max_slots() {
                assert!(share_ok(&set, &again), "round {round}: with history");
            }
        }
    }

    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
}
