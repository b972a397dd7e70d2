//! The wire format: one JSON object per line each way, then the daemon closes the
//! connection. Requests are bounded ([`MAX_REQUEST`]) so a client cannot make the daemon
//! buffer without limit.

use serde_json::{Value, json};

/// The largest request the daemon reads: a main config file of a few megabytes (100,000
/// routes are 5 MB) fits; anything larger is refused without being buffered.
pub const MAX_REQUEST: usize = 8 << 20;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// What to show the operator (the diff and deadline, or every problem).
    pub text: String,
}

// The messages go through `serde_json::Value` by hand rather than derived (de)serializers:
// the binary already carries `Value`, and a derived internally tagged enum costs tens of
// kilobytes of an edge router's binary budget.

impl Request {
    /// The request as one line (with its newline).
    pub fn to_line(&self) -> String {
        let value = match self {
            Request::Apply {
                shown_as,
                text,
                confirm_ms,
            } => json!({
                "op": "apply",
                "shown_as": shown_as,
                "text": text,
                "confirm_ms": confirm_ms,
            }),
            Request::Confirm => json!({ "op": "confirm" }),
        };
        value.to_string() + "\n"
    }
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
        json!({ "ok": self.ok, "text": self.text }).to_string() + "\n"
    }

    /// Reads a response line.
    pub fn parse(line: &str) -> Result<Response, String> {
        let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        Ok(Response {
            ok: value["ok"].as_bool().ok_or("no `ok`")?,
            text: text_field(&value, "text")?,
        })
    }
}

/// Reads a request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| format!("not a control request: {e}"))?;
    match value["op"].as_str() {
        Some("apply") => Ok(Request::Apply {
            shown_as: text_field(&value, "shown_as")?,
            text: text_field(&value, "text")?,
            confirm_ms: match &value["confirm_ms"] {
                Value::Null => None,
                ms => Some(
                    ms.as_u64()
                        .ok_or("not a control request: bad `confirm_ms`")?,
                ),
            },
        }),
        Some("confirm") => Ok(Request::Confirm),
        _ => Err(format!(
            "not a control request: unknown `op` {}",
            value["op"]
        )),
    }
}

fn text_field(value: &Value, key: &str) -> Result<String, String> {
    value[key]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("not a control message: no text `{key}`"))
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
        let line = req.to_line();
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert_eq!(parse_request(line.trim_end().as_bytes()).unwrap(), req);
        let response = Response::failed("a\nb\n");
        assert_eq!(Response::parse(&response.to_line()).unwrap(), response);
        assert_eq!(
            parse_request(br#"{"op":"confirm"}"#).unwrap(),
            Request::Confirm
        );
        assert!(parse_request(b"{\"op\":\"reboot\"}").is_err());
    }
}
