//! The policy controller with real packets: a lan host, the router (this test's namespace) and
//! a wan host on veth pairs; TCP, UDP and ICMP checked end to end.

use crate::common;
use crate::netns_test;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::controller::{Driver, load};
use common::policy::{HOME, lan_wan, policy_json, rule_handles};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::failed;
use edgenetd::controller::policy;

netns_test! {
    fn allowed_and_blocked_ports_to_and_through_the_router() {
        let t = lan_wan();
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        for port in [22, 23, 2222] {
            t.serve(t.router(), "tcp", port);
        }
        t.serve(t.router(), "udp", 53);
        t.serve(t.router(), "udp", 54);
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // To the router, from the lan.
        assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "10.0.0.2");
        let blocked = t.connect(lan, "tcp", "10.0.0.1", 2222);
        assert_eq!(blocked, "FAIL:timeout", "default input drop");
        let refused = t.connect(lan, "tcp", "10.0.0.1", 23);
        assert!(refused.contains("refused"), "reject answers with a reset: {refused}");
        assert_eq!(t.connect(lan, "udp", "10.0.0.1", 53), "10.0.0.2");
        assert!(failed(&t.connect(lan, "udp", "10.0.0.1", 54)));
        assert_eq!(t.connect(lan, "ping", "10.0.0.1", 0), "PONG");
        // To the router, from the wan: nothing of it is allowed.
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 22)));
        assert!(failed(&t.connect(wan, "udp", "192.0.2.1", 53)));
        assert!(failed(&t.connect(wan, "ping", "192.0.2.1", 0)));
        // Through the router: lan -> wan allowed and masqueraded to the router's wan address.
        t.serve(wan, "tcp", 80);
        t.serve(wan, "udp", 5353);
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        assert_eq!(t.connect(lan, "udp", "192.0.2.2", 5353), "192.0.2.1");
        // wan -> lan is not forwarded.
        t.serve(lan, "tcp", 81);
        assert!(failed(&t.connect(wan, "tcp", "10.0.0.2", 81)));
        // The counters of the rules that matched moved (every rule has a counter).
        let text = sh("nft list chain inet edgenetd-policy forward");
        assert!(text.contains("forward lan->wan") && !text.contains("oifname \"veth-wan\" counter packets 0 "), "{text}");
    }
}

netns_test! {
    fn port_forward_reaches_the_inner_host_and_hairpins() {
        let t = lan_wan();
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(lan, "tcp", 80);
        // wan -> router:8080 -> 10.0.0.10:80, the server sees the real client.
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 8080), "192.0.2.2");
        // Hairpin: a lan host uses the outer address; the router masquerades so replies
        // come back through it.
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.1", 8080, "10.0.0.2"), "10.0.0.1");
        // Not forwarded: another port.
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 8081)));
    }
}

netns_test! {
    fn a_blocklisted_source_is_dropped_and_the_set_grows_by_element_delta() {
        let t = lan_wan();
        let mut d = Driver::policy();
        let with = |extra: &str| HOME.replace(r#"elements = ["203.0.113.0/24"]"#, &format!(r#"elements = ["203.0.113.0/24"{extra}]"#));
        d.sync(&with(r#", "192.0.2.3""#)).unwrap();
        let wan = t.host("wan");
        t.serve(t.host("lan"), "tcp", 80);
        assert_eq!(t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.2"), "192.0.2.2");
        assert!(failed(&t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.3")));
        // A new element blocks a new source without replacing the table.
        let handles = rule_handles();
        let report = d.sync(&with(r#", "192.0.2.3", "192.0.2.2""#)).unwrap();
        assert!(report.summary.contains("set elements: 1 added, 0 deleted"), "{report:?}");
        assert_eq!(report.changes, 1, "one element message");
        assert_eq!(rule_handles(), handles, "rules untouched");
        assert!(failed(&t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.2")));
        let set = sh("nft list set inet edgenetd-policy blocklist");
        assert!(set.contains("192.0.2.2") && set.contains("192.0.2.3"), "{set}");
        // Removing it unblocks, again by delta; a no-op sync writes nothing.
        let report = d.sync(&with(r#", "192.0.2.3""#)).unwrap();
        assert!(report.summary.contains("0 added, 1 deleted"), "{report:?}");
        assert_eq!(rule_handles(), handles);
        assert_eq!(t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.2"), "192.0.2.2");
        let report = d.sync(&with(r#", "192.0.2.3""#)).unwrap();
        assert_eq!(report.changes, 0, "{report:?}");
    }
}

netns_test! {
    fn an_established_connection_survives_a_policy_reload() {
        let t = lan_wan();
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        t.serve(t.host("wan"), "tcp", 80);
        // The client reports each step and holds the connection until told to go on.
        let script = t.script("long.py", r#"
import socket, sys
s = socket.create_connection(("192.0.2.2", 80), timeout=5)
f = s.makefile()
print("hello", f.readline().strip(), flush=True)
s.sendall(b"before\n"); print("echo", f.readline().strip(), flush=True)
sys.stdin.readline()
s.sendall(b"after\n"); print("echo", f.readline().strip(), flush=True)
"#);
        let mut child = t.host("lan").command("python3").arg(&script)
            .stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            lines.push(line.trim().to_string());
        }
        assert_eq!(lines, ["hello 192.0.2.1", "echo before"], "the connection is up before the reload");
        // A reload that rewrites the whole table (a new rule) but still allows lan -> wan.
        let changed = format!("{HOME}\n[[policy.rule]]\nname = \"new-rule\"\nfrom = \"wan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [443]\naction = \"accept\"\n");
        let report = d.sync(&changed).unwrap();
        assert!(report.summary.starts_with("table written"), "{report:?}");
        assert!(sh("nft list table inet edgenetd-policy").contains("new-rule"));
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        lines.push(line.trim().to_string());
        assert!(child.wait().unwrap().success());
        assert_eq!(lines.join("\n"), "hello 192.0.2.1\necho before\necho after", "{lines:?}");
    }
}

netns_test! {
    fn drift_is_repaired_and_a_foreign_table_is_left_exactly_as_it_was() {
        sh("nft add table inet other && nft add chain inet other c '{ type filter hook input priority 10; policy accept; }' && nft add rule inet other c tcp dport 9 counter drop comment keep");
        let before = sh("nft list table inet other");
        let mut d = Driver::policy();
        let first = d.sync(HOME).unwrap();
        assert_eq!(first.drift_repairs, 0);
        assert_eq!(d.sync(HOME).unwrap().changes, 0, "no-op sync writes nothing");
        // Someone deletes the table: the next sync restores it and counts a repair.
        sh("nft delete table inet edgenetd-policy");
        let r = d.sync(HOME).unwrap();
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        assert!(sh("nft list table inet edgenetd-policy").contains("ssh-from-lan"));
        // Someone edits one rule in place (keeping its comment): restored too.
        let json = policy_json();
        let rule = json["nftables"].as_array().unwrap().iter().filter_map(|o| o.get("rule"))
            .find(|r| r["comment"].as_str().unwrap_or("").starts_with("rule ssh-from-lan")).unwrap().clone();
        sh(&format!("nft replace rule inet edgenetd-policy input handle {} tcp dport 2222 accept comment '\"{}\"'", rule["handle"], rule["comment"].as_str().unwrap()));
        let r = d.sync(HOME).unwrap();
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        assert!(!sh("nft list chain inet edgenetd-policy input").contains("2222"));
        // Someone adds an element to an owned set: restored.
        sh("nft add element inet edgenetd-policy blocklist '{ 10.9.9.9 }'");
        assert_eq!(d.sync(HOME).unwrap().drift_repairs, 1);
        assert!(!sh("nft list set inet edgenetd-policy blocklist").contains("10.9.9.9"));
        // Changes elsewhere move the generation but are not drift.
        sh("nft add table inet unrelated");
        let r = d.sync(HOME).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        // Element listings are rate-limited after foreign commits: rules are still compared
        // at once, elements at the next sync after the interval (the period at the latest).
        sh("nft add element inet edgenetd-policy blocklist '{ 10.9.9.8 }'");
        let r = d.sync(HOME).unwrap();
        assert_eq!(r.summary, "no change (set element check deferred)", "{r:?}");
        let json = policy_json();
        let rule = json["nftables"].as_array().unwrap().iter().filter_map(|o| o.get("rule")).next().unwrap().clone();
        sh(&format!("nft delete rule inet edgenetd-policy {} handle {}", rule["chain"].as_str().unwrap(), rule["handle"]));
        assert_eq!(d.sync(HOME).unwrap().drift_repairs, 1, "a rule deleted: repaired at once");
        assert!(!sh("nft list set inet edgenetd-policy blocklist").contains("10.9.9.8"), "the rewrite also restored the set");
        // Cleanup removes only edgenetd's table.
        let desired = load(HOME);
        let msg = smol::block_on(policy::cleanup(&desired.daemon)).unwrap();
        assert!(msg.contains("deleted table inet edgenetd-policy"), "{msg}");
        let tables = sh("nft list tables");
        assert!(!tables.contains("edgenetd-policy") && tables.contains("table inet unrelated"));
        assert_eq!(sh("nft list table inet other"), before, "foreign table untouched");
    }
}

netns_test! {
    fn plan_prints_loadable_text_and_the_differences() {
        let desired = load(HOME);
        let text = smol::block_on(policy::plan(&desired)).unwrap();
        assert!(text.contains("# differences from the running kernel:\n#   + table inet edgenetd-policy"), "{text}");
        let dir = ScratchDir::new("policy-plan");
        let file = dir.join("plan.nft").display().to_string();
        dir.write("plan.nft", &text);
        sh(&format!("nft -c -f {file}"));
        assert!(!sh("nft list tables").contains("edgenetd-policy"), "plan writes nothing");
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        let text = smol::block_on(policy::plan(&desired)).unwrap();
        assert!(text.ends_with("# differences from the running kernel:\n#   none\n"), "{text}");
        sh("nft add element inet edgenetd-policy blocklist '{ 10.9.9.9 }'");
        sh("nft delete chain inet edgenetd-policy postrouting");
        let text = smol::block_on(policy::plan(&desired)).unwrap();
        assert!(text.contains("#   + chain postrouting"), "{text}");
        assert!(text.contains("#   + rule postrouting \"masquerade wan #"), "{text}");
        assert!(text.contains("#   ~ set blocklist: 0 kernel elements to add, 2 to delete"), "{text}");
        dir.write("plan.nft", &text);
        sh(&format!("nft -c -f {file}"));
    }
}

netns_test! {
    fn without_a_policy_section_there_is_no_table_and_reject_defaults_refuse() {
        let mut d = Driver::policy();
        let r = d.sync("[daemon]\n").unwrap();
        assert_eq!(r.changes, 0);
        assert!(!sh("nft list tables").contains("edgenetd-policy"));
        let t = lan_wan();
        let rejecting = HOME.replace("input = \"drop\"", "input = \"reject\"");
        d.sync(&rejecting).unwrap();
        t.serve(t.router(), "tcp", 2222);
        let answer = t.connect(t.host("wan"), "tcp", "192.0.2.1", 2222);
        assert!(answer.contains("refused"), "default reject: {answer}");
        // Dropping the section removes the table.
        let r = d.sync("[daemon]\n").unwrap();
        assert_eq!(r.changes, 1);
        assert!(!sh("nft list tables").contains("edgenetd-policy"));
    }
}

netns_test! {
    fn a_foreign_commit_wakes_the_controller_at_once() {
        let (t, rx) = edgenetd::sync::trigger();
        let mut c = edgenetd::controller::policy::PolicyController::new(
            t,
            edgenetd::dataplane::nft::GenerationWatch::new(),
        );
        let desired = load(HOME);
        use edgenetd::controller::Controller;
        smol::block_on(c.sync(&desired, &edgenetd::sync::NoProgress)).unwrap();
        // Our own commits do not fire (waiting 500 ms for nothing to happen is the test).
        let fired_by_us = smol::block_on(futures_lite::future::or(
            async { rx.recv().await.is_some() },
            async {
                smol::Timer::after(std::time::Duration::from_millis(500)).await;
                false
            },
        ));
        assert!(!fired_by_us, "edgenetd's own commit woke the loop");
        sh("nft delete table inet edgenetd-policy");
        let fired = smol::block_on(futures_lite::future::or(
            async { rx.recv().await.is_some() },
            async {
                smol::Timer::after(std::time::Duration::from_secs(2)).await;
                false
            },
        ));
        assert!(fired, "a foreign commit fires the trigger");
        let r = smol::block_on(c.sync(&desired, &edgenetd::sync::NoProgress)).unwrap();
        assert_eq!(r.drift_repairs, 1);
    }
}

netns_test! {
    fn ipv6_is_filtered_forwarded_and_neighbour_discovery_works_under_input_drop() {
        let t = lan_wan();
        let mut d = Driver::policy();
        // Two lan interfaces (one absent) make the zone match an anonymous set of names.
        let cfg = HOME
            .replace(r#"networks = ["10.0.0.0/24"]"#, r#"networks = ["10.0.0.0/24", "fd00::/64"]"#)
            .replace(r#"interfaces = ["veth-lan"]"#, r#"interfaces = ["veth-lan", "br-absent"]"#)
            .replace("masquerade = true\n", "masquerade = true\nmasquerade6 = true\n")
            + "\n[[policy.port_forward]]\nname = \"web6\"\nfrom = \"wan\"\nport = 8443\nto = \"[fd00::2]:80\"\n";
        d.sync(&cfg).unwrap();
        t.serve_v6(t.router(), "tcp", 22);
        t.serve_v6(t.router(), "tcp", 2222);
        t.serve_v6(t.host("wan"), "tcp", 80);
        let lan = t.host("lan");
        // Neighbour discovery passes the input drop (or nothing below would connect).
        assert_eq!(t.connect(lan, "tcp", "fd00::1", 22), "fd00::2");
        assert!(failed(&t.connect(lan, "tcp", "fd00::1", 2222)));
        assert!(failed(&t.connect(t.host("wan"), "tcp", "2001:db8::1", 22)));
        // Forwarded lan -> wan over IPv6, masqueraded (`masquerade6`) like IPv4.
        assert_eq!(t.connect(lan, "tcp", "2001:db8::2", 80), "2001:db8::1");
        // An IPv6 port forward: wan -> [2001:db8::1]:8443 -> [fd00::2]:80.
        t.serve_v6(lan, "tcp", 80);
        assert_eq!(t.connect(t.host("wan"), "tcp", "2001:db8::1", 8443), "2001:db8::2");
    }
}

netns_test! {
    fn a_new_table_prefix_moves_the_policy_to_the_new_table() {
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        assert!(sh("nft list tables").contains("table inet edgenetd-policy"));
        d.sync(&format!("[daemon]\nnft_table_prefix = \"edge2\"\n{HOME}")).unwrap();
        let tables = sh("nft list tables");
        assert!(tables.contains("table inet edge2-policy"), "{tables}");
        assert!(!tables.contains("edgenetd-policy"), "{tables}");
    }
}
