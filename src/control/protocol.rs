//! The wire format: one JSON object per line each way, then the daemon closes the
//! connection. Requests are bounded ([`MAX_REQUEST`]) so a client cannot make the daemon
//! buffer without limit.

use serde::{Deserialize, Serialize};

/// The largest request the daemon reads: a main config file of a few megabytes (100,000
/// routes are 5 MB) fits; anything larger is refused without being buffered.
pub const MAX_REQUEST: usize = 8 << 20;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Put `text` in place of the main config file and apply it.
    Apply {
        /// The file the text came from, as the client named it (shown in problems).
        shown_as: String,
        /// The new main config file.
        text: String,
        /// Roll back unless confirmed within this many milliseconds; `None` = confirmed
        /// at once.
        confirm_ms: Option<u64>,
    },
    /// Make the pending configuration the confirmed one.
    Confirm,
}

/// What the daemon answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// What to show the operator (the diff and deadline, or every problem).
    pub text: String,
}

impl Response {
    /// A request carried out.
    pub fn done(text: impl Into<String>) -> Response {
        Response {
            ok: true,
            text: text.into(),
        }
    }

    /// A request refused or failed; nothing changed unless `text` says otherwise.
    pub fn failed(text: impl Into<String>) -> Response {
        Response {
            ok: false,
            text: text.into(),
        }
    }

    /// The response as one line (with its newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("serializable") + "\n"
    }
}

/// Reads a request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    serde_json::from_slice(line).map_err(|e| format!("not a control request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_one_line() {
        let req = Request::Apply {
            shown_as: "/tmp/new.toml".into(),
            text: "[policy]\ninput = \"drop\"\n".into(),
            confirm_ms: Some(30_000),
        };
        let line = serde_json::to_string(&req).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(parse_request(line.as_bytes()).unwrap(), req);
        assert_eq!(
            parse_request(br#"{"op":"confirm"}"#).unwrap(),
            Request::Confirm
        );
        assert!(parse_request(b"{\"op\":\"reboot\"}").is_err());
    }
}
