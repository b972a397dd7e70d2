//! Write requests encoded straight into a datagram buffer (by [`super::codec`]), and the
//! kernel's answers read straight from one.
//!
//! Why field by field into one buffer: at 100,000 routes, building a message value per route
//! (a vector of attribute enums, sized and emitted attribute by attribute, then parsed back on
//! the answer side) was most of the controller's own time in a cold sync.

use super::RouteError;
use super::codec::header::{HEADER_LEN, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLMSG_ERROR};
use super::codec::{route, rule};
use super::message::Links;
use super::socket::{RouteWrite, RuleWrite};

/// Appends the request for one route write (sequence number `seq`, no ack asked: the
/// kernel answers a request without `NLM_F_ACK` only when it fails); the devices are
/// resolved through `links`.
pub fn route_write<'a>(
    buf: &mut Vec<u8>,
    write: &RouteWrite<'a>,
    links: &mut Devices<'a>,
    seq: u32,
) -> Result<(), RouteError> {
    let (spec, flags) = match *write {
        RouteWrite::Add(spec) => (spec, NLM_F_CREATE | NLM_F_EXCL),
        RouteWrite::Replace(spec) => (spec, NLM_F_CREATE | NLM_F_REPLACE),
        RouteWrite::Delete(spec) => {
            route::put_delete(buf, spec, seq);
            return Ok(());
        }
    };
    let start = buf.len();
    let mut device = |name: &'a str| {
        links
            .index(name)
            .ok_or_else(|| RouteError::NoSuchDevice(name.to_string()))
    };
    let written = route::put_new(buf, spec, flags, seq, &mut device);
    if written.is_err() {
        buf.truncate(start);
    }
    written
}

/// The links, with the last device looked up remembered: the routes of a config mostly
/// share one or two devices, and a name lookup hashes the name.
pub struct Devices<'a> {
    links: &'a Links,
    last: Option<(&'a str, u32)>,
}

impl<'a> Devices<'a> {
    /// Looks devices up in `links`.
    pub fn new(links: &'a Links) -> Devices<'a> {
        Devices { links, last: None }
    }

    /// The index of device `name`.
    pub fn index(&mut self, name: &'a str) -> Option<u32> {
        if let Some((last, index)) = self.last
            && last == name
        {
            return Some(index);
        }
        let index = self.links.index(name)?;
        self.last = Some((name, index));
        Some(index)
    }
}

/// Appends the request for one rule write.
pub fn rule_write(buf: &mut Vec<u8>, write: &RuleWrite<'_>, seq: u32) {
    match *write {
        RuleWrite::Add(spec) => {
            rule::put(buf, rule::RTM_NEWRULE, spec, NLM_F_CREATE | NLM_F_EXCL, seq)
        }
        RuleWrite::Delete(spec) => rule::put(buf, rule::RTM_DELRULE, spec, 0, seq),
    }
}

/// One answer of the kernel to a write: its sequence number, and the error (`None` = ack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The sequence number of the request answered.
    pub seq: u32,
    /// Why it failed; `None` for an ack.
    pub error: Option<RouteError>,
}

/// Every `NLMSG_ERROR` answer in one received datagram (other messages are skipped; a
/// truncated message ends the datagram).
pub fn answers(datagram: &[u8]) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while rest.len() >= HEADER_LEN {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < HEADER_LEN || len > rest.len() {
            break;
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let flags = u16::from_ne_bytes([rest[6], rest[7]]);
        let seq = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let payload = &rest[HEADER_LEN..len];
        if kind == NLMSG_ERROR && payload.len() >= 4 {
            let code = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let error = std::num::NonZeroI32::new(code)
                .map(|code| super::socket::kernel_error(code, &payload[4..], flags));
            out.push(Answer { seq, error });
        }
        rest = &rest[len.div_ceil(4).saturating_mul(4).min(rest.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::route::codec::header::{NLM_F_ACK, NLM_F_CAPPED};
    use crate::dataplane::route::codec::reference::{
        route_add_message, route_delete_message, rule_message, serialize,
    };
    use crate::dataplane::route::spec::{Family, NextHop, RouteSpec, RouteType, RuleSpec};
    use rtnetlink::packet_route::RouteNetlinkMessage;

    fn links() -> Links {
        let mut l = Links::default();
        l.insert(1, "lo".into());
        l.insert(7, "eth1".into());
        l
    }

    /// What the library serializes for the same write (the reference).
    fn library(write: &RouteWrite<'_>, seq: u32) -> Vec<u8> {
        let (body, flags) = match *write {
            RouteWrite::Add(s) => (
                RouteNetlinkMessage::NewRoute(route_add_message(s, &links()).unwrap()),
                NLM_F_CREATE | NLM_F_EXCL,
            ),
            RouteWrite::Replace(s) => (
                RouteNetlinkMessage::NewRoute(route_add_message(s, &links()).unwrap()),
                NLM_F_CREATE | NLM_F_REPLACE,
            ),
            RouteWrite::Delete(s) => (RouteNetlinkMessage::DelRoute(route_delete_message(s)), 0),
        };
        serialize(body, flags, seq)
    }

    #[test]
    fn routes_are_encoded_as_the_library_serializes_them() {
        let base = |dst: &str| RouteSpec::new(dst.parse().unwrap(), 190);
        let specs = [
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                dev: Some("eth1".into()),
                ..base("10.0.0.1/32")
            },
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                ..base("10.0.0.16/28")
            },
            RouteSpec {
                dev: Some("eth1".into()),
                table: 1000,
                metric: 100,
                src: Some("192.0.2.1".parse().unwrap()),
                ..base("0.0.0.0/0")
            },
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                onlink: true,
                table: 100,
                ..base("10.9.0.0/16")
            },
            RouteSpec {
                kind: RouteType::Blackhole,
                ..base("2001:db8::/32")
            },
            RouteSpec {
                kind: RouteType::Throw,
                table: 7,
                ..base("10.0.0.0/8")
            },
            RouteSpec {
                via: Some("2001:db8::1".parse().unwrap()),
                dev: Some("lo".into()),
                src: Some("2001:db8::2".parse().unwrap()),
                metric: 5,
                ..base("2001:db8:5::/48")
            },
            RouteSpec {
                kind: RouteType::Other(2),
                ..base("10.1.0.0/16")
            },
            // What used to go through the library: multipath, metrics, RFC 5549 gateways.
            RouteSpec {
                mtu: Some(1400),
                dev: Some("eth1".into()),
                ..base("10.2.0.0/16")
            },
            RouteSpec {
                via: Some("2001:db8::1".parse().unwrap()),
                dev: Some("eth1".into()),
                ..base("10.3.0.0/16")
            },
            RouteSpec {
                nexthops: vec![
                    NextHop {
                        via: Some("192.0.2.2".parse().unwrap()),
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
                src: Some("192.0.2.1".parse().unwrap()),
                mtu: Some(9000),
                ..base("10.4.0.0/16")
            },
            RouteSpec {
                nexthops: vec![NextHop {
                    via: Some("2001:db8::2".parse().unwrap()),
                    dev: Some("lo".into()),
                    weight: 10,
                    onlink: false,
                }],
                via: Some("2001:db8::9".parse().unwrap()),
                ..base("2001:db8:6::/48")
            },
        ];
        for spec in &specs {
            let l = links();
            for write in [
                RouteWrite::Add(spec),
                RouteWrite::Replace(spec),
                RouteWrite::Delete(spec),
            ] {
                let mut ours = Vec::new();
                route_write(&mut ours, &write, &mut Devices::new(&l), 77).unwrap();
                assert_eq!(ours, library(&write, 77), "{write:?}");
            }
        }
        let l = links();
        let missing = RouteSpec {
            dev: Some("eth9".into()),
            ..base("10.0.0.0/8")
        };
        assert_eq!(
            route_write(
                &mut Vec::new(),
                &RouteWrite::Add(&missing),
                &mut Devices::new(&l),
                1
            ),
            Err(RouteError::NoSuchDevice("eth9".into()))
        );
        let hop = NextHop {
            via: None,
            dev: Some("eth9".into()),
            weight: 1,
            onlink: false,
        };
        let missing_hop = RouteSpec {
            nexthops: vec![hop],
            ..base("10.0.0.0/8")
        };
        let mut buf = vec![1, 2, 3, 4];
        assert_eq!(
            route_write(
                &mut buf,
                &RouteWrite::Add(&missing_hop),
                &mut Devices::new(&l),
                1
            ),
            Err(RouteError::NoSuchDevice("eth9".into()))
        );
        assert_eq!(
            buf,
            [1, 2, 3, 4],
            "a failed write leaves the datagram as it was"
        );
        // A delete names no device, so a missing one does not matter.
        assert!(
            route_write(
                &mut Vec::new(),
                &RouteWrite::Delete(&missing),
                &mut Devices::new(&l),
                1
            )
            .is_ok()
        );
    }

    #[test]
    fn answers_map_acks_and_errors_to_their_sequence_numbers() {
        let mut datagram = Vec::new();
        for (seq, code) in [(5u32, 0i32), (6, -libc::EEXIST)] {
            let mut msg = vec![0u8; HEADER_LEN];
            msg[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
            msg[8..12].copy_from_slice(&seq.to_ne_bytes());
            msg.extend_from_slice(&code.to_ne_bytes());
            // The capped echo of the request.
            msg.extend_from_slice(&[0u8; HEADER_LEN]);
            let len = msg.len() as u32;
            msg[..4].copy_from_slice(&len.to_ne_bytes());
            msg[6..8].copy_from_slice(&NLM_F_CAPPED.to_ne_bytes());
            datagram.extend(msg);
        }
        assert_eq!(
            answers(&datagram),
            [
                Answer {
                    seq: 5,
                    error: None
                },
                Answer {
                    seq: 6,
                    error: Some(RouteError::Kernel {
                        errno: libc::EEXIST,
                        message: None
                    })
                }
            ]
        );
        for cut in 0..datagram.len() {
            assert!(answers(&datagram[..cut]).len() <= 2);
        }
    }

    #[test]
    fn rules_are_encoded_as_the_library_serializes_them() {
        let mut full = RuleSpec::new(Family::Ipv4, 1000, 100, 190);
        full.from = Some("10.0.5.0/24".parse().unwrap());
        full.to = Some("10.9.0.0/16".parse().unwrap());
        full.iif = Some("eth1".into());
        full.oif = Some("wg0-long-name".into());
        full.fwmark = Some(7);
        full.fwmask = Some(0xff);
        let mut v6 = RuleSpec::new(Family::Ipv6, 5, 1000, 190);
        v6.from = Some("2001:db8::/32".parse().unwrap());
        let mut other = RuleSpec::new(Family::Ipv4, 9, 0, 190);
        other.action = crate::dataplane::route::RuleAction::Other(6);
        for spec in [full, v6, other] {
            let mut ours = Vec::new();
            rule_write(&mut ours, &RuleWrite::Add(&spec), 3);
            let lib = serialize(
                RouteNetlinkMessage::NewRule(rule_message(&spec)),
                NLM_F_CREATE | NLM_F_EXCL,
                3,
            );
            assert_eq!(ours, lib, "{spec}");
            let mut ours = Vec::new();
            rule_write(&mut ours, &RuleWrite::Delete(&spec), 4);
            let lib = serialize(RouteNetlinkMessage::DelRule(rule_message(&spec)), 0, 4);
            assert_eq!(ours, lib, "{spec}");
        }
        // The ack bit the pipeline sets on the last request of a chunk is where it expects.
        let mut buf = Vec::new();
        rule_write(
            &mut buf,
            &RuleWrite::Delete(&RuleSpec::new(Family::Ipv4, 1, 1, 1)),
            1,
        );
        assert_eq!(u16::from_ne_bytes([buf[6], buf[7]]) & NLM_F_ACK, 0);
    }
}
