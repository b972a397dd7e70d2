//! `[service.health]` keys of issue 12 and `fallback`: values read, errors at their place.

use super::*;
use crate::config::load_str;

fn service(body: &str) -> Result<Service, String> {
    let text = format!(
        "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\nbackends = [\"10.0.1.5:8080\"]\n{body}"
    );
    load_str(&[("edgenetd.toml", text.as_str())])
        .map(|s| Service::clone(&s.services.services[0]))
        .map_err(|e| e.rendered)
}

#[test]
fn new_check_kinds_initial_and_fallback_are_read() {
    let s = service("fallback = \"10.0.9.1:8080\"\n[service.health]\ncheck = \"udp\"\nsend = \"ping\"\nexpect_bytes = \"pong\"\ninitial = \"down\"\n").unwrap();
    assert_eq!(s.fallback, Some("10.0.9.1:8080".parse().unwrap()));
    assert_eq!(s.backend_check.initial, Initial::Down);
    assert_eq!(
        s.backend_check.check,
        BackendCheckKind::Udp {
            send: b"ping".to_vec(),
            expect: Some(b"pong".to_vec())
        }
    );
    let s = service("[service.health]\ncheck = \"udp\"\n").unwrap();
    assert_eq!(
        s.backend_check.check,
        BackendCheckKind::Udp {
            send: vec![],
            expect: None
        }
    );
    assert_eq!(
        s.backend_check.initial,
        Initial::Up,
        "the default start state is up"
    );
    assert_eq!(s.fallback, None);
    let s = service("[service.health]\ncheck = \"dns\"\nquery_name = \"example.com.\"\n").unwrap();
    assert_eq!(
        s.backend_check.check,
        BackendCheckKind::Dns {
            query_name: "example.com".into()
        }
    );
    let s = service("[service.health]\ncheck = \"tls\"\nsni = \"www.example.com\"\n").unwrap();
    assert_eq!(
        s.backend_check.check,
        BackendCheckKind::Tls {
            sni: Some("www.example.com".into())
        }
    );
    let s = service("[service.health]\ncheck = \"tls\"\n").unwrap();
    assert_eq!(s.backend_check.check, BackendCheckKind::Tls { sni: None });
}

#[test]
fn new_health_keys_are_errors_at_their_place() {
    let e = service(
        "fallback = \"[fd00::1]:80\"\n[service.health]\ncheck = \"dns\"\ninitial = \"maybe\"\nsni = \"x\"\nsend = \"a\"\n",
    )
    .unwrap_err();
    for want in [
        "edgenetd.toml:6:12: error: fallback [fd00::1]:80 is IPv6 but the service address 10.96.0.10 is IPv4",
        "edgenetd.toml:8:9: error: check = \"dns\" needs query_name",
        "edgenetd.toml:9:11: error: invalid initial `maybe`: expected \"up\" or \"down\"",
        "edgenetd.toml:10:7: error: `sni` applies only to check = \"tls\"",
        "edgenetd.toml:11:8: error: `send` applies only to check = \"udp\"",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
    let e =
        service("fallback = \"nowhere\"\n[service.health]\ncheck = \"tls\"\nsni = \"10.0.0.1\"\n")
            .unwrap_err();
    for want in [
        "edgenetd.toml:6:12: error: invalid fallback `nowhere`: expected \"address:port\"",
        "edgenetd.toml:9:7: error: invalid sni `10.0.0.1`: expected a host name",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
    let e = service("[service.health]\ncheck = \"dns\"\nquery_name = \"a..b\"\n").unwrap_err();
    assert!(
        e.contains("edgenetd.toml:8:14: error: invalid query_name `a..b`"),
        "{e}"
    );
    let e = service("[service.health]\ncheck = \"udp\"\nexpect_bytes = \"\"\n").unwrap_err();
    assert!(
        e.contains("edgenetd.toml:8:16: error: empty expect_bytes"),
        "{e}"
    );
    let e = service("[service.health]\ncheck = \"icmp\"\n").unwrap_err();
    assert!(
        e.contains("edgenetd.toml:7:9: error: invalid check `icmp`: expected \"none\", \"tcp\", \"http\", \"udp\", \"dns\" or \"tls\""),
        "{e}"
    );
}

#[test]
fn sctp_services_are_read_and_take_no_health_check_but_none() {
    let text = |health: &str| {
        format!(
            "[[service]]\nname = \"sig\"\naddress = \"10.96.0.10\"\nport = 3868\nprotocol = \"sctp\"\nbackends = [\"10.0.1.5:3868\"]\n{health}"
        )
    };
    let ok = load_str(&[("edgenetd.toml", text("").as_str())]).unwrap();
    let s = &ok.services.services[0];
    assert_eq!(
        (s.protocol, s.protocol.number(), s.protocol.name()),
        (Protocol::Sctp, 132, "sctp")
    );
    assert_eq!(Protocol::from_number(132), Some(Protocol::Sctp));
    assert!(Protocol::ALL.contains(&Protocol::Sctp));
    let none = load_str(&[(
        "edgenetd.toml",
        text("[service.health]\ncheck = \"none\"\n").as_str(),
    )]);
    assert!(none.is_ok(), "check = none is allowed");
    for check in ["tcp", "http", "udp", "tls"] {
        let e = load_str(&[(
            "edgenetd.toml",
            text(&format!("[service.health]\ncheck = \"{check}\"\n")).as_str(),
        )])
        .unwrap_err()
        .rendered;
        let want =
            format!("edgenetd.toml:8:9: error: check = \"{check}\" cannot probe an SCTP backend");
        assert!(e.contains(&want), "missing `{want}` in:\n{e}");
    }
}
