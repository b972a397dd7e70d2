//! Request heads, parsed by `httparse` (the parser hyper uses), and the checks HTTP/1.1 asks
//! of a server: one Host header (required from 1.1 on), a known version, a target in origin
//! or absolute form.

use super::Method;

/// Headers accepted in one request head; more is answered 431.
const MAX_HEADERS: usize = 64;

/// A complete, acceptable request head.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// The request method.
    pub method: Method,
    /// The target in origin form (`/path?query`), also when it came in absolute form.
    pub path: String,
}

/// Why a request head is refused; each maps to one status code.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejection {
    /// 400, with the reason.
    BadRequest(&'static str),
    /// 431: too many or too large header fields.
    TooLarge,
    /// 505: an HTTP version other than 1.0 and 1.1.
    Version,
}

/// Parses `buf`: Ok(None) while the head is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, Rejection> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => return Ok(None),
        Ok(httparse::Status::Complete(_)) => {}
        Err(httparse::Error::TooManyHeaders) => return Err(Rejection::TooLarge),
        Err(httparse::Error::Version) if names_a_version(buf) => return Err(Rejection::Version),
        Err(_) => return Err(Rejection::BadRequest("malformed request head")),
    }
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Rejection::BadRequest("malformed request line"));
    };
    let hosts = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .count();
    if hosts > 1 {
        return Err(Rejection::BadRequest("more than one Host header"));
    }
    if hosts == 0 && minor >= 1 {
        return Err(Rejection::BadRequest(
            "HTTP/1.1 request without a Host header",
        ));
    }
    Ok(Some(Head {
        method: Method::parse(method),
        path: origin_form(target)?,
    }))
}

/// Whether the request line's third word looks like an HTTP version (so an unknown version
/// gets 505, while a line with a stray space stays a plain 400).
fn names_a_version(buf: &[u8]) -> bool {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let words: Vec<&[u8]> = line.trim_ascii().split(|&b| b == b' ').collect();
    words.len() == 3 && words[2].starts_with(b"HTTP/")
}

/// `/p?q` as is; `http://host:port/p?q` as `/p?q`; anything else (`*`, authority form) 400.
fn origin_form(target: &str) -> Result<String, Rejection> {
    if target.starts_with('/') {
        return Ok(target.to_string());
    }
    let lower = target.to_ascii_lowercase();
    let rest = ["http://", "https://"]
        .iter()
        .find_map(|scheme| lower.starts_with(scheme).then(|| &target[scheme.len()..]))
        .ok_or(Rejection::BadRequest(
            "request target is not a path or an http URL",
        ))?;
    let path_at = rest.find(['/', '?']).unwrap_or(rest.len());
    if path_at == 0 {
        return Err(Rejection::BadRequest("absolute URL without a host"));
    }
    Ok(match &rest[path_at..] {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(head: &str) -> Head {
        parse(head.as_bytes()).unwrap().expect("complete")
    }

    #[test]
    fn origin_and_absolute_form_targets() {
        let want = Head {
            method: Method::Get,
            path: "/healthz?x=1".into(),
        };
        assert_eq!(ok("GET /healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"), want);
        assert_eq!(
            ok("GET http://10.0.0.1:9750/healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            want
        );
        assert_eq!(ok("GET HTTP://a HTTP/1.0\r\n\r\n").path, "/");
        assert_eq!(ok("HEAD /metrics HTTP/1.0\r\n\r\n").method, Method::Head);
        assert_eq!(ok("DELETE /livez HTTP/1.0\r\n\r\n").method, Method::Other);
        for bad in [
            "GET * HTTP/1.1",
            "GET a:80 HTTP/1.1",
            "GET http:///x HTTP/1.1",
        ] {
            let head = format!("{bad}\r\nHost: a\r\n\r\n");
            assert!(
                matches!(parse(head.as_bytes()), Err(Rejection::BadRequest(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn host_is_required_once_from_http_1_1() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Err(Rejection::BadRequest(_))
        ));
        assert!(matches!(
            parse(b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"),
            Err(Rejection::BadRequest(_))
        ));
        assert_eq!(ok("GET / HTTP/1.0\r\n\r\n").path, "/", "1.0 needs no Host");
    }

    #[test]
    fn unknown_versions_garbage_and_partial_heads() {
        assert_eq!(parse(b"GET / HTTP/2.0\r\n\r\n"), Err(Rejection::Version));
        assert_eq!(parse(b"GET / HTTP/1.7\r\n\r\n"), Err(Rejection::Version));
        assert!(matches!(
            parse(b"GET /a b HTTP/1.1\r\n\r\n"),
            Err(Rejection::BadRequest(_))
        ));
        assert!(matches!(
            parse(b"\xff\x00\x137\r\n\r\n"),
            Err(Rejection::BadRequest(_))
        ));
        assert_eq!(
            parse(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "),
            Ok(None)
        );
        let many = format!(
            "GET / HTTP/1.0\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(parse(many.as_bytes()), Err(Rejection::TooLarge));
    }
}
