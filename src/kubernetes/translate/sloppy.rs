//! Addresses as kube-proxy parses them: `netutils.ParseIPSloppy` and `ParseCIDRSloppy`, the
//! parser of Go before 1.17, which reads IPv4 octets with leading zeros as decimal
//! (`172.30.0.041` is 172.30.0.41). The API server accepted such addresses for years and
//! objects written then still carry them; reading them strictly would drop the service.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

/// An address, IPv4 octets with leading zeros read as decimal.
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if text.contains(':') {
        // An IPv6 address whose embedded IPv4 tail has leading zeros.
        let (head, tail) = text.rsplit_once(':')?;
        let v4 = parse_v4(tail)?;
        return format!("{head}:{v4}").parse().ok();
    }
    parse_v4(text).map(IpAddr::V4)
}

/// A prefix `address/length`, the address read as [`parse_ip`] does; host bits are cleared
/// (Go's ParseCIDR returns the network).
pub fn parse_cidr(text: &str) -> Option<IpNet> {
    let (addr, len) = text.split_once('/')?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: u8 = len.trim_start_matches('0').parse().unwrap_or(0);
    IpNet::new(parse_ip(addr)?, len).ok().map(|n| n.trunc())
}

/// Four decimal fields of 0-255, each of at least one digit, leading zeros allowed.
fn parse_v4(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut fields = text.split('.');
    for octet in &mut octets {
        let field = fields.next()?;
        if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = field.trim_start_matches('0');
        *octet = if digits.is_empty() {
            0
        } else if digits.len() > 3 {
            return None;
        } else {
            digits.parse().ok()?
        };
    }
    fields.next().is_none().then_some(Ipv4Addr::from(octets))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases of k8s.io/utils/net's TestParseIPSloppy and of kube-proxy's leading-zero
    /// service addresses.
    #[test]
    fn parse_ip_sloppy_reads_leading_zeros_as_decimal() {
        for (text, want) in [
            ("172.30.0.041", Some("172.30.0.41")),
            ("1.2.3.4", Some("1.2.3.4")),
            ("001.002.003.004", Some("1.2.3.4")),
            ("0000000010.0.0.1", Some("10.0.0.1")),
            ("010.000.000.000", Some("10.0.0.0")),
            ("2001:db8::1", Some("2001:db8::1")),
            ("::ffff:1.2.3.04", Some("::ffff:1.2.3.4")),
            ("1.2.3.256", None),
            ("1.2.3", None),
            ("1.2.3.4.5", None),
            ("1..2.3", None),
            ("1.2.3.4 ", None),
            ("0x1.2.3.4", None),
            ("", None),
        ] {
            let want: Option<IpAddr> = want.map(|w| w.parse().unwrap());
            assert_eq!(parse_ip(text), want, "{text:?}");
        }
    }

    #[test]
    fn parse_cidr_sloppy_reads_leading_zeros_and_returns_the_network() {
        for (text, want) in [
            ("10.0.0.0/8", Some("10.0.0.0/8")),
            ("010.000.000.000/8", Some("10.0.0.0/8")),
            ("192.168.1.7/24", Some("192.168.1.0/24")),
            ("10.0.0.0/08", Some("10.0.0.0/8")),
            ("2001:db8::5/64", Some("2001:db8::/64")),
            ("10.0.0.0/33", None),
            ("10.0.0.0", None),
            ("10.0.0.0/", None),
            ("10.0.0.0/+8", None),
        ] {
            let want: Option<IpNet> = want.map(|w| w.parse().unwrap());
            assert_eq!(parse_cidr(text), want, "{text:?}");
        }
    }
}
