//! Errors of the nftables dataplane.

use std::io;

/// A batch or object that cannot be built from the IR (a bug or an invalid input upstream).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The IR holds something the kernel cannot express.
    #[error("cannot compile: {0}")]
    Invalid(String),
    /// A name (or comment, log prefix) holds a NUL byte, which netlink strings cannot carry.
    #[error("cannot compile: {what} {name:?} contains a NUL byte")]
    NulInName {
        /// What the string is, e.g. `chain name`.
        what: &'static str,
        /// The string as given.
        name: String,
    },
}

/// One message of a batch that the kernel refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageFailure {
    /// Sequence number of the refused message.
    pub seq: u32,
    /// The caller's tag of the message (see [`super::Batch::tag`]).
    pub tag: u32,
    /// What the message was, e.g. `add rule input` or `add set blocklist`.
    pub what: String,
    /// errno reported by the kernel (positive).
    pub errno: i32,
}

impl std::fmt::Display for MessageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (seq {}): {}",
            self.what,
            self.seq,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

/// Errors talking to nf_tables.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// Socket-level failure (open, send, receive).
    #[error("nftables netlink: {0}")]
    Io(#[from] io::Error),
    /// The kernel refused the batch; nothing of it was applied (batches are atomic).
    #[error("nftables refused the batch: {}", join(.0))]
    Rejected(Vec<MessageFailure>),
    /// The batch could not be built.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// A reply did not parse.
    #[error("nftables netlink: malformed reply: {0}")]
    Malformed(String),
}

fn join(f: &[MessageFailure]) -> String {
    f.iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl NftError {
    /// True when the kernel refused a batch built with [`super::Batch::at_generation`]
    /// because somebody committed since (`ERESTART`): read again and rebuild it.
    pub fn is_restart(&self) -> bool {
        self.failures()
            .iter()
            .any(|f| f.errno == nftnl::nftnl_sys::libc::ERESTART)
    }

    /// The refused messages, when the kernel rejected a batch.
    pub fn failures(&self) -> &[MessageFailure] {
        match self {
            NftError::Rejected(f) => f,
            _ => &[],
        }
    }
}
