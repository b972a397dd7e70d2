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
        /// The daemon the client means.
        target: Target,
    },
    /// Make the pending configuration the confirmed one.
    Confirm {
        /// The daemon the client means.
        target: Target,
    },
}

/// Which daemon a request is meant for: a daemon that is another one refuses it before it
/// changes anything (`apply --target CONFIG`, `--netns NAME`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The main config file the daemon must run (canonical path), if the client said.
    pub config: Option<String>,
    /// The network namespace the daemon must program, if the client said.
    pub netns: Option<String>,
}

/// Who answered: shown by `apply` and `confirm`, so the operator sees which daemon changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonId {
    /// Its process id.
    pub pid: u32,
    /// Its main config file (canonical path).
    pub config: String,
    /// The network namespace it programs (`None`: the one it was started in).
    pub netns: Option<String>,
}

impl DaemonId {
    /// Why this daemon is not the one `target` means; `None` when it is.
    pub fn mismatch(&self, target: &Target) -> Option<String> {
        if let Some(config) = target.config.as_deref().filter(|c| *c != self.config) {
            return Some(format!(
                "this daemon runs main config {}, not {config}",
                self.config
            ));
        }
        match (&target.netns, &self.netns) {
            (Some(want), have) if Some(want) != have.as_ref() => Some(format!(
                "this daemon programs network namespace {}, not {want}",
                have.as_deref().unwrap_or("- (the one it was started in)")
            )),
            _ => None,
        }
    }
}

impl std::fmt::Display for DaemonId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {}, main config {}, netns {}",
            self.pid,
            self.config,
            self.netns.as_deref().unwrap_or("-")
        )
    }
}

/// What the daemon answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// What to show the operator (the diff and deadline, or every problem).
    pub text: String,
    /// The daemon that answered (`None` from a daemon too old to say).
    pub daemon: Option<DaemonId>,
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
                target,
            } => json!({
                "op": "apply",
                "shown_as": shown_as,
                "text": text,
                "confirm_ms": confirm_ms,
                "target": target.config,
                "netns": target.netns,
            }),
            Request::Confirm { target } => json!({
                "op": "confirm",
                "target": target.config,
                "netns": target.netns,
            }),
        };
        value.to_string() + "\n"
    }

    /// The daemon the request is meant for.
    pub fn target(&self) -> &Target {
        match self {
            Request::Apply { target, .. } | Request::Confirm { target } => target,
        }
    }
}

impl Response {
    /// A request carried out.
    pub fn done(text: impl Into<String>) -> Response {
        Response {
            ok: true,
            text: text.into(),
            daemon: None,
        }
    }

    /// A request refused or failed; nothing changed unless `text` says otherwise.
    pub fn failed(text: impl Into<String>) -> Response {
        Response {
            ok: false,
            text: text.into(),
            daemon: None,
        }
    }

    /// The response as one line (with its newline).
    pub fn to_line(&self) -> String {
        let daemon = self
            .daemon
            .as_ref()
            .map(|d| json!({ "pid": d.pid, "config": d.config, "netns": d.netns }));
        json!({ "ok": self.ok, "text": self.text, "daemon": daemon }).to_string() + "\n"
    }

    /// Reads a response line.
    pub fn parse(line: &str) -> Result<Response, String> {
        let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let d = &value["daemon"];
        let daemon = match (d["pid"].as_u64(), d["config"].as_str()) {
            (Some(pid), Some(config)) => Some(DaemonId {
                pid: u32::try_from(pid).map_err(|_| "bad `daemon.pid`")?,
                config: config.to_string(),
                netns: d["netns"].as_str().map(str::to_string),
            }),
            _ => None,
        };
        Ok(Response {
            ok: value["ok"].as_bool().ok_or("no `ok`")?,
            text: text_field(&value, "text")?,
            daemon,
        })
    }
}

/// Reads a request line (without its newline).
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| format!("not a control request: {e}"))?;
    // Absent from an older client's requests: it meant whichever daemon it reached.
    let target = Target {
        config: value["target"].as_str().map(str::to_string),
        netns: value["netns"].as_str().map(str::to_string),
    };
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
            target,
        }),
        Some("confirm") => Ok(Request::Confirm { target }),
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
            target: Target {
                config: Some("/etc/edgenetd/r1.toml".into()),
                netns: Some("r1".into()),
            },
        };
        let line = req.to_line();
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert_eq!(parse_request(line.trim_end().as_bytes()).unwrap(), req);
        let mut response = Response::failed("a\nb\n");
        assert_eq!(Response::parse(&response.to_line()).unwrap(), response);
        response.daemon = Some(DaemonId {
            pid: 42,
            config: "/etc/edgenetd/edgenetd.toml".into(),
            netns: Some("r1".into()),
        });
        assert_eq!(Response::parse(&response.to_line()).unwrap(), response);
        assert_eq!(
            parse_request(br#"{"op":"confirm"}"#).unwrap(),
            Request::Confirm {
                target: Target::default()
            }
        );
        assert!(parse_request(b"{\"op\":\"reboot\"}").is_err());
    }

    #[test]
    fn a_daemon_that_is_not_the_target_says_why() {
        let me = DaemonId {
            pid: 7,
            config: "/etc/edgenetd/a.toml".into(),
            netns: None,
        };
        let target = |config: Option<&str>, netns: Option<&str>| Target {
            config: config.map(str::to_string),
            netns: netns.map(str::to_string),
        };
        assert_eq!(me.mismatch(&Target::default()), None);
        assert_eq!(
            me.mismatch(&target(Some("/etc/edgenetd/a.toml"), None)),
            None
        );
        let other = me
            .mismatch(&target(Some("/etc/edgenetd/b.toml"), None))
            .unwrap();
        assert!(
            other.contains("runs main config /etc/edgenetd/a.toml, not /etc/edgenetd/b.toml"),
            "{other}"
        );
        assert!(
            me.mismatch(&target(None, Some("r1")))
                .unwrap()
                .contains("not r1")
        );
        assert_eq!(
            me.to_string(),
            "pid 7, main config /etc/edgenetd/a.toml, netns -"
        );
    }
}
