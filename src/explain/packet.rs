//! The packet being explained, as the interpreter sees it at one point of its path.

use std::net::IpAddr;

use crate::dataplane::nft::ir::{CT_STATE_ESTABLISHED, CT_STATE_NEW};

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
}

impl Proto {
    /// The IP protocol number (`meta l4proto`).
    pub fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
            Proto::Icmp => 1,
            Proto::Icmpv6 => 58,
        }
    }

    /// True for the protocols with ports.
    pub fn has_ports(self) -> bool {
        matches!(self, Proto::Tcp | Proto::Udp)
    }

    /// The name as typed on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Icmpv6 => "icmpv6",
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

    /// The `ct state` bits of a first packet or of an established connection.
    pub fn state_bits(established: bool) -> u32 {
        if established {
            CT_STATE_ESTABLISHED
        } else {
            CT_STATE_NEW
        }
    }
}
