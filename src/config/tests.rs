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

#[test]
fn policy_forward_may_be_both_the_verdict_and_the_array_of_tables_as_schema_writes_it() {
    let text = "[policy]\nforward = \"drop\"\n\n[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n\n[[ policy . \"forward\" ]]\nfrom = \"a\"\n";
    let mut sources = SourceMap::default();
    sources.add("main.toml".into(), text.into());
    let mut diags = Diagnostics::default();
    let mut doc = Doc::default();
    let file = &sources.files()[0];
    doc.merge_file(SourceMap::parse_text(file), file.base, &mut diags);
    assert!(diags.is_empty(), "{}", diags.render(&sources));
    let policy = doc.value("policy").unwrap().get_ref().as_table().unwrap();
    assert_eq!(
        policy.get("forward").unwrap().get_ref().as_str(),
        Some("drop")
    );
    let forwards = policy
        .get(doc::POLICY_FORWARDS_KEY)
        .unwrap()
        .get_ref()
        .as_array()
        .unwrap();
    assert_eq!(forwards.len(), 2);
    // Places still point at the operator's own text.
    let entry = &forwards[0];
    let from = entry.get_ref().as_table().unwrap().get("from").unwrap();
    let loc = sources.locate(&from.span()).unwrap();
    assert_eq!((loc.line, loc.column), (5, 8));
    let header_line = sources
        .locate(&(text.find("[[policy").unwrap()..text.len()))
        .unwrap()
        .line_text;
    assert_eq!(
        header_line, "[[policy.forward]]",
        "diagnostics show the original header"
    );
}
