//! The packet header fields rules match, each declared once: its nft text, where the kernel
//! loads it from, the protocol matches it depends on, and what `explain` reads for it.
//!
//! The rule compiler (`build/rule.rs`), the text (`text.rs`),
//! [`Expr::byte_len`](super::ir::Expr) and `explain` all read [`Field::def`]; none of them keeps a table of its own. A new field is
//! a variant here and its arm in [`Field::def`]; when it needs something new from the packet,
//! a [`Reads`] variant, whose exhaustive matches in `explain` the compiler then lists. A
//! field whose values are plain numbers (perhaps with names) says so in [`FieldDef::numeric`]
//! and needs no value type of its own: its constants are `Value::Field(field, n)` and its
//! sets' keys `DataType::Field(field)`.

/// Declares [`Field`] and [`Field::ALL`] from one list, so that a variant cannot be added
/// to the enum and missed by the readers that walk every field.
macro_rules! fields {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        /// Packet header fields read by `payload`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Field {
            $($(#[$doc])* $variant,)*
        }

        impl Field {
            /// Every field, in declaration order, for readers that look a loaded field up
            /// by its bytes (the lift of kernel expressions, the mask test).
            pub const ALL: &'static [Field] = &[$(Field::$variant),*];
        }
    };
}

fields! {
    /// `ip saddr`.
    IpSaddr,
    /// `ip daddr`.
    IpDaddr,
    /// `ip6 saddr`.
    Ip6Saddr,
    /// `ip6 daddr`.
    Ip6Daddr,
    /// `tcp dport`.
    TcpDport,
    /// `udp dport`.
    UdpDport,
    /// `th dport` (any transport header with ports; pair with `meta l4proto`).
    ThDport,
    /// `th sport`.
    ThSport,
    /// `icmp type`.
    IcmpType,
    /// `icmpv6 type`.
    Icmpv6Type,
    /// `tcp flags` (1 byte; match with `Stmt::Flags` and `Value::TcpFlags`).
    TcpFlags,
    /// `ip dscp`: the upper 6 bits of the IPv4 header's TOS byte.
    IpDscp,
    /// `ip6 dscp`: the upper 6 bits of the IPv6 header's traffic class (bits 4-9).
    Ip6Dscp,
}

/// The header a field is loaded from (the kernel's payload base).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Base {
    /// The network header (IPv4 or IPv6).
    Network,
    /// The transport header.
    Transport,
}

impl Base {
    /// The kernel's `NFT_PAYLOAD_*_HEADER` number.
    pub fn code(self) -> u32 {
        match self {
            Base::Network => 1,
            Base::Transport => 2,
        }
    }
}

/// What `explain` takes from the packet it is asked about for a field (once the field's
/// protocol dependencies hold for that packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reads {
    /// The source address.
    Saddr,
    /// The destination address.
    Daddr,
    /// The destination port (packets with ports only).
    Dport,
    /// The source port (packets with ports only).
    Sport,
    /// The ICMP type (`Value::IcmpType`).
    IcmpType,
    /// The ICMPv6 type (`Value::Icmpv6Type`).
    Icmpv6Type,
    /// The TCP flags a first packet or an established connection's packet carries.
    TcpFlags,
    /// The DSCP of the IP header (`Value::Field`).
    Dscp,
}

/// One field's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDef {
    /// How nft writes it (`ip saddr`).
    pub text: &'static str,
    /// The header it is loaded from.
    pub base: Base,
    /// Offset in bytes from the start of that header.
    pub offset: u32,
    /// Bytes loaded (also the length of the value in a register).
    pub len: u32,
    /// The bits of the loaded bytes that are the field's (`len` bytes), or empty when every
    /// loaded bit is: a field narrower than its bytes is loaded, then masked.
    pub mask: &'static [u8],
    /// `meta nfproto` it needs in an `inet` table (2 = IPv4, 10 = IPv6).
    pub nfproto: Option<u8>,
    /// `meta l4proto` it needs (6 = tcp, 17 = udp, 1 = icmp, 58 = icmpv6).
    pub l4proto: Option<u8>,
    /// What `explain` reads for it.
    pub reads: Reads,
    /// For a field whose values are plain numbers: how they are typed, placed and named.
    pub numeric: Option<Numeric>,
}

impl FieldDef {
    /// Where the internet checksum over this field's bytes is (the header's offset), for a
    /// write of the field to update it: the IPv4 header's, at byte 10. A transport field's
    /// checksum also covers a pseudo-header: no field written so far needs one.
    pub fn write_checksum(&self) -> Option<u32> {
        (self.base == Base::Network && self.nfproto == Some(NFPROTO_IPV4)).then_some(10)
    }
}

/// How the numbers of a numeric field are typed, placed in the loaded bytes and named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numeric {
    /// nft's data type id of its values (the key type of a set of them).
    pub type_id: u32,
    /// nft's name of that type (`type <name>` in a set declaration).
    pub type_name: &'static str,
    /// Bits the value sits above the least significant bit of the loaded bytes (the zeros
    /// of the mask below it): a value `n` is the big-endian `n << shift` in `len` bytes.
    pub shift: u32,
    /// The names nft prints (and reads) for some values; the others are written as numbers.
    pub names: &'static [(u8, &'static str)],
}

impl Numeric {
    /// The name nft prints for `n`, if it has one.
    pub fn name(&self, n: u32) -> Option<&'static str> {
        self.names
            .iter()
            .find(|(v, _)| u32::from(*v) == n)
            .map(|(_, name)| *name)
    }
}

/// DSCP values: nft's type `dscp` (36), named as nft names them.
const DSCP: Numeric = Numeric {
    type_id: 36,
    type_name: "dscp",
    shift: 2,
    names: crate::names::DSCP,
};

const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// A field of the IPv4 header.
const fn ip(text: &'static str, offset: u32, len: u32, reads: Reads) -> FieldDef {
    FieldDef {
        text,
        base: Base::Network,
        offset,
        len,
        mask: &[],
        nfproto: Some(NFPROTO_IPV4),
        l4proto: None,
        reads,
        numeric: None,
    }
}

/// A field of the IPv6 header.
const fn ip6(text: &'static str, offset: u32, len: u32, reads: Reads) -> FieldDef {
    FieldDef {
        nfproto: Some(NFPROTO_IPV6),
        ..ip(text, offset, len, reads)
    }
}

/// A field of the transport header of protocol `l4` (any protocol when `None`).
const fn th(text: &'static str, l4: Option<u8>, offset: u32, len: u32, reads: Reads) -> FieldDef {
    FieldDef {
        text,
        base: Base::Transport,
        offset,
        len,
        mask: &[],
        nfproto: None,
        l4proto: l4,
        reads,
        numeric: None,
    }
}

impl Field {
    /// The field's definition: the one table every reader of fields uses.
    pub const fn def(self) -> &'static FieldDef {
        match self {
            Field::IpSaddr => &const { ip("ip saddr", 12, 4, Reads::Saddr) },
            Field::IpDaddr => &const { ip("ip daddr", 16, 4, Reads::Daddr) },
            Field::Ip6Saddr => &const { ip6("ip6 saddr", 8, 16, Reads::Saddr) },
            Field::Ip6Daddr => &const { ip6("ip6 daddr", 24, 16, Reads::Daddr) },
            Field::TcpDport => &const { th("tcp dport", Some(6), 2, 2, Reads::Dport) },
            Field::UdpDport => &const { th("udp dport", Some(17), 2, 2, Reads::Dport) },
            Field::ThDport => &const { th("th dport", None, 2, 2, Reads::Dport) },
            Field::ThSport => &const { th("th sport", None, 0, 2, Reads::Sport) },
            // As nft does: ICMP only over IPv4, ICMPv6 only over IPv6 (an `inet` table also
            // sees the other family's packets, whose protocol field may hold 1 or 58).
            Field::IcmpType => {
                &const {
                    FieldDef {
                        nfproto: Some(NFPROTO_IPV4),
                        ..th("icmp type", Some(1), 0, 1, Reads::IcmpType)
                    }
                }
            }
            Field::Icmpv6Type => {
                &const {
                    FieldDef {
                        nfproto: Some(NFPROTO_IPV6),
                        ..th("icmpv6 type", Some(58), 0, 1, Reads::Icmpv6Type)
                    }
                }
            }
            Field::TcpFlags => &const { th("tcp flags", Some(6), 13, 1, Reads::TcpFlags) },
            // Loaded as nft loads them: the byte (IPv4) or the two bytes (IPv6) holding the
            // six bits, masked; values compare in place, shifted, never shifted back.
            Field::IpDscp => {
                &const {
                    FieldDef {
                        mask: &[0xfc],
                        numeric: Some(DSCP),
                        ..ip("ip dscp", 1, 1, Reads::Dscp)
                    }
                }
            }
            Field::Ip6Dscp => {
                &const {
                    FieldDef {
                        mask: &[0x0f, 0xc0],
                        numeric: Some(Numeric { shift: 6, ..DSCP }),
                        ..ip6("ip6 dscp", 0, 2, Reads::Dscp)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mask_covers_exactly_the_bytes_loaded() {
        for &f in Field::ALL {
            let d = f.def();
            assert!(
                d.mask.is_empty() || d.mask.len() == d.len as usize,
                "{f:?}: a {}-byte mask on {} bytes",
                d.mask.len(),
                d.len
            );
            // A numeric field's shift is where its mask starts, and every named value
            // fits the mask.
            if let Some(n) = d.numeric {
                let mask = d.mask.iter().fold(0u32, |m, b| (m << 8) | u32::from(*b));
                assert_eq!(n.shift, mask.trailing_zeros(), "{f:?}");
                for (v, name) in n.names {
                    assert_eq!(u32::from(*v) << n.shift & !mask, 0, "{f:?} {name}");
                }
            }
        }
    }
}
