//! What can go wrong talking to the API server; the reflector decides from the variant
//! whether to resume, relist, wait or back off.

use std::time::Duration;

/// One failed request or stream.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint's settings or files (server URL, CA, token, client key) are unusable.
    #[error("{0}")]
    Config(String),
    /// Connecting, the TLS handshake, or reading and writing the connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// Nothing arrived for longer than the idle bound (a hung server or a dead path).
    #[error("no data for {0:?}")]
    Idle(Duration),
    /// The server broke HTTP (bad head, bad chunk framing, truncated body).
    #[error("protocol: {0}")]
    Protocol(String),
    /// A body or a watch line exceeded its bound.
    #[error("{what} longer than {limit} bytes")]
    TooLarge {
        /// What was too large ("list page", "watch line", "response head").
        what: &'static str,
        /// The bound.
        limit: usize,
    },
    /// The server answered with an HTTP error status (or an ERROR watch event).
    #[error("HTTP {code}: {message}")]
    Status {
        /// The HTTP status code (or the Status object's code).
        code: u16,
        /// The server's message, shortened.
        message: String,
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// A body or a watch line was not the JSON expected (the field's path and what was
    /// wrong).
    #[error("decode: {0}")]
    Decode(String),
}

impl Error {
    /// The HTTP status code, when the server gave one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The HTTP status code as text, or the kind of failure without one (the `code` label
    /// of `edgenetd_kubernetes_request_errors_total`).
    pub fn label(&self) -> String {
        match self {
            Error::Status { code, .. } => code.to_string(),
            Error::Config(_) => "config".into(),
            Error::Io(_) => "io".into(),
            Error::Idle(_) => "idle".into(),
            Error::Protocol(_) => "protocol".into(),
            Error::TooLarge { .. } => "too_large".into(),
            Error::Decode(_) => "decode".into(),
        }
    }

    /// True for 410 Gone: the resourceVersion (or continue token) is too old; relist.
    pub fn is_gone(&self) -> bool {
        self.code() == Some(410)
    }
}
