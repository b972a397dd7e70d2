//! The keys of dynamic sets (`dynamic`, `timeout`, `size`) and of conntrack helpers
//! (`[policy] helpers`, zone `helpers`): read, and every bad value reported at its
//! file:line:col.

use std::time::Duration;

use edgenetd::config::load_str;

fn errors(toml: &str) -> String {
    load_str(&[("main.toml", toml)])
        .expect_err("config must be rejected")
        .rendered
}

#[test]
fn dynamic_set_keys_are_read() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        "[policy]\n[policy.set.ban]\ntype = \"ipv4\"\nelements = [\"192.0.2.1\"]\ndynamic = true\ntimeout = \"1h30m\"\nsize = 65536\n\n[policy.set.plain]\ntype = \"ipv6\"\n",
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    let ban = &p.sets["ban"];
    assert!(ban.dynamic);
    assert_eq!(ban.timeout, Some(Duration::from_secs(5400)));
    assert_eq!(ban.size, Some(65536));
    let plain = &p.sets["plain"];
    assert_eq!(
        (plain.dynamic, plain.timeout, plain.size),
        (false, None, None)
    );
}

#[test]
fn bad_dynamic_set_keys_are_reported_at_their_place() {
    let out = errors(
        r#"[policy]
[policy.set.a]
type = "ipv4"
timeout = "1h"
size = 10

[policy.set.b]
type = "ipv4"
dynamic = true
timeout = "soon"
size = 0

[policy.set.c]
type = "ipv4"
elements = ["192.0.2.1", "192.0.2.2"]
dynamic = true
timeout = "500ms"
size = 1

[policy.set.d]
type = "ipv4"
dynamic = "yes"
"#,
    );
    for want in [
        "main.toml:4:11: error: `timeout` is for sets other programs fill: add `dynamic = true` or remove `timeout`",
        "main.toml:5:8: error: `size` is for sets other programs fill",
        "main.toml:10:11: error: invalid duration `soon`",
        "main.toml:11:8: error: invalid size 0: expected 1 to 16777216 elements",
        "main.toml:17:11: error: invalid timeout `500ms`: expected from 1s to 365 days",
        "main.toml:18:8: error: size 1 is smaller than the set's own 2 elements",
        "main.toml:22:11: error:",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn helper_keys_are_read() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        "[policy]\nhelpers = [\"ftp\", \"h323\"]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\nhelpers = [\"ftp\", \"h323\"]\n[policy.zone.wan]\ninterfaces = [\"eth0\"]\n",
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    assert_eq!(p.helpers, ["ftp", "h323"]);
    assert_eq!(p.zones["lan"].helpers, ["ftp", "h323"]);
    assert!(p.zones["wan"].helpers.is_empty());
}

#[test]
fn bad_helper_names_are_reported_at_their_place() {
    let out = errors(
        r#"[policy]
helpers = ["ftp", "gopher", "ftp"]

[policy.zone.lan]
interfaces = ["br-lan"]
helpers = ["sip", "nope"]
"#,
    );
    for want in [
        "main.toml:2:19: error: unknown conntrack helper `gopher`: expected one of \"amanda\", \"ftp\"",
        "main.toml:2:29: error: helper `ftp` is listed twice",
        "main.toml:6:12: error: helper `sip` is not declared: add it to `[policy] helpers = [\"sip\", ...]`",
        "main.toml:6:19: error: unknown conntrack helper `nope`",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

/// `[policy.helper.<name>]` (fw4's `config helper`): what a definition loads to, that it
/// declares itself, and each bad key at its place.
#[test]
fn defined_helpers_are_read_and_checked_at_their_place() {
    let ok = edgenetd::config::load_str(&[(
        "main.toml",
        r#"[policy]
[policy.helper.sip-alt]
type = "sip"
protocol = "udp"
port = 5062
[policy.zone.lan]
interfaces = ["br-lan"]
helpers = ["sip-alt"]
"#,
    )])
    .unwrap();
    let p = ok.policy.unwrap();
    assert_eq!(p.helpers, ["sip-alt"]);
    let ports = p.helper_ports("sip-alt").unwrap();
    assert_eq!((ports[0].kernel.as_ref(), ports[0].port), ("sip", 5062));
    let out = edgenetd::config::load_str(&[(
        "main.toml",
        r#"[policy]
[policy.helper.ftp]
type = "ftp"
protocol = "tcp"
port = 2121
[policy.helper.bad]
type = "no such helper name at all"
protocol = "sctp"
port = "1000-1001"
[policy.zone.lan]
interfaces = ["br-lan"]
helpers = ["nope"]
"#,
    )])
    .expect_err("config must be rejected")
    .rendered;
    for e in [
        "main.toml:2:16: error: `ftp` is a built-in helper: give the definition another name",
        "main.toml:7:8: error: invalid helper type `no such helper name at all`",
        "main.toml:8:12: error: invalid helper protocol `sctp`: expected \"tcp\" or \"udp\"",
        "main.toml:9:8: error: a helper follows one server port",
        "main.toml:12:12: error: unknown conntrack helper `nope`",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}
