//! What an interval set's elements must be: the kernel refuses overlapping intervals, so
//! address prefixes and port ranges are brought into a form without overlaps here, before
//! they become elements of a named or anonymous set.

use ipnet::IpNet;

/// Drops address elements (prefixes and single addresses) contained in another element of
/// the same interval set and sorts the rest. The kernel refuses overlapping intervals, and
/// CIDR blocks either nest or are disjoint, so this is all that is needed; neighbours stay
/// separate elements so that adding or removing one address is a one-element delta.
pub fn normalize_prefixes(nets: impl IntoIterator<Item = IpNet>) -> Vec<IpNet> {
    let mut v: Vec<IpNet> = nets.into_iter().map(|n| n.trunc()).collect();
    // Wider prefixes first among equal network addresses, so containers come first.
    v.sort_by(|a, b| {
        (a.network(), a.prefix_len(), a.max_prefix_len()).cmp(&(
            b.network(),
            b.prefix_len(),
            b.max_prefix_len(),
        ))
    });
    let mut out: Vec<IpNet> = Vec::with_capacity(v.len());
    for n in v {
        match out.last() {
            Some(last) if last.contains(&n) => {}
            _ => out.push(n),
        }
    }
    out
}

/// Merges overlapping and adjacent port ranges, sorted.
pub fn normalize_port_ranges(ranges: impl IntoIterator<Item = (u16, u16)>) -> Vec<(u16, u16)> {
    let mut v: Vec<(u16, u16)> = ranges
        .into_iter()
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect();
    v.sort();
    let mut out: Vec<(u16, u16)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if u32::from(a) <= u32::from(last.1) + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing_drops_contained_prefixes_and_keeps_neighbours() {
        let nets = [
            "10.0.0.128/25",
            "10.0.0.0/25",
            "10.0.0.7/32",
            "192.168.1.1/32",
            "10.0.0.0/25",
        ]
        .map(|s| s.parse::<IpNet>().unwrap());
        let got: Vec<String> = normalize_prefixes(nets)
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(got, ["10.0.0.0/25", "10.0.0.128/25", "192.168.1.1/32"]);
        assert_eq!(
            normalize_port_ranges([(22, 22), (8000, 8100), (23, 23), (8050, 9000)]),
            vec![(22, 23), (8000, 9000)]
        );
    }
}
