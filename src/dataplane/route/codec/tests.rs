//! The codec against hand-built messages (truncated and garbled ones too), against the
//! library it replaced (the same bytes out, the same specs read back), and against real
//! kernel dumps (the fuzz corpus).

use rtnetlink::packet_core::{NLM_F_DUMP, NLM_F_REQUEST, NetlinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::link::LinkMessage;

use super::header::{HEADER_LEN, NLM_F_CREATE, NLM_F_EXCL};
use super::nla::{begin_nested, end_nested, put_addr, put_attr, put_attr_u32, put_string};
use super::{Malformed, Messages, address, link, reference, route, rule};
use crate::dataplane::route::message::{Links, specs_in_datagram};
use crate::dataplane::route::spec::{Family, NextHop, RouteSpec, RouteType, RuleSpec};
use crate::dataplane::route::{RouteError, RuleAction};

fn links() -> Links {
    let mut l = Links::default();
    l.insert(1, "lo".into());
    l.insert(7, "eth1".into());
    l
}

fn device(name: &str) -> Result<u32, RouteError> {
    links()
        .index(name)
        .ok_or_else(|| RouteError::NoSuchDevice(name.into()))
}

/// The body of the one message in `datagram`.
fn body(datagram: &[u8]) -> &[u8] {
    let len = u32::from_ne_bytes(datagram[..4].try_into().unwrap()) as usize;
    &datagram[HEADER_LEN..len]
}

fn routes() -> Vec<RouteSpec> {
    let base = |dst: &str| RouteSpec::new(dst.parse().unwrap(), 190);
    vec![
        RouteSpec {
            via: Some("192.168.1.1".parse().unwrap()),
            dev: Some("eth1".into()),
            table: 1000,
            metric: 100,
            src: Some("192.168.1.2".parse().unwrap()),
            onlink: true,
            mtu: Some(1400),
            ..base("10.20.0.0/16")
        },
        RouteSpec {
            nexthops: vec![
                NextHop {
                    via: Some("2001:db8::1".parse().unwrap()),
                    dev: Some("eth1".into()),
                    weight: 1,
                    onlink: false,
                },
                NextHop {
                    via: Some("2001:db8::2".parse().unwrap()),
                    dev: None,
                    weight: 256,
                    onlink: true,
                },
            ],
            ..base("2001:db8:100::/48")
        },
        RouteSpec {
            via: Some("fe80::1".parse().unwrap()),
            dev: Some("eth1".into()),
            ..base("0.0.0.0/0")
        },
        RouteSpec {
            kind: RouteType::Unreachable,
            table: 7,
            ..base("10.0.0.0/8")
        },
    ]
}

#[test]
fn routes_written_are_read_back_as_the_same_spec_by_the_codec_and_the_library() {
    for spec in routes() {
        let mut buf = Vec::new();
        route::put_new(&mut buf, &spec, NLM_F_CREATE | NLM_F_EXCL, 1, &mut device).unwrap();
        assert_eq!(route::parse(body(&buf), &links()), Ok(Some(spec.clone())));
        assert_eq!(reference::parse(&buf, &links()).0, Some(spec.clone()));
    }
}

#[test]
fn every_truncation_of_a_route_is_an_error_or_a_lesser_route_never_a_panic() {
    for spec in routes() {
        let mut buf = Vec::new();
        route::put_new(&mut buf, &spec, 0, 1, &mut device).unwrap();
        let body = body(&buf);
        for cut in 0..body.len() {
            match route::parse(&body[..cut], &links()) {
                Err(Malformed(_)) => {}
                // Cut at an attribute boundary: a route without its last attributes (before
                // RTA_DST's end, the family's zero address with the header's prefix length).
                Ok(Some(read)) => {
                    assert_eq!(read.dst.prefix_len(), spec.dst.prefix_len(), "cut at {cut}");
                    assert!(read.dst == spec.dst || cut <= 32, "cut at {cut}");
                }
                Ok(None) => panic!("cut at {cut}: no route"),
            }
        }
        assert_eq!(route::parse(&body[..11], &links()), Err(Malformed("rtmsg")));
    }
}

#[test]
fn garbled_route_attributes_are_errors() {
    let mut buf = Vec::new();
    let spec = &routes()[0];
    route::put_new(&mut buf, spec, 0, 1, &mut device).unwrap();
    let mut garbled = body(&buf).to_vec();
    // RTA_DST's length (first attribute after the 12-byte rtmsg) says 200.
    garbled[12..14].copy_from_slice(&200u16.to_ne_bytes());
    assert!(route::parse(&garbled, &links()).is_err());
    // A 5-byte address.
    let mut odd = body(&buf)[..12].to_vec();
    put_attr(&mut odd, 1, &[10, 0, 0, 0, 1]);
    assert_eq!(
        route::parse(&odd, &links()),
        Err(Malformed("address attribute"))
    );
    // A prefix length past the family's.
    let mut long = body(&buf).to_vec();
    long[1] = 33;
    assert_eq!(
        route::parse(&long, &links()),
        Err(Malformed("prefix length"))
    );
    // A multipath whose next hop claims more than there is.
    let mut hops = body(&buf)[..12].to_vec();
    let at = begin_nested(&mut hops, 9);
    hops.extend_from_slice(&[64, 0, 0, 0, 7, 0, 0, 0]);
    end_nested(&mut hops, at);
    assert_eq!(
        route::parse(&hops, &links()),
        Err(Malformed("rtnexthop length"))
    );
}

#[test]
fn clones_and_other_families_are_not_routes() {
    let mut buf = Vec::new();
    route::put_new(&mut buf, &routes()[3], 0, 1, &mut device).unwrap();
    let mut clone = body(&buf).to_vec();
    clone[8..12].copy_from_slice(&0x200u32.to_ne_bytes());
    assert_eq!(route::parse(&clone, &links()), Ok(None));
    let mut mpls = body(&buf).to_vec();
    mpls[0] = 28;
    assert_eq!(route::parse(&mpls, &links()), Ok(None));
}

#[test]
fn rules_written_are_read_back_as_the_same_spec_by_the_codec_and_the_library() {
    let mut full = RuleSpec::new(Family::Ipv4, 1000, 100, 190);
    full.from = Some("10.0.5.0/24".parse().unwrap());
    full.to = Some("10.9.0.0/16".parse().unwrap());
    full.iif = Some("eth1".into());
    full.oif = Some("eth2".into());
    full.fwmark = Some(7);
    full.fwmask = Some(0xff);
    let mut other = RuleSpec::new(Family::Ipv6, 9, 0, 190);
    other.action = RuleAction::Other(6);
    for spec in [full, other] {
        let mut buf = Vec::new();
        rule::put(&mut buf, rule::RTM_NEWRULE, &spec, 0, 1);
        assert_eq!(rule::parse(body(&buf)), Ok(Some(spec.clone())));
        assert_eq!(reference::parse(&buf, &links()).1, Some(spec.clone()));
        assert_eq!(rule::protocol(body(&buf)), Ok(190));
        for cut in 0..body(&buf).len() {
            // Never a panic; at an attribute boundary, a rule without its last attributes.
            let _ = rule::parse(&body(&buf)[..cut]);
        }
        assert!(rule::parse(&body(&buf)[..11]).is_err());
    }
}

#[test]
fn dump_requests_are_the_bytes_the_library_sends() {
    let library = |body: RouteNetlinkMessage| {
        let mut msg = NetlinkMessage::from(body);
        msg.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        msg.header.sequence_number = 9;
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        buf
    };
    for family in [Family::Ipv4, Family::Ipv6] {
        let mut ours = Vec::new();
        route::put_dump(&mut ours, family, 190, 9);
        let lib = library(RouteNetlinkMessage::GetRoute(
            reference::route_dump_message(family, 190),
        ));
        assert_eq!(ours, lib);
        let mut ours = Vec::new();
        rule::put_dump(&mut ours, family, 9);
        let lib = library(RouteNetlinkMessage::GetRule(reference::rule_dump_message(
            family,
        )));
        assert_eq!(ours, lib);
    }
    let mut ours = Vec::new();
    link::put_dump(&mut ours, 9);
    assert_eq!(
        ours,
        library(RouteNetlinkMessage::GetLink(LinkMessage::default()))
    );
    let mut ours = Vec::new();
    address::put_dump(&mut ours, 9);
    assert_eq!(
        ours,
        library(RouteNetlinkMessage::GetAddress(AddressMessage::default()))
    );
}

/// An `RTM_NEWLINK` body as the kernel sends one, with attributes edgenetd skips around the
/// ones it reads.
fn vlan_link() -> Vec<u8> {
    let mut b = vec![0u8; 16];
    b[2..4].copy_from_slice(&1u16.to_ne_bytes());
    b[4..8].copy_from_slice(&12u32.to_ne_bytes());
    put_attr_u32(&mut b, 4, 1500); // IFLA_MTU, skipped
    put_string(&mut b, 3, "eth0.7");
    put_attr(&mut b, 7, &[0; 64]); // IFLA_STATS, skipped
    put_attr_u32(&mut b, 10, 3);
    put_attr_u32(&mut b, 5, 2);
    let info = begin_nested(&mut b, 18 | 0x8000);
    put_string(&mut b, 1, "vlan");
    let data = begin_nested(&mut b, 2);
    put_attr(&mut b, 1, &7u16.to_ne_bytes());
    end_nested(&mut b, data);
    end_nested(&mut b, info);
    b
}

#[test]
fn a_link_gives_its_index_name_kind_master_and_lower_device() {
    assert_eq!(
        link::parse(&vlan_link()),
        Ok(link::Link {
            index: 12,
            name: Some("eth0.7".into()),
            ppp: false,
            kind: Some("vlan".into()),
            master: Some(3),
            lower: Some(2),
        })
    );
    let mut ppp = vec![0u8; 16];
    ppp[2..4].copy_from_slice(&512u16.to_ne_bytes());
    assert!(link::parse(&ppp).unwrap().ppp);
    let body = vlan_link();
    for cut in 0..body.len() {
        if let Ok(read) = link::parse(&body[..cut]) {
            assert_eq!(read.index, 12, "cut at {cut}");
        }
    }
    assert_eq!(link::parse(&body[..15]), Err(Malformed("ifinfomsg")));
    let mut bad_name = body[..16].to_vec();
    put_attr(&mut bad_name, 3, &[0xff, 0xfe, 0]);
    assert_eq!(link::parse(&bad_name), Err(Malformed("string attribute")));
}

#[test]
fn an_address_is_its_local_address_with_its_prefix_length() {
    let ifaddr = |family: u8, len: u8, index: u32| {
        let mut b = vec![family, len, 0, 0];
        b.extend_from_slice(&index.to_ne_bytes());
        b
    };
    // A PPP address: IFA_LOCAL is ours, IFA_ADDRESS the peer's.
    let mut ppp = ifaddr(2, 32, 5);
    put_addr(&mut ppp, 1, "198.51.100.1".parse().unwrap());
    put_addr(&mut ppp, 2, "203.0.113.7".parse().unwrap());
    put_string(&mut ppp, 3, "ppp0"); // IFA_LABEL, skipped
    assert_eq!(
        address::parse(&ppp),
        Ok(Some((5, "203.0.113.7/32".parse().unwrap())))
    );
    let mut v6 = ifaddr(10, 64, 2);
    put_addr(&mut v6, 1, "2001:db8::7".parse().unwrap());
    assert_eq!(
        address::parse(&v6),
        Ok(Some((2, "2001:db8::7/64".parse().unwrap())))
    );
    assert_eq!(address::parse(&ifaddr(2, 24, 1)), Ok(None));
    let mut long = ifaddr(2, 33, 1);
    put_addr(&mut long, 2, "192.0.2.1".parse().unwrap());
    assert_eq!(
        address::parse(&long),
        Err(Malformed("address prefix length"))
    );
    for cut in 0..ppp.len() {
        let _ = address::parse(&ppp[..cut]);
    }
    assert!(address::parse(&ppp[..7]).is_err());
}

#[test]
fn a_datagram_of_route_and_rule_messages_gives_their_specs_and_garbage_gives_none() {
    let route = routes()[0].clone();
    let mut rule = RuleSpec::new(Family::Ipv4, 100, 1000, 190);
    rule.from = Some("10.0.0.0/8".parse().unwrap());
    let mut bytes = Vec::new();
    route::put_new(&mut bytes, &route, 0, 1, &mut device).unwrap();
    rule::put(&mut bytes, rule::RTM_NEWRULE, &rule, 0, 2);
    let (routes, rules) = specs_in_datagram(&bytes, &links());
    assert_eq!(routes, vec![route]);
    assert_eq!(rules, vec![rule.normalized()]);
    for cut in 0..bytes.len() {
        let (routes, rules) = specs_in_datagram(&bytes[..cut], &links());
        assert!(routes.len() + rules.len() <= 2);
    }
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let _ = specs_in_datagram(&garbage, &links());
}

/// The fuzz corpus holds real kernel dumps (`fuzz/seeds/netlink.py`).
fn corpus(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/fuzz/corpus/route_dump/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

#[test]
fn real_kernel_dumps_read_as_the_library_reads_them() {
    let mut compared = 0;
    for name in [
        "routes-v4-0",
        "routes-v4-1",
        "routes-v6-0",
        "routes-v6-1",
        "rules-v4-0",
        "rules-v6-0",
    ] {
        let datagram = corpus(name);
        let mut rest = &datagram[..];
        for msg in Messages::new(&datagram) {
            let msg = msg.unwrap();
            let len = HEADER_LEN + msg.body.len();
            let (lib_route, lib_rule) = reference::parse(&rest[..len], &Links::default());
            match msg.kind {
                route::RTM_NEWROUTE => {
                    assert_eq!(
                        route::parse(msg.body, &Links::default()).ok().flatten(),
                        lib_route,
                        "{name}"
                    );
                    compared += 1;
                }
                rule::RTM_NEWRULE => {
                    assert_eq!(rule::parse(msg.body).ok().flatten(), lib_rule, "{name}");
                    compared += 1;
                }
                _ => {}
            }
            rest = &rest[super::nla::align(len).min(rest.len())..];
        }
    }
    assert!(compared > 10, "{compared} messages compared");
    let (routes, _) = specs_in_datagram(&corpus("routes-v4-0"), &Links::default());
    let ours: Vec<_> = routes.iter().filter(|r| r.protocol == 190).collect();
    assert_eq!(ours.len(), 3, "{routes:?}");
    let (_, rules) = specs_in_datagram(&corpus("rules-v4-0"), &Links::default());
    assert!(
        rules.iter().any(|r| r.priority == 100 && r.table == 1000),
        "{rules:?}"
    );
}
