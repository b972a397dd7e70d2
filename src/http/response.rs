//! Answers on the wire: status line, the headers every answer carries, the body.

use std::time::SystemTime;

use super::Reply;
use crate::clock::civil_from_days;

/// The reason phrase for the statuses edgenetd sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// The whole answer; without the body for HEAD.
pub fn encode(reply: &Reply, head_only: bool, now: SystemTime) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nDate: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}",
        reply.status,
        reason(reply.status),
        imf_fixdate(now),
        reply.content_type,
        reply.body.len(),
        if reply.status == 405 {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        },
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if !head_only {
        out.extend_from_slice(reply.body.as_bytes());
    }
    out
}

/// The `Date` header's format (RFC 7231 §7.1.1.1), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn imf_fixdate(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[m as usize - 1],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn head_answers_carry_length_and_date_but_no_body() {
        let reply = Reply::text(200, "ok\n");
        let now = SystemTime::UNIX_EPOCH;
        let full = String::from_utf8(encode(&reply, false, now)).unwrap();
        let head = String::from_utf8(encode(&reply, true, now)).unwrap();
        assert!(
            full.starts_with("HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n")
                && full.ends_with("\r\n\r\nok\n"),
            "{full}"
        );
        assert!(
            head.contains("Content-Length: 3\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        let not_allowed = String::from_utf8(encode(&Reply::text(405, ""), false, now)).unwrap();
        assert!(
            not_allowed.contains("\r\nAllow: GET, HEAD\r\n"),
            "{not_allowed}"
        );
    }

    #[test]
    fn imf_fixdate_known_instants() {
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(
            imf_fixdate(at(784_111_777)),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            imf_fixdate(at(951_782_400)),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            imf_fixdate(at(1_795_994_159)),
            "Sun, 29 Nov 2026 23:15:59 GMT"
        );
    }
}
