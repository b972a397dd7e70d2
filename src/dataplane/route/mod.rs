//! Routes and routing rules through rtnetlink (netlink sockets on smol).
//!
//! Thin by design: [`spec`] describes routes and rules with device names and no netlink
//! types, [`codec`] encodes requests and reads the kernel's messages (routes, rules, links,
//! addresses: only the attributes edgenetd uses), [`socket`] dumps (the kernel filters routes
//! by protocol; see `dump`) and writes (pipelined, every ack mapped back to its write), and
//! [`monitor`] turns kernel notifications into "maybe sync" events. Nothing here knows about
//! TOML or about what *should* be installed; that is the route controller's job.

pub mod codec;
mod dump;
pub mod link_table;
pub mod message;
pub mod monitor;
pub mod socket;
pub mod spec;
pub mod wire;

pub use link_table::{LinkInfo, LinkKind, LinkTable};
pub use message::Links;
pub use monitor::{RouteEvent, RouteMonitor};
pub use socket::{RouteSocket, RouteWrite, RuleWrite, WriteFailure, WriteOutcome};
pub use spec::{Family, NextHop, RouteKey, RouteSpec, RouteType, RuleAction, RuleSpec, TABLE_MAIN};

/// Why a route operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The netlink socket could not be opened or configured.
    #[error("netlink socket: {0}")]
    Io(String),
    /// The kernel refused the request.
    #[error("{}", kernel_text(*.errno, .message.as_deref()))]
    Kernel {
        /// Positive errno.
        errno: i32,
        /// The kernel's extended-ack message, e.g. "Nexthop has invalid gateway".
        message: Option<String>,
    },
    /// A route names a device that does not exist (yet).
    #[error("device {0} does not exist")]
    NoSuchDevice(String),
    /// The connection task ended.
    #[error("netlink connection closed")]
    Closed,
    /// The kernel never answered a request (its ack was lost).
    #[error("no answer from the kernel")]
    NoAnswer,
    /// The socket's receive buffer overflowed during a dump.
    #[error("netlink receive buffer overrun")]
    Overrun,
}

impl RouteError {
    /// The errno of a kernel error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RouteError::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl From<std::io::Error> for RouteError {
    fn from(e: std::io::Error) -> RouteError {
        RouteError::Io(e.to_string())
    }
}

fn kernel_text(errno: i32, message: Option<&str>) -> String {
    let base = std::io::Error::from_raw_os_error(errno).to_string();
    let base = match base.rfind(" (os error") {
        Some(i) => base[..i].to_string(),
        None => base,
    };
    match message {
        Some(m) if !m.is_empty() => format!("{base}: {m}"),
        _ => base,
    }
}
