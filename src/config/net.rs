//! Address and prefix parsing shared by every config area, with messages that say what was
//! expected.

use std::net::IpAddr;

use ipnet::IpNet;

/// Parses `"10.0.0.0/8"`, `"2001:db8::/32"`, or a bare address (a host prefix: /32 or /128).
/// Host bits set under the mask are an error that suggests the network address.
pub fn parse_prefix(text: &str) -> Result<IpNet, String> {
    // An address never holds a '/': a prefix is not parsed twice.
    if !text.contains('/')
        && let Ok(addr) = text.parse::<IpAddr>()
    {
        return Ok(IpNet::from(addr));
    }
    let net: IpNet = text.parse().map_err(|_| {
        format!("invalid prefix `{text}`: expected an address or address/length, e.g. \"10.0.0.0/24\" or \"2001:db8::/64\"")
    })?;
    if net.trunc() != net {
        return Err(format!(
            "invalid prefix `{text}`: host bits are set; did you mean \"{}\"?",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Parses an IPv4 or IPv6 address.
pub fn parse_addr(text: &str) -> Result<IpAddr, String> {
    text.parse().map_err(|_| {
        format!("invalid address `{text}`: expected an IPv4 or IPv6 address, e.g. \"192.168.1.1\"")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_hosts() {
        assert_eq!(
            parse_prefix("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_prefix("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert_eq!(
            parse_prefix("2001:db8::/32").unwrap().to_string(),
            "2001:db8::/32"
        );
        assert!(
            parse_prefix("10.0.0.1/8")
                .unwrap_err()
                .contains("did you mean \"10.0.0.0/8\"")
        );
        assert!(
            parse_prefix("10.0.0.0/33")
                .unwrap_err()
                .contains("expected an address")
        );
        assert!(parse_addr("192.168.1.300").is_err());
    }
}
