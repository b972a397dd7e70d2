//! One stable sort shared by every list the Kubernetes source orders.
//!
//! `slice::sort_by` is compiled once per element type and comparison, a few kB of aarch64
//! code each; the source orders a dozen kinds of lists (services, routes, policies, nodes,
//! backends, port ranges, ...). Here the indices are sorted, through a comparison behind a
//! reference (so the sort itself is compiled once), and the items then moved into place.

use std::cmp::Ordering;

/// Sorts `items` stably by `cmp`.
pub fn sort_by<T>(items: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    let order = indices(items.len(), &|a, b| cmp(&items[a], &items[b]));
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// Sorts `items` stably by `key`.
pub fn sort_by_key<T, K: Ord>(items: &mut Vec<T>, key: impl Fn(&T) -> K) {
    sort_by(items, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `items`.
pub fn sort<T: Ord>(items: &mut Vec<T>) {
    sort_by(items, T::cmp);
}

/// The indices `0..n`, sorted stably by `cmp`.
#[inline(never)]
fn indices(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_sort_is_stable_and_orders_by_the_comparison() {
        let mut v = vec![(3, 'a'), (1, 'b'), (3, 'c'), (2, 'd'), (1, 'e')];
        sort_by_key(&mut v, |p| p.0);
        assert_eq!(v, [(1, 'b'), (1, 'e'), (2, 'd'), (3, 'a'), (3, 'c')]);
        let mut w = vec!["b".to_string(), "c".into(), "a".into()];
        sort(&mut w);
        assert_eq!(w, ["a", "b", "c"]);
        let mut empty: Vec<u8> = Vec::new();
        sort(&mut empty);
        assert!(empty.is_empty());
    }
}
