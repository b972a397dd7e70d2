//! Every config error kind with its exact place, and conf.d merging.

use std::time::Duration;

use super::*;

fn errors(files: &[(&str, &str)]) -> String {
    load_str(files)
        .expect_err("config must be rejected")
        .rendered
}

#[test]
fn empty_config_takes_documented_defaults() {
    let state = load_str(&[("edgenetd.toml", "")]).unwrap();
    assert_eq!(state.daemon, DaemonSettings::default());
    assert_eq!(state.daemon.listen.to_string(), "127.0.0.1:9750");
    assert_eq!(state.daemon.route_protocol, 190);
    assert_eq!(state.daemon.policy_table(), "edgenetd-policy");
    for name in CONTROLLERS {
        let c = state.controller(name);
        assert!(c.enabled);
        assert_eq!(
            (c.period, c.sync_budget),
            (Duration::from_secs(30), Duration::from_secs(30))
        );
    }
}

#[test]
fn daemon_and_controller_keys_are_read() {
    let state = load_str(&[(
        "edgenetd.toml",
        r#"
[daemon]
listen = "0.0.0.0:9100"
metrics_allow = ["127.0.0.0/8", "192.168.1.7"]
nft_table_prefix = "edge"
route_protocol = 200

[controller.route]
period = "1m30s"
sync_budget = "500ms"

[controller.policy]
enabled = false
"#,
    )])
    .unwrap();
    assert_eq!(state.daemon.listen.to_string(), "0.0.0.0:9100");
    let allow: Vec<String> = state
        .daemon
        .metrics_allow
        .clone()
        .unwrap()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(allow, ["127.0.0.0/8", "192.168.1.7/32"]);
    assert_eq!(state.daemon.route_protocol, 200);
    assert_eq!(state.controller("route").period, Duration::from_secs(90));
    assert_eq!(
        state.controller("route").sync_budget,
        Duration::from_millis(500)
    );
    assert!(!state.controller("policy").enabled);
}

#[test]
fn syntax_error_names_file_line_column_and_shows_a_caret() {
    let out = errors(&[("main.toml", "[daemon]\nlisten = \"x\n")]);
    assert!(
        out.starts_with("main.toml:2:12: error: invalid TOML: invalid basic string, expected `\"`"),
        "{out}"
    );
    assert!(out.contains("2 | listen = \"x"), "{out}");
    assert!(out.contains("  |            ^"), "{out}");
}

#[test]
fn unknown_key_is_an_error_that_lists_the_expected_keys() {
    let out = errors(&[(
        "main.toml",
        "[daemon]\nlisten = \"127.0.0.1:1\"\nlisen = 1\n",
    )]);
    assert!(
        out.starts_with("main.toml:3:1: error: unknown field `lisen`, expected one of `listen`"),
        "{out}"
    );
}

#[test]
fn unknown_section_and_unknown_controller_are_errors() {
    let out = errors(&[(
        "main.toml",
        "[deamon]\n\n[controller.routes]\nperiod = \"1s\"\n",
    )]);
    assert!(
        out.contains("main.toml:1:2: error: unknown section `deamon`, expected one of `daemon`"),
        "{out}"
    );
    assert!(
        out.contains("main.toml:3:13: error: unknown controller `routes`"),
        "{out}"
    );
}

#[test]
fn every_semantic_error_is_reported_at_once_with_its_place() {
    let out = errors(&[(
        "main.toml",
        r#"[daemon]
listen = "localhost"
metrics_allow = ["10.0.0.1/8", "nope"]
nft_table_prefix = "bad name"
route_protocol = 2

[controller.service]
period = "30"
sync_budget = "10ms"
"#,
    )]);
    let expected = [
        "main.toml:2:10: error: invalid listen address `localhost`",
        "main.toml:3:18: error: invalid prefix `10.0.0.1/8`: host bits are set; did you mean \"10.0.0.0/8\"?",
        "main.toml:3:32: error: invalid prefix `nope`",
        "main.toml:4:20: error: invalid nft_table_prefix `bad name`",
        "main.toml:5:18: error: invalid route_protocol 2",
        "main.toml:8:10: error: invalid duration `30`",
        "main.toml:9:15: error: sync_budget `10ms` is too short",
    ];
    for e in expected {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
    assert_eq!(
        load_str(&[(
            "main.toml",
            "[daemon]\nlisten = \"localhost\"\n[controller.service]\nperiod = \"30\"\n"
        )])
        .unwrap_err()
        .count,
        2
    );
}

#[test]
fn syntax_errors_of_one_file_do_not_hide_errors_of_another() {
    let out = errors(&[
        ("main.toml", "[daemon\n"),
        ("conf.d/10.toml", "[daemon]\nroute_protocol = 1\n"),
    ]);
    assert!(out.contains("main.toml:1:"), "{out}");
    assert!(
        out.contains("conf.d/10.toml:2:18: error: invalid route_protocol 1"),
        "{out}"
    );
}

#[test]
fn a_key_set_in_two_files_names_both_places() {
    let out = errors(&[
        ("main.toml", "[daemon]\nlisten = \"127.0.0.1:1\"\n"),
        (
            "conf.d/10-http.toml",
            "\n[daemon]\nlisten = \"127.0.0.1:2\"\n",
        ),
    ]);
    assert!(out.contains("conf.d/10-http.toml:3:1: error: `listen` is set twice: a key may be set in one file only"), "{out}");
    assert!(out.contains("main.toml:2:1: note: first set here"), "{out}");
}

#[test]
fn conf_d_tables_merge_key_by_key() {
    let state = load_str(&[
        (
            "main.toml",
            "[daemon]\nlisten = \"127.0.0.1:1\"\n[controller.route]\nperiod = \"5s\"\n",
        ),
        (
            "conf.d/10.toml",
            "[daemon]\nroute_protocol = 201\n[controller.route]\nsync_budget = \"7s\"\n",
        ),
    ])
    .unwrap();
    assert_eq!(state.daemon.listen.port(), 1);
    assert_eq!(state.daemon.route_protocol, 201);
    let route = state.controller("route");
    assert_eq!(
        (route.period, route.sync_budget),
        (Duration::from_secs(5), Duration::from_secs(7))
    );
}

#[test]
fn conf_d_files_are_read_in_name_order_beside_the_main_file() {
    let dir = std::env::temp_dir().join(format!("edgenetd-confd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::write(dir.join("edgenetd.toml"), "").unwrap();
    std::fs::write(dir.join("conf.d/20-b.toml"), "").unwrap();
    std::fs::write(
        dir.join("conf.d/10-a.toml"),
        "[daemon]\nroute_protocol = 7\n",
    )
    .unwrap();
    std::fs::write(dir.join("conf.d/README"), "not toml").unwrap();
    let files = config_files(&dir.join("edgenetd.toml"));
    let names: Vec<_> = files
        .iter()
        .map(|p| p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["edgenetd.toml", "conf.d/10-a.toml", "conf.d/20-b.toml"]
    );
    let state = load(&dir.join("edgenetd.toml")).unwrap();
    assert_eq!(state.daemon.route_protocol, 7);
    assert_eq!(state.files, files);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A dangling conf.d symlink was filtered out by `is_file()`: one file fewer, silently.
#[test]
fn a_conf_d_entry_that_does_not_resolve_is_a_file_of_the_load_and_a_problem() {
    let dir = std::env::temp_dir().join(format!("edgenetd-confd-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf.d/sub.toml")).unwrap();
    std::fs::write(dir.join("edgenetd.toml"), "").unwrap();
    std::os::unix::fs::symlink("/nonexistent/x.toml", dir.join("conf.d/10-gone.toml")).unwrap();
    let main = dir.join("edgenetd.toml");
    // The directory named *.toml is not a config file; the link is.
    assert_eq!(
        config_files(&main),
        [main.clone(), dir.join("conf.d/10-gone.toml")]
    );
    let err = load(&main).unwrap_err();
    assert_eq!(err.count, 1, "{}", err.rendered);
    assert!(
        err.rendered
            .contains("10-gone.toml: cannot read: a symlink to /nonexistent/x.toml"),
        "{}",
        err.rendered
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_main_file_is_reported() {
    let err = load(Path::new("/nonexistent/edgenetd.toml")).unwrap_err();
    assert!(
        err.rendered
            .contains("/nonexistent/edgenetd.toml: cannot read"),
        "{}",
        err.rendered
    );
}

// ------------------------------------------------------------------ [[service]]

#[test]
fn services_are_read_with_defaults() {
    use crate::config::service::*;
    let state = load_str(&[(
        "edgenetd.toml",
        r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.5:8080", { address = "10.0.1.6:8080", weight = 2 }]

[[service]]
name = "dns6"
address = "fd96::53"
port = 53
protocol = "udp"
backends = ["[fd01::5]:53"]
affinity = "source-ip"
masquerade = true
when_empty = "drop"
[service.health]
check = "http"
path = "/healthz"
expect = "200-299"
interval = "5s"
timeout = "2s"
rise = 1
fall = 2
"#,
    )])
    .unwrap();
    let s = &state.services.services;
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].protocol, Protocol::Tcp);
    assert_eq!(s[0].affinity, Affinity::None);
    assert_eq!(s[0].masquerade, crate::config::service::Masquerade::Never);
    assert_eq!(s[0].when_empty, WhenEmpty::Reject);
    assert_eq!(s[0].backends[1].weight, 2);
    assert_eq!(s[0].backend_check, BackendCheck::default());
    assert_eq!(s[1].protocol, Protocol::Udp);
    assert_eq!(s[1].affinity, Affinity::SourceIp);
    assert_eq!(s[1].when_empty, WhenEmpty::Drop);
    assert_eq!(
        s[1].backend_check,
        BackendCheck {
            check: BackendCheckKind::Http {
                path: "/healthz".into(),
                expect: (200, 299)
            },
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            rise: 1,
            fall: 2,
            initial: Default::default(),
        }
    );
}

#[test]
fn service_errors_point_at_their_place() {
    let e = errors(&[(
        "edgenetd.toml",
        r#"[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["[fd01::5]:8080", "10.0.1.5:8080", "10.0.1.5:8080", "nope"]

[[service]]
name = "web2"
address = "10.96.0.10"
port = 80
protocol = "dccp"
"#,
    )]);
    for want in [
        "edgenetd.toml:5:13: error: backend [fd01::5]:8080 is IPv6 but the service address 10.96.0.10 is IPv4",
        "edgenetd.toml:5:48: error: backend 10.0.1.5:8080 is listed twice",
        "edgenetd.toml:5:65: error: invalid backend `nope`: expected \"address:port\"",
        "edgenetd.toml:11:12: error: invalid protocol `dccp`: expected \"tcp\" or \"udp\" or \"sctp\"",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn duplicate_vip_and_name_name_both_places() {
    let e = errors(&[
        (
            "edgenetd.toml",
            "[[service]]\nname = \"a\"\naddress = \"10.96.0.1\"\nport = 80\n",
        ),
        (
            "conf.d/10-more.toml",
            "[[service]]\nname = \"b\"\naddress = \"10.96.0.1\"\nport = 80\n\n[[service]]\nname = \"a\"\naddress = \"10.96.0.2\"\nport = 80\n",
        ),
    ]);
    for want in [
        "conf.d/10-more.toml:3:11: error: service `b`: 10.96.0.1 port 80 tcp is already used by another service",
        "edgenetd.toml:1:1: note: first used here",
        "conf.d/10-more.toml:7:8: error: duplicate service name `a`",
        "edgenetd.toml:2:8: note: first used here",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn sticky_affinity_takes_a_timeout_in_whole_seconds_from_1s_to_a_day() {
    use crate::config::service::Affinity;
    let svc = |extra: &str| {
        format!(
            "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\nbackends = [\"10.0.1.5:8080\"]\n{extra}"
        )
    };
    let sticky = |extra: &str| {
        load_str(&[("edgenetd.toml", &svc(extra))])
            .unwrap()
            .services
            .services[0]
            .affinity
    };
    assert_eq!(
        sticky("affinity = \"sticky\"\n"),
        Affinity::Sticky {
            timeout: Duration::from_secs(10800)
        }
    );
    assert_eq!(
        sticky("affinity = \"sticky\"\naffinity_timeout = \"1m30s\"\n"),
        Affinity::Sticky {
            timeout: Duration::from_secs(90)
        }
    );
    assert_eq!(
        sticky("affinity = \"sticky\"\naffinity_timeout = \"24h\"\n"),
        Affinity::Sticky {
            timeout: Duration::from_secs(86400)
        }
    );
    for (extra, want) in [
        (
            "affinity = \"source-ip\"\naffinity_timeout = \"5s\"\n",
            "edgenetd.toml:7:20: error: `affinity_timeout` applies only to affinity = \"sticky\"",
        ),
        (
            "affinity_timeout = \"5s\"\n",
            "edgenetd.toml:6:20: error: `affinity_timeout` applies only to affinity = \"sticky\"",
        ),
        (
            "affinity = \"sticky\"\naffinity_timeout = \"25h\"\n",
            "edgenetd.toml:7:20: error: invalid affinity_timeout `25h`: expected whole seconds from 1s to 24h",
        ),
        (
            "affinity = \"sticky\"\naffinity_timeout = \"1500ms\"\n",
            "edgenetd.toml:7:20: error: invalid affinity_timeout `1500ms`: expected whole seconds from 1s to 24h",
        ),
        (
            "affinity = \"sticky\"\naffinity_timeout = \"0s\"\n",
            "edgenetd.toml:7:20: error: invalid affinity_timeout `0s`",
        ),
        (
            "affinity = \"sticky\"\naffinity_timeout = \"soon\"\n",
            "edgenetd.toml:7:20: error: invalid duration `soon`",
        ),
    ] {
        let e = errors(&[("edgenetd.toml", &svc(extra))]);
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn service_keys_are_checked() {
    let e = errors(&[(
        "edgenetd.toml",
        r#"[[service]]
name = "web"
address = "10.96.0.300"
port = 0
backends = [{ address = "10.0.1.5:8080", weight = -1 }, { addr = "x" }]
affinity = "round-robin"
when_empty = "ignore"
colour = "blue"
[service.health]
check = "tcp"
path = "/x"
timeout = "5s"
"#,
    )]);
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = errors(&[(
        "edgenetd.toml",
        r#"[[service]]
name = "web"
address = "10.96.0.300"
port = 0
backends = [{ address = "10.0.1.5:8080", weight = -1 }, { addr = "x" }]
affinity = "round-robin"
when_empty = "ignore"
[service.health]
check = "tcp"
path = "/x"
timeout = "5s"
"#,
    )]);
    for want in [
        "edgenetd.toml:3:11: error: invalid address `10.96.0.300`",
        "edgenetd.toml:4:8: error: invalid port 0: expected 1-65535",
        "edgenetd.toml:5:13: error: invalid weight -1: expected an integer 0-1000 (0 = draining)",
        "edgenetd.toml:5:57: error: unknown backend key `addr`, expected `address` or `weight`",
        "edgenetd.toml:6:12: error: invalid affinity `round-robin`: expected \"none\" or \"source-ip\" or \"sticky\"",
        "edgenetd.toml:7:14: error: invalid when_empty `ignore`: expected \"reject\" or \"drop\"",
        "edgenetd.toml:10:8: error: `path` applies only to check = \"http\"",
        "edgenetd.toml:11:11: error: timeout is longer than interval",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn policy_forward_as_verdict_and_array_of_tables_is_an_error_that_says_forward_default() {
    // One file, either order, and a quoted header: the parser's "duplicate key" becomes an
    // explanation at the second `forward`, with a note at the first.
    let cases = [
        (
            "[policy]\nforward = \"drop\"\n\n[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n",
            (4, 10),
            (2, 1),
        ),
        (
            "[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n[policy]\nforward = \"drop\"\n",
            (5, 1),
            (1, 10),
        ),
        (
            "[policy]\nforward = \"drop\"\n[[ policy . \"forward\" ]]\nfrom = \"a\"\n",
            (3, 13),
            (2, 1),
        ),
    ];
    for (text, (line, col), (note_line, note_col)) in cases {
        let e = load_str(&[("main.toml", text)]).unwrap_err();
        assert!(!e.rendered.contains("invalid TOML"), "{}", e.rendered);
        let want = format!(
            "main.toml:{line}:{col}: error: {}",
            policy::FORWARD_CLASH.message
        );
        assert!(e.rendered.starts_with(&want), "{}", e.rendered);
        assert!(e.rendered.contains("write the verdict as `forward_default"));
        let note = format!("main.toml:{note_line}:{note_col}: note: the other `forward` is here");
        assert!(e.rendered.contains(&note), "{}", e.rendered);
    }
    // Across files: the merge says the same.
    let e = load_str(&[
        ("main.toml", "[policy]\nforward = \"drop\"\n"),
        (
            "conf.d/a.toml",
            "[[policy.forward]]\nfrom = \"a\"\nto = \"b\"\n",
        ),
    ])
    .unwrap_err()
    .rendered;
    assert!(
        e.starts_with(&format!(
            "conf.d/a.toml:1:10: error: {}",
            policy::FORWARD_CLASH.message
        )),
        "{e}"
    );
    assert!(
        e.contains("main.toml:2:1: note: the other `forward` is here"),
        "{e}"
    );
    // A duplicate `forward` elsewhere keeps the parser's words.
    let e = errors(&[(
        "main.toml",
        "[policy]\n[[policy.forward]]\nfrom = \"a\"\n[daemon]\nforward = 1\nforward = 2\n",
    )]);
    assert!(
        e.starts_with("main.toml:6:1: error: invalid TOML: duplicate key"),
        "{e}"
    );
}

/// A NUL byte in a name that reaches the kernel would cut the name there (`eth0\0x` becomes
/// `eth0`): it is an error at its place, for every kind of name.
#[test]
fn a_nul_byte_in_a_kernel_name_is_an_error_at_its_place() {
    let e = errors(&[(
        "main.toml",
        r#"[daemon]
nft_table_prefix = "edge\u0000x"
[policy.zone.lan]
interfaces = ["br\u0000lan"]
[policy.zone."w\u0000an"]
interfaces = ["eth0"]
[policy.set."b\u0000l"]
type = "ipv4"
[[policy.rule]]
name = "r\u00001"
action = "accept"
[[service]]
name = "web\u0000"
address = "192.0.2.10"
port = 80
[[route]]
to = "10.0.0.0/8"
dev = "eth\u00000"
[[route]]
to = "10.1.0.0/16"
nexthops = [{ dev = "e\u0000" }]
[[route_rule]]
priority = 5
iif = "a\u0000"
oif = "b\u0000"
table = 7
"#,
    )]);
    for want in [
        "main.toml:2:20: error: invalid nft_table_prefix",
        "main.toml:4:15: error: invalid interface name \"br\\0lan\": contains a NUL byte",
        "main.toml:5:14: error: invalid zone name",
        "main.toml:7:13: error: invalid set name",
        "main.toml:10:8: error: invalid name",
        "main.toml:13:8: error: invalid service name \"web\\0\": contains a NUL byte",
        "main.toml:18:7: error: invalid interface name \"eth\\00\": contains a NUL byte",
        "main.toml:21:21: error: invalid interface name \"e\\0\": contains a NUL byte",
        "main.toml:24:7: error: invalid interface name \"a\\0\": contains a NUL byte",
        "main.toml:25:7: error: invalid interface name \"b\\0\": contains a NUL byte",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn source_ranges_take_prefixes_of_either_family_each_once() {
    let svc = |ranges: &str| {
        format!(
            "[[service]]\nname = \"lb\"\naddress = \"10.96.0.10\"\nport = 80\nbackends = [\"10.0.1.5:8080\"]\nsource_ranges = {ranges}\n"
        )
    };
    let s = load_str(&[(
        "edgenetd.toml",
        &svc(r#"["192.0.2.0/24", "2001:db8::/32", "198.51.100.7"]"#),
    )])
    .unwrap();
    let got: Vec<String> = s.services.services[0]
        .source_ranges
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(got, ["192.0.2.0/24", "2001:db8::/32", "198.51.100.7/32"]);
    let none = load_str(&[(
        "edgenetd.toml",
        &svc("[\"0.0.0.0/0\"]").replace("source_ranges = [\"0.0.0.0/0\"]\n", ""),
    )])
    .unwrap();
    assert!(
        none.services.services[0].source_ranges.is_empty(),
        "absent: everybody"
    );
    let e = errors(&[(
        "edgenetd.toml",
        &svc(r#"["192.0.2.1/24", "nope", "2001:db8::/32", "2001:db8::/32"]"#),
    )]);
    for want in [
        "edgenetd.toml:6:18: error: invalid prefix `192.0.2.1/24`: host bits are set; did you mean \"192.0.2.0/24\"?",
        "edgenetd.toml:6:34: error: invalid prefix `nope`",
        "edgenetd.toml:6:59: error: source range 2001:db8::/32 is listed twice",
        "edgenetd.toml:6:42: note: first listed here",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
    let e = errors(&[("edgenetd.toml", &svc("[]"))]);
    assert!(
        e.contains("edgenetd.toml:6:17: error: empty source_ranges: leave the key out to admit every source"),
        "{e}"
    );
}
