//! Names the config and the dataplane share: ICMP and ICMPv6 type names and DSCP names as
//! nft spells them, and IP protocol names as `/etc/protocols` does.
//!
//! A leaf: it imports nothing from the crate, so the config can accept a name and the
//! nftables renderer can print it without either depending on the other.

/// ICMP types with nft's names.
pub const ICMP_TYPES: &[(u8, &str)] = &[
    (0, "echo-reply"),
    (3, "destination-unreachable"),
    (5, "redirect"),
    (8, "echo-request"),
    (9, "router-advertisement"),
    (10, "router-solicitation"),
    (11, "time-exceeded"),
    (12, "parameter-problem"),
    (13, "timestamp-request"),
    (14, "timestamp-reply"),
];

/// ICMPv6 types with nft's names.
pub const ICMPV6_TYPES: &[(u8, &str)] = &[
    (1, "destination-unreachable"),
    (2, "packet-too-big"),
    (3, "time-exceeded"),
    (4, "parameter-problem"),
    (128, "echo-request"),
    (129, "echo-reply"),
    (133, "nd-router-solicit"),
    (134, "nd-router-advert"),
    (135, "nd-neighbor-solicit"),
    (136, "nd-neighbor-advert"),
    (137, "nd-redirect"),
];

/// DSCP code points with nft's names (RFC 2474 class selectors, RFC 2597 assured
/// forwarding, RFC 3246 expedited forwarding, RFC 5865 voice admit, RFC 8622 lower effort,
/// which nft 1.0 calls `lephb`).
pub const DSCP: &[(u8, &str)] = &[
    (0, "cs0"),
    (8, "cs1"),
    (16, "cs2"),
    (24, "cs3"),
    (32, "cs4"),
    (40, "cs5"),
    (48, "cs6"),
    (56, "cs7"),
    (10, "af11"),
    (12, "af12"),
    (14, "af13"),
    (18, "af21"),
    (20, "af22"),
    (22, "af23"),
    (26, "af31"),
    (28, "af32"),
    (30, "af33"),
    (34, "af41"),
    (36, "af42"),
    (38, "af43"),
    (46, "ef"),
    (44, "va"),
    (1, "lephb"),
];

/// IP protocols with their `/etc/protocols` names (netbase's well-known set; `ipv6-icmp`
/// is also `icmpv6`, nft's name).
pub const IP_PROTOCOLS: &[(u8, &str)] = &[
    (0, "ip"),
    (1, "icmp"),
    (2, "igmp"),
    (4, "ipencap"),
    (6, "tcp"),
    (8, "egp"),
    (12, "pup"),
    (17, "udp"),
    (22, "xns-idp"),
    (27, "rdp"),
    (29, "iso-tp4"),
    (33, "dccp"),
    (36, "xtp"),
    (41, "ipv6"),
    (43, "ipv6-route"),
    (44, "ipv6-frag"),
    (46, "rsvp"),
    (47, "gre"),
    (50, "esp"),
    (51, "ah"),
    (58, "ipv6-icmp"),
    (59, "ipv6-nonxt"),
    (60, "ipv6-opts"),
    (88, "eigrp"),
    (89, "ospf"),
    (94, "ipip"),
    (97, "etherip"),
    (98, "encap"),
    (103, "pim"),
    (108, "ipcomp"),
    (112, "vrrp"),
    (115, "l2tp"),
    (124, "isis"),
    (132, "sctp"),
    (135, "mobility-header"),
    (136, "udplite"),
    (137, "mpls-in-ip"),
];

/// The IP protocol called `name` (any case; `icmpv6` too), if known.
pub fn ip_protocol_by_name(name: &str) -> Option<u8> {
    match name.to_ascii_lowercase().as_str() {
        "icmpv6" => Some(58),
        lower => by_name(IP_PROTOCOLS, lower),
    }
}

/// The `/etc/protocols` name of IP protocol `p`, if it has one.
pub fn ip_protocol_name(p: u8) -> Option<&'static str> {
    name_of(IP_PROTOCOLS, p)
}

/// The DSCP called `name` (any case; `le` is fw4's and newer nft's name of `lephb`).
pub fn dscp_by_name(name: &str) -> Option<u8> {
    match name.to_ascii_lowercase().as_str() {
        "le" => Some(1),
        lower => by_name(DSCP, lower),
    }
}

fn by_name(table: &[(u8, &str)], name: &str) -> Option<u8> {
    table.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
}

fn name_of(table: &'static [(u8, &'static str)], t: u8) -> Option<&'static str> {
    table.iter().find(|(n, _)| *n == t).map(|(_, name)| *name)
}

/// The ICMP type called `name`, if known.
pub fn icmp_type_by_name(name: &str) -> Option<u8> {
    by_name(ICMP_TYPES, name)
}

/// The ICMPv6 type called `name`, if known.
pub fn icmpv6_type_by_name(name: &str) -> Option<u8> {
    by_name(ICMPV6_TYPES, name)
}

/// nft's name of ICMP type `t`, if it has one.
pub fn icmp_type_name(t: u8) -> Option<&'static str> {
    name_of(ICMP_TYPES, t)
}

/// nft's name of ICMPv6 type `t`, if it has one.
pub fn icmpv6_type_name(t: u8) -> Option<&'static str> {
    name_of(ICMPV6_TYPES, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_round_trip() {
        for &(t, name) in ICMP_TYPES {
            assert_eq!(
                (icmp_type_by_name(name), icmp_type_name(t)),
                (Some(t), Some(name))
            );
        }
        for &(t, name) in ICMPV6_TYPES {
            assert_eq!(
                (icmpv6_type_by_name(name), icmpv6_type_name(t)),
                (Some(t), Some(name))
            );
        }
        for &(d, name) in DSCP {
            assert_eq!(dscp_by_name(name), Some(d));
            assert_eq!(dscp_by_name(&name.to_uppercase()), Some(d));
        }
        assert_eq!((dscp_by_name("le"), dscp_by_name("af44")), (Some(1), None));
        for &(p, name) in IP_PROTOCOLS {
            assert_eq!(
                (ip_protocol_by_name(name), ip_protocol_name(p)),
                (Some(p), Some(name))
            );
        }
        assert_eq!(
            (ip_protocol_by_name("GRE"), ip_protocol_by_name("icmpv6")),
            (Some(47), Some(58))
        );
        assert_eq!(ip_protocol_by_name("nope"), None);
        assert_eq!(icmp_type_by_name("nd-router-advert"), None);
        assert_eq!(icmpv6_type_name(200), None);
    }
}
