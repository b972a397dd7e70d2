//! `[[policy.include]]`, fw4's `config include` of type `nftables` (its 06_includes tests):
//! each position puts the snippet where fw4 does, read back from the kernel; what fw4 warns
//! about and skips is an error at its key here; a snippet nft refuses rejects the config at
//! the include's place and leaves the running table as it was; an included rule edited by
//! hand is repaired as drift; and real packets are dropped and passed by included rules.

use crate::common;
use crate::netns_test;

use common::bin::edgenetd;
use common::controller::Driver;
use common::policy::{assert_all, config_errors, lan_wan, planned_policy_nft, program_of};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::failed;

/// lan and wan zones, lan may reach wan, and the includes `includes` (TOML) add.
fn config(includes: &str) -> String {
    format!(
        r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]
[policy.zone.wan]
interfaces = ["veth-wan"]

[[policy.forward]]
from = "lan"
to = "wan"
{includes}"#
    )
}

/// One `[[policy.include]]` of `path` at `position` (and `chain`, when given).
fn include(path: &std::path::Path, position: Option<&str>, chain: Option<&str>) -> String {
    let mut out = format!("\n[[policy.include]]\npath = \"{}\"\n", path.display());
    if let Some(p) = position {
        out.push_str(&format!("position = \"{p}\"\n"));
    }
    if let Some(c) = chain {
        out.push_str(&format!("chain = \"{c}\"\n"));
    }
    out
}

/// The chains of the policy table in listing order, and the rules of `chain` (trimmed).
fn listed(chain: &str) -> (Vec<String>, Vec<String>) {
    let table = sh("nft list table inet edgenetd-policy");
    let chains = table
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .map(|l| l.trim_end_matches(" {").to_string())
        .collect();
    let rules = sh(&format!("nft list chain inet edgenetd-policy {chain}"))
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("table ")
                && !l.starts_with("chain ")
                && !l.starts_with("type ")
                && *l != "}"
        })
        .map(str::to_string)
        .collect();
    (chains, rules)
}

netns_test! {
    fn fw4_06_includes_each_position_puts_the_snippet_where_fw4_does() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-positions");
        // (file, its text, position, chain): fw4's 01_nft_includes, one snippet each.
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("table-start.nft", "chain inc_table_start {\n  counter\n}\n", Some("table-pre"), None),
            ("table-end-1.nft", "chain inc_table_end_1 {\n  counter\n}\n", None, None),
            ("table-end-2.nft", "chain inc_table_end_2 {\n  counter\n}\n", Some("table-post"), None),
            ("chain-start-forward.nft", "meta l4proto udp counter\n", Some("chain-pre"), Some("forward")),
            ("chain-end-forward.nft", "meta l4proto icmp counter\n", Some("chain-post"), Some("forward")),
        ];
        let mut includes = String::new();
        for (file, text, position, chain) in cases {
            let path = dir.join(file);
            std::fs::write(&path, text).unwrap();
            includes.push_str(&include(&path, *position, *chain));
        }
        let mut d = Driver::policy();
        d.sync(&config(&includes)).unwrap();
        let (chains, forward) = listed("forward");
        let at = |name: &str| chains.iter().position(|c| c == name).unwrap_or_else(|| panic!("no chain {name}: {chains:?}"));
        // table-pre: before every chain of edgenetd's; table-post (and the default): after.
        let ours: Vec<usize> = chains
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.starts_with("inc_"))
            .map(|(i, _)| i)
            .collect();
        assert!(at("inc_table_start") < ours[0], "{chains:?}");
        assert!(at("inc_table_end_1") > *ours.last().unwrap(), "{chains:?}");
        assert!(at("inc_table_end_1") < at("inc_table_end_2"), "in file order: {chains:?}");
        // chain-pre: the forward chain's first rule; chain-post: its last.
        assert!(forward.first().unwrap().starts_with("meta l4proto udp counter"), "{forward:#?}");
        assert!(forward.last().unwrap().starts_with("meta l4proto icmp counter"), "{forward:#?}");
        assert!(forward.first().unwrap().contains("comment \"include "), "origin: {forward:#?}");
        // The table-level snippet's rule is in its own chain.
        let (_, own) = listed("inc_table_start");
        assert_eq!(own.len(), 1, "{own:?}");
        assert!(own[0].starts_with("counter"), "{own:?}");
        // A second sync of the same config writes nothing: the included rules compare equal.
        let again = d.sync(&config(&includes)).unwrap();
        assert_eq!((again.changes, again.drift_repairs), (0, 0), "{again:?}");
        // A restarted daemon adopts the table as it finds it: the included rules are the
        // ones its own compile of the snippets makes.
        let adopted = Driver::policy().sync(&config(&includes)).unwrap();
        assert_eq!((adopted.changes, adopted.drift_repairs), (0, 0), "{adopted:?}");
    }
}

netns_test! {
    fn fw4_06_includes_two_chain_pre_snippets_keep_their_file_order() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-order");
        let (a, b) = (dir.join("a.nft"), dir.join("b.nft"));
        std::fs::write(&a, "tcp dport 1001 counter\n").unwrap();
        std::fs::write(&b, "tcp dport 1002 counter\ntcp dport 1003 counter\n").unwrap();
        let includes = include(&a, Some("chain-pre"), Some("input"))
            + &include(&b, Some("chain-prepend"), Some("input"));
        Driver::policy().sync(&config(&includes)).unwrap();
        let (_, input) = listed("input");
        let ports: Vec<&str> = input
            .iter()
            .take(3)
            .map(|r| r.split_whitespace().nth(2).unwrap_or(""))
            .collect();
        assert_eq!(ports, ["1001", "1002", "1003"], "{input:#?}");
    }
}

/// What fw4 warns about and skips (01: chain-* without `chain`; 02: a script include) is a
/// problem at its key; a disabled include (04) is skipped, its file never read.
#[test]
fn fw4_06_includes_config_cases() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "chain position without chain",
            "[[policy.include]]\npath = \"/etc/x.nft\"\nposition = \"chain-post\"\n",
            &["main.toml:4:12: error: position chain-pre and chain-post need `chain`"],
        ),
        (
            "script include",
            "[[policy.include]]\npath = \"/etc/firewall.user\"\ntype = \"script\"\n",
            &["main.toml:4:8: error: include type `script` is not supported"],
        ),
        (
            "relative path",
            "[[policy.include]]\npath = \"x.nft\"\n",
            &["main.toml:3:8: error: include `path` must be an absolute path"],
        ),
        (
            "unknown position",
            "[[policy.include]]\npath = \"/etc/x.nft\"\nposition = \"ruleset-pre\"\n",
            &["main.toml:4:12: error: unknown include position `ruleset-pre`"],
        ),
        (
            "chain for a table position",
            "[[policy.include]]\npath = \"/etc/x.nft\"\nchain = \"input\"\n",
            &["main.toml:4:9: error: `chain` is for position chain-pre and chain-post"],
        ),
        (
            "missing file",
            "[[policy.include]]\npath = \"/nonexistent/edgenetd/x.nft\"\n",
            &["main.toml:3:8: error: /nonexistent/edgenetd/x.nft:"],
        ),
    ];
    for (what, toml, expected) in cases {
        let errors = config_errors(&format!("[policy]\n{toml}"));
        assert_all(&errors, expected);
        assert!(!errors.is_empty(), "{what}");
    }
    let disabled = program_of(
        "[policy]\n[[policy.include]]\npath = \"/nonexistent/edgenetd/x.nft\"\nenabled = false\n",
    );
    assert!(disabled.includes.is_empty());
}

netns_test! {
    fn fw4_06_includes_a_snippet_nft_refuses_fails_check_at_the_include_and_leaves_the_table() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-refused");
        let good = dir.join("good.nft");
        std::fs::write(&good, "tcp dport 2222 counter accept\n").unwrap();
        let bad = dir.join("bad.nft");
        std::fs::write(&bad, "# a comment line\ntcp dport 2222 frobnicate\n").unwrap();
        let good_cfg = config(&include(&good, Some("chain-pre"), Some("input")));
        let bad_cfg = config(&include(&bad, Some("chain-pre"), Some("input")));
        dir.write("edgenetd.toml", &bad_cfg);
        let run = edgenetd(&["check", "--config", dir.config().to_str().unwrap()]);
        assert!(!run.ok(), "check passed a snippet nft refuses: {}", run.stdout);
        let path_line = bad_cfg.lines().position(|l| l.starts_with("path = ")).unwrap() + 1;
        let at = format!("{}:{path_line}:8: error: include {}", dir.config().display(), bad.display());
        assert!(run.stderr.contains(&at), "{at:?} not in:\n{}", run.stderr);
        // nft's own complaint, placed in the snippet's own lines.
        assert!(run.stderr.contains(&format!("{}:2:", bad.display())), "{}", run.stderr);
        // The daemon's reload asks the same question: rejected, so nothing changes.
        let mut d = Driver::policy();
        d.sync(&good_cfg).unwrap();
        let before = sh("nft list table inet edgenetd-policy");
        let state = common::controller::load(&bad_cfg);
        assert!(edgenetd::daemon::includes::vet(state.clone()).is_err());
        // Even a sync that is handed it (no vetting) writes nothing.
        assert!(d.sync_state(&state).is_err());
        assert_eq!(sh("nft list table inet edgenetd-policy"), before);
        assert!(before.contains("tcp dport 2222"), "{before}");
        // No scratch table is left behind.
        assert!(!sh("nft list tables").contains("edgenetd-policy-include"));
    }
}

netns_test! {
    fn fw4_06_includes_a_hand_edit_of_an_included_rule_is_repaired_as_drift() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-drift");
        let path = dir.join("drop.nft");
        std::fs::write(&path, "ip daddr 192.0.2.3 tcp dport 80 drop\n").unwrap();
        let cfg = config(&include(&path, Some("chain-pre"), Some("forward")));
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        let listing = sh("nft -a list chain inet edgenetd-policy forward");
        let line = listing.lines().find(|l| l.contains("192.0.2.3")).expect(&listing);
        let handle = line.rsplit("# handle ").next().unwrap().trim();
        sh(&format!(
            "nft replace rule inet edgenetd-policy forward handle {handle} ip daddr 192.0.2.3 tcp dport 80 accept"
        ));
        let report = d.sync(&cfg).unwrap();
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let forward = sh("nft list chain inet edgenetd-policy forward");
        assert!(forward.contains("ip daddr 192.0.2.3 tcp dport 80 drop"), "{forward}");
        assert!(!forward.contains("tcp dport 80 accept"), "{forward}");
    }
}

netns_test! {
    fn fw4_06_includes_real_packets_are_dropped_and_passed_by_included_rules() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        t.serve(wan, "tcp", 8080);
        let dir = ScratchDir::new("includes-packets");
        let drop = dir.join("drop.nft");
        std::fs::write(&drop, "ip daddr 192.0.2.3 tcp dport 80 counter drop\n").unwrap();
        // The wan may open 10.0.0.2:8080 only through the included accept.
        let accept = dir.join("accept.nft");
        std::fs::write(
            &accept,
            "chain inc_wan_in {\n  ip daddr 10.0.0.2 tcp dport 8080 accept\n}\n",
        )
        .unwrap();
        let jump = dir.join("jump.nft");
        std::fs::write(&jump, "iifname \"veth-wan\" jump inc_wan_in\n").unwrap();
        t.serve(lan, "tcp", 8080);
        let cfg = config(
            &(include(&drop, Some("chain-pre"), Some("forward"))
                + &include(&accept, Some("table-post"), None)
                + &include(&jump, Some("chain-pre"), Some("forward"))),
        );
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "the included drop let it pass");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "an address the snippet does not name was dropped");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.3", 8080)), "another port was dropped");
        assert!(!failed(&t.connect(wan, "tcp", "10.0.0.2", 8080)), "the included accept did not pass it");
        // Without the includes, the wan's connection is the forward default's to drop.
        d.sync(&config("")).unwrap();
        assert!(failed(&t.connect(wan, "tcp", "10.0.0.2", 8080)), "passed without the include");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "dropped without the include");
    }
}

netns_test! {
    fn fw4_06_includes_plan_prints_the_included_rules_nft_c_takes() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-plan");
        let path = dir.join("limit.nft");
        std::fs::write(&path, "ip protocol gre drop\ntcp dport 22 ct state new limit rate 10/minute accept\n").unwrap();
        let table = dir.join("table.nft");
        std::fs::write(&table, "chain inc_extra {\n  udp dport 53 accept\n}\n").unwrap();
        dir.write(
            "edgenetd.toml",
            &config(&(include(&path, Some("chain-post"), Some("input")) + &include(&table, None, None))),
        );
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("tcp dport 22 ct state new limit rate 10/minute accept comment \"include "), "{text}");
        assert!(text.contains("chain inc_extra"), "{text}");
        // explain evaluates the included rules: the one it reads decides, named with its
        // origin; the one it does not read (`ip protocol`) makes the verdict uncertain.
        let run = edgenetd(&[
            "explain", "--config", dir.config().to_str().unwrap(),
            "--addresses", "veth-lan=10.0.0.1/24",
            "--in", "veth-lan", "--from", "10.0.0.2", "--to", "10.0.0.1",
            "--proto", "tcp", "--dport", "22",
        ]);
        let out = format!("{}{}", run.stdout, run.stderr);
        let decider = format!(
            "accept by rule include {} (edgenetd-policy input): tcp dport 22 ct state new limit rate 10/minute accept",
            path.display()
        );
        assert!(out.contains(&decider), "{out}");
        assert!(
            out.contains("the verdict is uncertain: included rule `ip protocol gre drop`"),
            "{out}"
        );
        assert_eq!(out.matches("the verdict is uncertain").count(), 1, "one line for the one rule: {out}");
        // Installed, then the snippet edited: plan's differences name the old and new rule.
        Driver::policy().sync(&std::fs::read_to_string(dir.config()).unwrap()).unwrap();
        std::fs::write(&path, "tcp dport 22 ct state new limit rate 20/minute accept\n").unwrap();
        let run = edgenetd(&["plan", "--config", dir.config().to_str().unwrap()]);
        assert!(run.ok(), "{}", run.stderr);
        let added = format!("#   + rule input \"include {} #", path.display());
        let removed = format!("#   - rule input \"include {} #", path.display());
        assert!(run.stdout.contains(&added) && run.stdout.contains(&removed), "{}", run.stdout);
    }
}

netns_test! {
    fn fw4_06_includes_a_snippet_matches_a_named_set_of_the_config() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let dir = ScratchDir::new("includes-set");
        let path = dir.join("blocked.nft");
        std::fs::write(&path, "ip daddr @blocked counter drop\n").unwrap();
        let cfg = config(&(include(&path, Some("chain-pre"), Some("forward"))
            + "\n[policy.set.blocked]\ntype = \"ipv4\"\nelements = [\"192.0.2.3\"]\n"));
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "a member of the set passed");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "a non-member was dropped");
        // A change of the set's elements alone is one commit: the snippet is not compiled
        // again (that would be a scratch table's commits too).
        let generation = || edgenetd::dataplane::nft::Nft::open().unwrap().generation().unwrap();
        let before = generation();
        let changed = cfg.replace("[\"192.0.2.3\"]", "[\"192.0.2.2\"]");
        assert_ne!(changed, cfg);
        d.sync(&changed).unwrap();
        assert_eq!(generation().wrapping_sub(before), 1, "commits of an element change");
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "the new member passed");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "the old member was dropped");
        // An anonymous set is refused at the include, naming what to do instead.
        std::fs::write(&path, "tcp dport { 80, 443 } drop\n").unwrap();
        dir.write("edgenetd.toml", &cfg);
        let run = edgenetd(&["check", "--config", dir.config().to_str().unwrap()]);
        assert!(!run.ok(), "{}", run.stdout);
        assert!(run.stderr.contains("the snippet makes a set"), "{}", run.stderr);
        assert!(!sh("nft list tables").contains("edgenetd-policy-include"));
    }
}

netns_test! {
    fn fw4_06_includes_what_an_include_cannot_carry_fails_check_at_its_place() {
        let _t = lan_wan();
        let dir = ScratchDir::new("includes-cannot");
        // (snippet, position, chain, what `check` says)
        let cases: &[(&str, &str, Option<&str>, &str)] = &[
            ("tcp dport 22 frobnicate\n", "chain-pre", Some("input"), "snippet.nft:1:"),
            ("tcp dport { 22, 80 } accept\n", "chain-pre", Some("input"), "the snippet makes a set"),
            ("accept\n}\ntable ip elsewhere {\n", "chain-pre", Some("input"), "snippet.nft:2:1: this `}` closes a block"),
            ("chain input {\n  counter\n}\n", "table-pre", None, "adds rules to chain input, which the table has already"),
            ("counter\n", "chain-post", Some("no_such_chain"), "no chain no_such_chain in table edgenetd-policy"),
        ];
        let path = dir.join("snippet.nft");
        for (snippet, position, chain, said) in cases {
            std::fs::write(&path, snippet).unwrap();
            dir.write("edgenetd.toml", &config(&include(&path, Some(position), *chain)));
            let run = edgenetd(&["check", "--config", dir.config().to_str().unwrap()]);
            assert!(!run.ok(), "{snippet:?} passed: {}", run.stdout);
            assert!(run.stderr.contains(":15:8: error: include "), "{snippet:?}: {}", run.stderr);
            assert!(run.stderr.contains(said), "{snippet:?}: {said:?} not in {}", run.stderr);
        }
        assert!(!sh("nft list tables").contains("edgenetd-policy-include"), "a scratch table was left");
        assert!(!sh("nft list tables").contains("elsewhere"), "a snippet wrote outside its table");
    }
}

netns_test! {
    fn fw4_06_includes_a_group_the_kernel_refuses_at_write_fails_closed_and_the_rest_works() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let dir = ScratchDir::new("includes-closed");
        // nft compiles it in the scratch table's unhooked chain; the kernel refuses it under
        // the input hook (masquerade needs a nat chain). `check` cannot see that.
        let path = dir.join("masq.nft");
        std::fs::write(&path, "tcp dport 2222 accept\nmeta l4proto tcp masquerade\n").unwrap();
        let cfg = config(&include(&path, Some("chain-pre"), Some("input")));
        let mut d = Driver::policy();
        let err = d.sync(&cfg).unwrap_err();
        assert_eq!(err.failures.len(), 1, "{err}");
        assert!(err.failures[0].object.contains("includes"), "{err}");
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(!input.contains("masquerade") && !input.contains("2222"), "{input}");
        // In its place, the group's barrier: nothing of what the snippet might have let in.
        let first = input.lines().map(str::trim).find(|l| l.contains("drop") || l.contains("accept")).unwrap();
        assert!(first.contains("drop"), "the first rule of input is not the barrier: {input}");
        t.serve(t.router(), "tcp", 2222);
        assert!(failed(&t.connect(lan, "tcp", "10.0.0.1", 2222)), "the refused accept let it in");
        // Everything else is written and works.
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "forwarding broke");
        // Fixed, the next sync writes it.
        std::fs::write(&path, "tcp dport 2222 accept\n").unwrap();
        d.sync(&cfg).unwrap();
        assert!(!failed(&t.connect(lan, "tcp", "10.0.0.1", 2222)), "the fixed include did not let it in");
    }
}
