//! edgenetd's own rtnetlink codec: the four kernel objects the route dataplane speaks about
//! (routes, rules, links, addresses), one file each, with the same verbs (`put_*` appends a
//! request to a datagram buffer, `parse` reads one message body the kernel sent).
//!
//! Why not `netlink-packet-route`: it parses and emits every attribute of every rtnetlink
//! message kind, and because messages were parsed at run time all of it was linked in (about
//! 300 KB of code, all resident: start-up touches nearly every page of the binary) for the
//! dozen attributes edgenetd reads. Here only those are read, everything else is skipped by
//! its length, and only what edgenetd sends is emitted. Every length is checked: a truncated
//! or garbled message is [`Malformed`], never a panic.

pub mod address;
pub mod header;
pub mod link;
pub mod nla;
#[cfg(test)]
pub(super) mod reference;
pub mod route;
pub mod rule;
#[cfg(test)]
mod tests;

pub use header::{Message, Messages};

/// A message or attribute the kernel would never send: too short, or a length that does not
/// fit. Names what did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed rtnetlink message ({0})")]
pub struct Malformed(pub &'static str);

/// `AF_INET` as the one byte of an rtnetlink header.
pub const AF_INET: u8 = libc::AF_INET as u8;
/// `AF_INET6` as the one byte of an rtnetlink header.
pub const AF_INET6: u8 = libc::AF_INET6 as u8;
