//! `flow_offload`: the keys, the planned flowtable and offload rule, and what a kernel
//! without flowtables does with them: the rest of the firewall is programmed and the refused
//! flowtable is a failure of the sync (metrics, /healthz). The offload itself is proven with
//! packets on a kernel that has flowtables: scripts/arm64/test-vm-flow-offload.sh.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::daemon::{Daemon, Options};
use common::policy::{HOME, lan_wan};
use common::shell::{sh, sh_status};
use common::wait::wait_until;
use edgenetd::config::load_str;
use edgenetd::controller::policy::addresses::RouterAddresses;
use edgenetd::controller::policy::program::{self, FLOWTABLE, Program};
use edgenetd::dataplane::nft::ir::{Stmt, Verdict};
use edgenetd::dataplane::nft::text::{render_rule, render_table};
use edgenetd::dataplane::route::{LinkInfo, LinkKind, LinkTable};

fn errors(toml: &str) -> String {
    load_str(&[("main.toml", toml)])
        .expect_err("config must be rejected")
        .rendered
}

const SMALL: &str = r#"
[policy]
flow_offload = true

[policy.zone.lan]
interfaces = ["br-lan"]

[policy.zone.wan]
interfaces = ["ppp*", "eth9"]
masquerade = true

[[policy.forward]]
from = "lan"
to = "wan"
"#;

/// br-lan over lan1 and lan2, PPPoE (ppp0) over eth1.
fn links() -> LinkTable {
    let link = |index, name: &str, kind, master| LinkInfo {
        index,
        name: name.into(),
        kind,
        master,
        parent: None,
    };
    LinkTable {
        links: vec![
            link(1, "lo", LinkKind::Other, None),
            link(2, "lan1", LinkKind::Other, Some(4)),
            link(3, "lan2", LinkKind::Other, Some(4)),
            link(4, "br-lan", LinkKind::Bridge, None),
            link(5, "eth1", LinkKind::Other, None),
            link(6, "ppp0", LinkKind::Ppp, None),
        ],
        pppoe_devices: vec!["eth1".into()],
    }
}

fn build(toml: &str, links: LinkTable) -> Program {
    let desired = load_str(&[("edgenetd.toml", toml)]).unwrap();
    program::build_with(
        desired.policy.as_ref().unwrap(),
        "edgenetd-policy",
        &RouterAddresses::new(Vec::new()).with_links(links),
    )
}

/// The forward chain's rules as text, comments left out.
fn forward_rules(p: &Program) -> Vec<String> {
    p.table
        .rules
        .iter()
        .filter(|r| r.chain == "forward")
        .map(|r| {
            let mut r = r.clone();
            r.comment = None;
            render_rule(p.table.family, &r)
        })
        .collect()
}

#[test]
fn flow_offload_keys_are_read_with_their_defaults() {
    let on = load_str(&[(
        "e.toml",
        "[policy]\nflow_offload = true\nflow_offload_hw = true\n",
    )])
    .unwrap()
    .policy
    .unwrap();
    assert!(on.flow_offload && on.flow_offload_hw);
    let plain = load_str(&[("e.toml", "[policy]\n")])
        .unwrap()
        .policy
        .unwrap();
    assert!(!plain.flow_offload && !plain.flow_offload_hw);
}

#[test]
fn flow_offload_hw_without_flow_offload_is_an_error_at_its_place() {
    let out = errors("[policy]\ninput = \"drop\"\nflow_offload_hw = true\n");
    assert!(
        out.contains("main.toml:3:19") && out.contains("needs `flow_offload = true`"),
        "{out}"
    );
    let out = errors("[policy]\nflow_offload = \"yes\"\n");
    assert!(out.contains("main.toml:2:16"), "{out}");
    let out = errors("[policy]\nflow_offload = false\nflow_offload_hw = true\n");
    assert!(out.contains("main.toml:3:19"), "{out}");
}

#[test]
fn the_flowtable_lists_the_devices_below_the_zones_interfaces() {
    let p = build(SMALL, links());
    let [ft] = p.table.flowtables.as_slice() else {
        panic!("one flowtable: {:?}", p.table.flowtables);
    };
    assert_eq!(ft.name, FLOWTABLE);
    assert_eq!(ft.devices, ["eth1", "lan1", "lan2", "ppp0"]);
    assert_eq!(ft.priority, 0);
    assert!(!ft.hw_offload);
    let text = render_table(&p.table);
    assert!(
        text.contains(
            "\tflowtable ft {\n\t\thook ingress priority 0; devices = { \"eth1\", \"lan1\", \"lan2\", \"ppp0\" };\n\t}\n"
        ),
        "{text}"
    );
    let hw = build(
        &SMALL.replace(
            "flow_offload = true",
            "flow_offload = true\nflow_offload_hw = true",
        ),
        links(),
    );
    assert!(hw.table.flowtables[0].hw_offload);
    assert!(
        render_table(&hw.table)
            .contains("devices = { \"eth1\", \"lan1\", \"lan2\", \"ppp0\" }; flags offload;")
    );
}

#[test]
fn established_connections_are_offloaded_right_before_the_established_accept() {
    let p = build(SMALL, links());
    let fwd = forward_rules(&p);
    let offload = "ct state established meta l4proto { tcp, udp } counter flow add @ft";
    let at = fwd
        .iter()
        .position(|r| r == offload)
        .unwrap_or_else(|| panic!("{fwd:#?}"));
    assert_eq!(
        fwd[at + 1],
        "ct state established,related accept",
        "{fwd:#?}"
    );
    // The rule and the flowtable are one group of their own.
    let g = p.flowtable_group(FLOWTABLE);
    assert!(g > 0);
    assert_eq!(p.groups[g as usize].label, "flow-offload");
    let rules_in_group = p.rule_groups.iter().filter(|x| **x == g).count();
    assert_eq!(rules_in_group, 1);
}

#[test]
fn a_refused_flowtable_group_leaves_out_the_flowtable_and_its_rule_only() {
    let p = build(SMALL, links());
    let g = p.flowtable_group(FLOWTABLE);
    let (t, rule_groups, _) = p.without(&[g].into());
    assert!(t.flowtables.is_empty());
    assert_eq!(t.rules.len(), p.table.rules.len() - 1);
    assert!(!rule_groups.contains(&g));
    // Not a deny group: no barrier, everything else stays.
    assert!(
        !t.rules
            .iter()
            .any(|r| r.stmts.contains(&Stmt::FlowOffload(FLOWTABLE.into())))
    );
    assert!(
        !t.rules
            .iter()
            .any(|r| r.stmts == [Stmt::Counter, Stmt::Verdict(Verdict::Drop)])
    );
}

#[test]
fn without_flow_offload_or_without_any_zone_device_there_is_no_flowtable() {
    let off = build(&SMALL.replace("flow_offload = true", ""), links());
    assert!(off.table.flowtables.is_empty() && off.flowtable_groups.is_empty());
    assert!(!render_table(&off.table).contains("flow"));
    let none = build(SMALL, LinkTable::default());
    assert!(none.table.flowtables.is_empty());
    assert!(!forward_rules(&none).iter().any(|r| r.contains("flow add")));
}

#[test]
fn a_link_change_plans_a_new_device_list() {
    let before = build(SMALL, links());
    let mut more = links();
    more.links.push(LinkInfo {
        index: 7,
        name: "ppp1".into(),
        kind: LinkKind::Ppp,
        master: None,
        parent: None,
    });
    let after = build(SMALL, more);
    assert_eq!(
        after.table.flowtables[0].devices,
        ["eth1", "lan1", "lan2", "ppp0", "ppp1"]
    );
    assert!(
        !before.same_structure(&after),
        "a device change is a full write"
    );
}

/// True when this kernel creates flowtables (probed in the test's namespace).
fn kernel_has_flowtables() -> bool {
    let (ok, _, _) = sh_status(
        "printf 'table inet probe-ft {\\n flowtable f { hook ingress priority 0; devices = { lo }; }\\n}\\n' | nft -f -",
    );
    sh_status("nft delete table inet probe-ft");
    ok
}

fn home_with_offload() -> String {
    HOME.replacen(
        "output = \"accept\"",
        "output = \"accept\"\nflow_offload = true",
        1,
    )
}

netns_test! {
    fn issue11_a_kernel_without_flowtables_keeps_the_firewall_and_reports_the_flowtable() {
        let t = lan_wan();
        let mut d = Driver::policy();
        let cfg = home_with_offload();
        let result = d.sync(&cfg);
        let table = sh("nft list table inet edgenetd-policy");
        assert!(table.contains("ssh-from-lan") && table.contains("forward lan->wan"), "{table}");
        if kernel_has_flowtables() {
            result.unwrap();
            assert!(table.contains("flowtable ft") && table.contains("flow add @ft"), "{table}");
            assert!(table.contains("veth-lan") && table.contains("veth-wan"), "{table}");
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.failures.len(), 1, "{err}");
            assert_eq!(err.failures[0].object, "policy flow-offload");
            assert!(err.failures[0].error.contains("refused by the kernel"), "{err}");
            assert!(!table.contains("flowtable") && !table.contains("flow add"), "{table}");
            // Each sync tries again (the module may be loaded later) and reports again.
            assert!(d.sync(&cfg).is_err());
        }
        // Forwarding and the router's own rules work either way.
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(t.router(), "tcp", 22);
        t.serve(wan, "tcp", 80);
        assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "10.0.0.2");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        // Turning it off is a clean sync.
        d.sync(HOME).unwrap();
    }
}

netns_test! {
    fn issue11_a_refused_flowtable_shows_in_metrics_and_healthz() {
        let _t = lan_wan();
        if kernel_has_flowtables() {
            eprintln!("this kernel has flowtables: nothing is refused here");
            return;
        }
        const LISTEN: &str = "127.0.0.1:19781";
        let cfg = format!(
            "[daemon]\nlisten = \"{LISTEN}\"\n[controller.policy]\nperiod = \"1s\"\nsync_budget = \"5s\"\n[controller.route]\nenabled = false\n[controller.service]\nenabled = false\n{}",
            home_with_offload()
        );
        let opts = Options { listen: LISTEN, ..Options::default() };
        let mut daemon = Daemon::start_with("policy-flow-offload", &cfg, opts);
        let policy = &[("controller", "policy")];
        wait_until("two failed syncs to be counted", Duration::from_secs(15), || {
            daemon.metric("edgenetd_controller_sync_failures_total", policy).unwrap_or(0.0) >= 2.0
        });
        let (code, body) = daemon.get("/healthz");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("flow-offload"), "the last error names the flowtable: {body}");
        let table = sh("nft list table inet edgenetd-policy");
        assert!(table.contains("ssh-from-lan") && !table.contains("flowtable"), "{table}");
        daemon.stop();
    }
}
