//! The packet being explained, as the interpreter sees it at one point of its path: what
//! it holds, what each header field reads from it, and the ICMP error answering it. A new
//! thing a field reads ([`Reads`]) is an attribute here, which `query` sets.

use std::net::IpAddr;

use crate::dataplane::nft::fields::Reads;
use crate::dataplane::nft::ir::{
    CT_STATE_ESTABLISHED, CT_STATE_NEW, CT_STATE_RELATED, Field, TCP_SYN, Value,
};
use crate::names::ip_protocol_name;

/// ICMP destination unreachable.
const ICMP_DEST_UNREACH: u8 = 3;
/// ICMPv6 destination unreachable.
const ICMPV6_DEST_UNREACH: u8 = 1;

/// The transport protocol asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (IPv4).
    Icmp,
    /// ICMPv6.
    Icmpv6,
    /// Another IP protocol, by number (`--proto gre`, `--proto 47`): no ports, no type.
    Other(u8),
}

impl Proto {
    /// The IP protocol number (`meta l4proto`).
    pub fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
            Proto::Icmp => 1,
            Proto::Icmpv6 => 58,
            Proto::Other(n) => n,
        }
    }

    /// True for the protocols with ports.
    pub fn has_ports(self) -> bool {
        matches!(self, Proto::Tcp | Proto::Udp)
    }

    /// True for ICMP and ICMPv6 (which have a type).
    pub fn is_icmp(self) -> bool {
        matches!(self, Proto::Icmp | Proto::Icmpv6)
    }

    /// The name as typed on the command line (the number of an unnamed protocol).
    pub fn name(self) -> String {
        match self {
            Proto::Tcp => "tcp".into(),
            Proto::Udp => "udp".into(),
            Proto::Icmp => "icmp".into(),
            Proto::Icmpv6 => "icmpv6".into(),
            Proto::Other(n) => ip_protocol_name(n).map_or_else(|| n.to_string(), str::to_string),
        }
    }
}

/// A packet with the conntrack entry it belongs to; NAT rewrites it on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// `meta iifname`.
    pub iif: String,
    /// `meta oifname`: known after the routing decision (empty before, as in the kernel).
    pub oif: String,
    /// Source address (rewritten by SNAT).
    pub saddr: IpAddr,
    /// Destination address (rewritten by DNAT).
    pub daddr: IpAddr,
    /// Transport protocol.
    pub proto: Proto,
    /// Source port (0 without ports).
    pub sport: u16,
    /// Destination port (0 without ports; rewritten by DNAT).
    pub dport: u16,
    /// ICMP / ICMPv6 type (echo request unless asked otherwise).
    pub icmp_type: u8,
    /// The DSCP of the IP header (`ip dscp`, `ip6 dscp`): 0 unless asked otherwise.
    pub dscp: u8,
    /// `ct state` bits: [`CT_STATE_NEW`] or [`CT_STATE_ESTABLISHED`].
    pub ct_state: u32,
    /// `ct status` bits (DNAT/SNAT done).
    pub ct_status: u32,
    /// `ct mark`.
    pub ct_mark: u32,
    /// `meta mark` (also what route rules' `fwmark` match).
    pub mark: u32,
    /// The destination the client addressed (`ct original ... daddr`), kept through DNAT.
    pub orig_daddr: IpAddr,
    /// The port the client addressed (`ct original proto-dst`).
    pub orig_dport: u16,
    /// When the packet comes (`--at`), in seconds since the epoch (UTC); `None`: not given,
    /// and a time rule's verdict cannot be told.
    pub at: Option<i64>,
}

impl Packet {
    /// True for IPv4.
    pub fn is_v4(&self) -> bool {
        self.saddr.is_ipv4()
    }

    /// True when the connection is established (not its first packet).
    pub fn established(&self) -> bool {
        self.ct_state == CT_STATE_ESTABLISHED
    }

    /// The value of `field` in this packet, its protocol dependencies holding (`None`: a
    /// port of a protocol without ports).
    pub fn read(&self, field: Field) -> Option<Value> {
        let ports = self.proto.has_ports();
        match field.def().reads {
            Reads::Saddr => Some(Value::ip(self.saddr)),
            Reads::Daddr => Some(Value::ip(self.daddr)),
            Reads::Dport => ports.then_some(Value::Port(self.dport)),
            Reads::Sport => ports.then_some(Value::Port(self.sport)),
            Reads::IcmpType => Some(Value::IcmpType(self.icmp_type)),
            Reads::Icmpv6Type => Some(Value::Icmpv6Type(self.icmp_type)),
            // A first packet is a SYN, a packet of an established connection an ACK.
            Reads::TcpFlags => Some(Value::TcpFlags(if self.established() {
                0x10
            } else {
                TCP_SYN
            })),
            Reads::Dscp => Some(Value::Field(field, self.dscp.into())),
        }
    }

    /// The ICMP destination unreachable the router sends from `saddr` when routing
    /// refuses this packet (`ct state related` to it, leaving through its interface).
    pub fn icmp_error(&self, saddr: IpAddr) -> Packet {
        let (proto, icmp_type) = if self.is_v4() {
            (Proto::Icmp, ICMP_DEST_UNREACH)
        } else {
            (Proto::Icmpv6, ICMPV6_DEST_UNREACH)
        };
        Packet {
            iif: String::new(),
            oif: self.iif.clone(),
            saddr,
            daddr: self.saddr,
            proto,
            sport: 0,
            dport: 0,
            icmp_type,
            // As the kernel sends an ICMPv4 error: precedence internetwork control over
            // the refused packet's other TOS bits; an ICMPv6 error, the default class.
            dscp: if self.is_v4() {
                48 | (self.dscp & 7)
            } else {
                0
            },
            ct_state: CT_STATE_RELATED,
            ct_status: 0,
            ct_mark: 0,
            mark: 0,
            orig_daddr: self.saddr,
            orig_dport: 0,
            at: self.at,
        }
    }

    /// The `ct state` bits of a first packet or of an established connection.
    pub fn state_bits(established: bool) -> u32 {
        if established {
            CT_STATE_ESTABLISHED
        } else {
            CT_STATE_NEW
        }
    }
}
