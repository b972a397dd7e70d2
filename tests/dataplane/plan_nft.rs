//! `edgenetd plan` output that nft accepts: every nftables part (policy and service) is a
//! complete table between `# nft begin:` / `# nft end:` markers, `nft -c -f` accepts it, and
//! loaded with `nft -f` into a fresh namespace it gives the same `nft -j list table` as what
//! the controllers program through their batches. Checked on the example configs and on
//! configs shaped like the benchmarks (a few hundred rules and services, source-ip affinity:
//! map keys holding `numgen` and `jhash`).

use crate::common;
use crate::netns_test;

use std::fmt::Write;

use common::bin::edgenetd;
use common::controller::{Driver, load};
use common::scratch::ScratchDir;
use common::shell::{sh, sh_status};
use serde_json::Value;

const EXAMPLE: &str = include_str!("../../config/edgenetd.toml");
const SCHEMA_EXAMPLE: &str = include_str!("../data/schema-example.toml");

/// The nft parts of `plan` output: (the table the part is about, its text with markers).
fn nft_parts(out: &str) -> Vec<(String, String)> {
    let mut parts = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in out.lines() {
        if let Some(id) = line.strip_prefix("# nft begin: ") {
            assert!(current.is_none(), "nested nft part at `{line}`:\n{out}");
            current = Some((id.to_string(), String::new()));
        }
        if let Some((id, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
            if line.strip_prefix("# nft end: ") == Some(id.as_str()) {
                parts.push(current.take().unwrap());
            }
        }
    }
    assert!(
        current.is_none(),
        "an nft part without its end marker:\n{out}"
    );
    parts
}

/// Runs `edgenetd plan` on `config` and returns its nft parts, each checked with `nft -c -f`.
fn plan_parts(tag: &str, config: &str) -> Vec<(String, String)> {
    let dir = ScratchDir::with_files(tag, &[("edgenetd.toml", config)]);
    let run = edgenetd(&["plan", "--config", dir.config().to_str().unwrap()]);
    assert!(run.ok(), "plan failed: {}", run.stderr);
    let parts = nft_parts(&run.stdout);
    for (i, (id, text)) in parts.iter().enumerate() {
        let file = dir.join(&format!("part{i}.nft"));
        std::fs::write(&file, text).unwrap();
        let (ok, _, err) = sh_status(&format!("nft -c -f {}", file.display()));
        assert!(ok, "nft -c refused the plan's `{id}` part: {err}");
    }
    parts
}

/// `nft -j list table <id>` with handles dropped and set elements sorted (a hash set lists in
/// its hash order, which two loads need not share).
fn normalized(json: &str) -> Vec<Value> {
    let mut v: Value = serde_json::from_str(json).expect("nft -j output");
    let items = v["nftables"].as_array_mut().expect("nftables array");
    items.retain(|o| o.get("metainfo").is_none());
    for item in items.iter_mut() {
        for obj in item.as_object_mut().unwrap().values_mut() {
            let Some(obj) = obj.as_object_mut() else {
                continue;
            };
            obj.remove("handle");
            if let Some(Value::Array(elems)) = obj.get_mut("elem") {
                elems.sort_by_key(|e| e.to_string());
            }
        }
    }
    items.clone()
}

/// nft stores a `typeof` slot (numgen, jhash) as type `integer` where the batch says `mark`;
/// only nft's own listings read that type id. Rewrites it back, returning the sets it
/// touched, so the comparison proves that nothing else differs.
fn unify_slot_type(items: &mut [Value]) -> Vec<String> {
    let mut touched = Vec::new();
    for item in items {
        let Some(set) = item.get_mut("map") else {
            continue;
        };
        let Some(Value::Array(types)) = set.get_mut("type") else {
            continue;
        };
        if types.last() == Some(&Value::from("integer")) {
            *types.last_mut().unwrap() = Value::from("mark");
            touched.push(set["name"].as_str().unwrap().to_string());
        }
    }
    touched
}

/// Every rule of an `nft --debug=netlink list` output: its chain and its kernel expressions
/// (handles and positions dropped).
fn rule_bytecode(listing: &str) -> Vec<String> {
    let mut rules: Vec<String> = Vec::new();
    let mut in_rule = false;
    for line in listing.lines() {
        if let Some(expr) = line.strip_prefix("  ") {
            if in_rule {
                // Anonymous sets are numbered in creation order, which nft and the batch need
                // not share; their elements are compared through the JSON listing.
                let expr: Vec<&str> = expr
                    .split(' ')
                    .map(|w| if w.starts_with("__set") { "__set" } else { w })
                    .collect();
                let expr = expr.join(" ");
                rules.last_mut().unwrap().push_str(&expr);
                rules.last_mut().unwrap().push('\n');
            }
        } else if !line.starts_with('\t') && !line.is_empty() {
            // `inet <table> <chain> <handle> [<position>]` starts a rule, `inet <table>
            // @<set>` a set's elements (compared through the JSON listing).
            let words: Vec<&str> = line.split_whitespace().collect();
            in_rule = words.len() >= 4 && !words[2].starts_with('@');
            if in_rule {
                rules.push(format!("{}\n", words[2]));
            }
        }
    }
    rules
}

/// Loads `text` with `nft -f` in a fresh namespace and lists `id` there.
fn listed_from_text(tag: &str, id: &str, text: &str) -> Vec<Value> {
    let dir = ScratchDir::with_files(tag, &[("part.nft", text)]);
    let file = dir.join("part.nft");
    normalized(&sh(&format!(
        "unshare --net sh -c 'nft -f {} && nft -j list {id}'",
        file.display()
    )))
}

/// Plans `config`, programs it through the policy and service controllers, and checks that
/// every nft part of the plan loads to what the controllers programmed. Returns the ids of
/// the parts.
fn check_faithful(tag: &str, config: &str) -> Vec<String> {
    let parts = plan_parts(tag, config);
    let desired = load(config);
    Driver::policy().sync_state(&desired).unwrap();
    Driver::service().sync_state(&desired).unwrap();
    for (id, text) in &parts {
        let batch = normalized(&sh(&format!("nft -j list {id}")));
        let mut text = listed_from_text(tag, id, text);
        let touched = unify_slot_type(&mut text);
        for name in &touched {
            assert!(
                name.starts_with("backends"),
                "`{id}`: set {name} typed integer"
            );
        }
        assert_eq!(batch.len(), text.len(), "`{id}`: object counts differ");
        for (b, t) in batch.iter().zip(&text) {
            assert_eq!(b, t, "`{id}`: the batch and the plan's text differ");
        }
    }
    // The rules' kernel expressions too, one by one (nft's netlink debug listing).
    for (id, text) in &parts {
        let batch = rule_bytecode(&sh(&format!("nft --debug=netlink list {id}")));
        let dir = ScratchDir::with_files(tag, &[("part.nft", text)]);
        let from_text = rule_bytecode(&sh(&format!(
            "unshare --net sh -c 'nft -f {} && nft --debug=netlink list {id}'",
            dir.join("part.nft").display()
        )));
        assert!(!batch.is_empty(), "`{id}`: no rules listed");
        assert_eq!(batch.len(), from_text.len(), "`{id}`: rule counts differ");
        let differ: Vec<String> = batch
            .iter()
            .zip(&from_text)
            .filter(|(b, t)| b != t)
            .map(|(b, t)| format!("batch:\n{b}text:\n{t}"))
            .collect();
        assert!(
            differ.is_empty(),
            "`{id}`: {} rules' kernel expressions differ, e.g.\n{}",
            differ.len(),
            differ.iter().take(6).cloned().collect::<String>()
        );
    }
    // The plan of a synced kernel prints the same tables and reports nothing to change.
    let again = plan_parts(&format!("{tag}-again"), config);
    assert_eq!(again, parts, "the nft parts depend on the kernel's state");
    parts.into_iter().map(|(id, _)| id).collect()
}

/// A policy shaped like `examples/bench_policy.rs`: address sets (single addresses and /28
/// prefixes), `rules` rules of four kinds, a forward and a port forward.
fn bench_policy(sets: usize, per_set: usize, rules: usize) -> String {
    let mut c = String::from(
        "[policy]\ninput = \"drop\"\nforward_default = \"drop\"\n\n\
         [policy.zone.lan]\ninterfaces = [\"veth-lan\"]\nnetworks = [\"10.0.0.0/16\"]\n\n\
         [policy.zone.wan]\ninterfaces = [\"veth-wan\"]\nmasquerade = true\n\n",
    );
    for s in 0..sets {
        let _ = writeln!(c, "[policy.set.bl{s}]\ntype = \"ipv4\"\nelements = [");
        for i in 0..per_set {
            let a = std::net::Ipv4Addr::from(0x6400_0000u32 + ((s * per_set + i) as u32) * 16);
            let _ = write!(c, "\"{a}{}\",", if i % 10 == 0 { "/28" } else { "" });
        }
        c.push_str("]\n\n");
    }
    for r in 0..rules {
        let _ = writeln!(c, "[[policy.rule]]\nname = \"rule-{r}\"");
        let _ = match r % 4 {
            0 => writeln!(c, "from = \"@bl{}\"\naction = \"drop\"", (r / 4) % sets),
            1 => writeln!(
                c,
                "from = \"lan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [{}, \"{}-{}\"]\naction = \"accept\"",
                1000 + r,
                20000 + r * 10,
                20005 + r * 10
            ),
            2 => writeln!(
                c,
                "from = [\"172.{}.0.0/16\"]\nto = \"lan\"\nprotocol = \"udp\"\nports = [{}]\naction = \"accept\"",
                r % 250,
                5000 + r
            ),
            _ => writeln!(
                c,
                "to = \"self\"\nprotocol = \"tcp\"\nports = [{}]\naction = \"reject\"\nlimit = \"100/second\"",
                30000 + r
            ),
        };
    }
    c.push_str(
        "[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n\n[[policy.port_forward]]\n\
         name = \"web\"\nfrom = \"wan\"\nport = 8080\nto = \"10.0.0.10:80\"\n",
    );
    c
}

/// Services shaped like `examples/bench_services.rs`, varied: IPv4 and IPv6, TCP and UDP,
/// every third with source-ip affinity (a `jhash` slot), IPv4 ones sticky with two timeouts
/// (recorder chains, a dynamic map), every fifth masquerading, backend
/// counts that reach small and large slot classes (1 to 1024 slots), weights, and an empty
/// service.
fn bench_services(n: usize) -> String {
    let mut c = String::new();
    for i in 0..n {
        let v6 = i % 4 == 3;
        let addr = if v6 {
            format!("fd96::{:x}", i + 1)
        } else {
            format!("10.96.{}.{}", i >> 8, i & 255)
        };
        let count = match i {
            0 => 130, // 1024 slots (no smaller class carries their weights)
            1 => 20,  // twenty, mixed weights
            2 => 0,   // no backend: when_empty
            _ => 1 + i % 6,
        };
        let backends: Vec<String> = (0..count)
            .map(|j| {
                let b = if v6 {
                    format!("\"[fd01::{:x}:{:x}]:8080\"", i + 1, j + 1)
                } else {
                    format!("\"10.{}.{}.{}:8080\"", 200 + j / 250, i & 255, j % 250 + 1)
                };
                match j % 3 {
                    0 => format!("{{ address = {b}, weight = {} }}", 1 + j % 5),
                    _ => b,
                }
            })
            .collect();
        let _ = writeln!(
            c,
            "[[service]]\nname = \"svc-{i}\"\naddress = \"{addr}\"\nport = {}\nprotocol = \"{}\"\n\
             backends = [{}]\naffinity = \"{}\"\nmasquerade = {}\nwhen_empty = \"{}\"\n",
            80 + i % 3,
            if i % 2 == 0 { "tcp" } else { "udp" },
            backends.join(", "),
            match (i % 3, v6) {
                (0, _) => "source-ip",
                // Sticky IPv4 services of two timeouts (nft 1.0.6 cannot parse the IPv6
                // recorder's update statement, see docs/services.md).
                (1, false) if i % 5 == 1 => "sticky\"\naffinity_timeout = \"30s",
                (1, false) => "sticky",
                _ => "none",
            },
            i % 5 == 0,
            if i % 7 == 0 { "drop" } else { "reject" },
        );
        // Source ranges of both families, hosts and prefixes (the fence's elements).
        if i % 11 == 4 {
            c.push_str("source_ranges = [\"192.0.2.0/24\", \"198.51.100.9\", \"2001:db8::/32\", \"2001:db8:1::7\"]\n");
        }
    }
    c
}

netns_test! {
    fn plan_of_the_example_config_is_nft_text_that_loads_to_the_batch_state() {
        let ids = check_faithful("plan-example", EXAMPLE);
        assert_eq!(ids, ["table inet edgenetd-policy", "table inet edgenetd-service"]);
    }
}

netns_test! {
    fn plan_of_the_schema_example_is_nft_text_that_loads_to_the_batch_state() {
        let ids = check_faithful("plan-schema", SCHEMA_EXAMPLE);
        assert_eq!(ids, ["table inet edgenetd-policy", "table inet edgenetd-service"]);
    }
}

netns_test! {
    fn plan_of_benchmark_shaped_configs_is_nft_text_that_loads_to_the_batch_state() {
        let config = format!(
            "[controller.route]\nenabled = false\n{}{}",
            bench_policy(8, 50, 200),
            bench_services(300)
        );
        let ids = check_faithful("plan-bench", &config);
        assert_eq!(ids, ["table inet edgenetd-policy", "table inet edgenetd-service"]);
        // The slot maps are declared with typeof, and both slot kinds are there.
        let parts = plan_parts("plan-bench-text", &config);
        let service = &parts[1].1;
        assert!(service.contains("typeof ip daddr . meta l4proto . th dport . numgen random mod "));
        // (Dispatch chains exist for the slot classes in use only: any class will do.)
        assert!(
            service.contains(". jhash ip saddr mod ") || service.contains(". jhash ip6 saddr mod "),
            "no source-hash dispatch chain: {service}"
        );
        assert!(service.contains(" seed 0x65646765 map @backends"));
        // Sticky services: their dynamic map and the recorders of both timeouts.
        assert!(service.contains("flags dynamic,timeout"));
        assert!(service.contains("chain sticky_rec_30s_4 {"));
        assert!(service.contains("chain sticky_rec_10800s_4 {"));
    }
}

netns_test! {
    fn plan_without_policy_or_services_removes_the_tables_with_nft_text() {
        // Tables left by an earlier config: the plan's nft parts remove them.
        let full = format!("{}{}", bench_policy(1, 5, 4), bench_services(3));
        let d = load(&full);
        Driver::policy().sync_state(&d).unwrap();
        Driver::service().sync_state(&d).unwrap();
        let parts = plan_parts("plan-empty", "[controller.route]\nenabled = false\n");
        let ids: Vec<&str> = parts.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["table inet edgenetd-policy", "table inet edgenetd-service"]);
        let dir = ScratchDir::with_files("plan-empty-load", &[("all.nft", &parts.iter().map(|p| p.1.as_str()).collect::<String>())]);
        sh(&format!("nft -f {}", dir.join("all.nft").display()));
        let tables = sh("nft list tables");
        assert!(!tables.contains("edgenetd-"), "{tables}");
    }
}

/// Rules nft rewrites when it reads text: one-prefix zones (byte-aligned or not, IPv4 and
/// IPv6), a one-address zone, ICMP and ICMPv6 types in an `inet` table.
const REWRITTEN: &str = r#"
[controller.route]
enabled = false
[policy]
input = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.1.0.0/20", "fd00:1::/52"]
[policy.zone.mgmt]
networks = ["192.0.2.7/32", "fd00:2::/64"]
[policy.zone.dmz]
networks = ["198.51.100.0/24"]
[[policy.rule]]
name = "ssh-mgmt"
from = "mgmt"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
[[policy.rule]]
name = "ssh-lan"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
[[policy.rule]]
name = "block"
from = ["10.9.0.0/19", "fd00:9::/47"]
action = "drop"
[[policy.rule]]
name = "dmz-web"
from = "dmz"
to = "self"
protocol = "tcp"
ports = [80]
action = "accept"
[[policy.rule]]
name = "ping"
to = "self"
protocol = "icmp"
icmp_types = ["echo-request"]
action = "accept"
[[policy.rule]]
name = "ping6"
from = "lan"
to = "self"
protocol = "icmpv6"
icmp_types = ["echo-request", "echo-reply"]
action = "accept"
"#;

netns_test! {
    fn one_prefix_zones_and_icmp_rules_load_the_same_from_text_and_batch() {
        let ids = check_faithful("plan-rewritten", REWRITTEN);
        assert_eq!(ids, ["table inet edgenetd-policy"]);
    }
}

/// A policy with every key of issue 11's first part: interface wildcards, `masquerade6`,
/// `mtu_fix`, `log_drops`, `log_prefix`, a reflecting and a non-reflecting port forward.
const ISSUE11_POLICY: &str = r#"
[controller.route]
enabled = false

[policy]
input = "drop"
forward_default = "reject"
forward_foreign_dnat = FOREIGN

[policy.zone.lan]
interfaces = ["br-lan", "lan*"]
networks = ["10.0.0.0/24", "fd00::/64"]
log_drops = true

[policy.zone.wan]
interfaces = ["eth-wan", "ppp*"]
masquerade = true
masquerade6 = true
mtu_fix = true
log_drops = true

[policy.zone.vpn]
interfaces = ["wg*"]
masquerade6 = true

[[policy.rule]]
name = "ssh"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
log_prefix = "lan ssh: "

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.port_forward]]
name = "web"
from = "wan"
port = 8080
to = "10.0.0.10:80"

[[policy.port_forward]]
name = "web6"
from = "wan"
port = 8443
to = "[fd00::10]:443"

[[policy.port_forward]]
name = "ssh-in"
from = "wan"
port = 2222
to = "10.0.0.10:22"
reflection = false
"#;

netns_test! {
    fn plan_of_the_issue11_keys_is_nft_text_that_loads_to_the_batch_state() {
        // A wan interface with addresses, so the port forwards reflect to them.
        sh("ip link add eth-wan type veth peer name eth-wan-peer && ip link set eth-wan up");
        sh("ip addr add 198.51.100.1/24 dev eth-wan && ip addr add 2001:db8::1/64 dev eth-wan nodad");
        for foreign in ["false", "true"] {
            let config = ISSUE11_POLICY.replace("FOREIGN", foreign);
            let ids = check_faithful(&format!("plan-issue11-{foreign}"), &config);
            assert_eq!(ids, ["table inet edgenetd-policy"]);
            let text = &plan_parts(&format!("plan-issue11-text-{foreign}"), &config)[0].1;
            for want in [
                "ip daddr 198.51.100.1 tcp dport 8080",
                "ip6 daddr 2001:db8::1 tcp dport 8443",
                "ct mark set ct mark | 0x80000000 dnat ip to 10.0.0.10:80",
                "oifname \"ppp*\" tcp flags syn tcp option maxseg size set rt mtu",
                "iifname \"lan*\"",
                "log prefix \"lan ssh: \"",
                "log prefix \"reject wan forward: \"",
                "meta nfproto ipv6 oifname != \"lo\" oifname \"wg*\" counter masquerade",
            ] {
                assert!(text.contains(want), "`{want}` missing:\n{text}");
            }
            // No reflection for `reflection = false`: its only DNAT is from the wan zone.
            assert_eq!(text.matches("dnat ip to 10.0.0.10:22").count(), 2, "{text}");
            assert_eq!(
                text.contains("ct status dnat ct mark & 0x80000000 != 0 counter accept"),
                foreign == "false",
                "{text}"
            );
        }
        // The new expressions (ct mark set, rt mtu, exthdr, wildcards) read back as written:
        // a drift check after someone else's commit finds nothing to repair.
        let desired = load(&ISSUE11_POLICY.replace("FOREIGN", "false"));
        let mut d = Driver::policy();
        d.sync_state(&desired).unwrap();
        sh("nft add table inet someone-else");
        let r = d.sync_state(&desired).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{}", r.summary);
    }
}

/// Every key of issue 11's richer matches, SNAT and marks (items 8 and 9).
const MATCH_POLICY: &str = r#"
[controller.route]
enabled = false

[policy]
input = "drop"
forward_default = "drop"

[policy.zone.lan]
interfaces = ["br-lan"]
networks = ["10.0.0.0/24", "fd00::/64"]

[policy.zone.wan]
interfaces = ["eth-wan"]
snat = ["198.51.100.7", "2001:db8::7"]

[policy.set.servers]
type = "ipv4"
elements = ["192.0.2.10", "192.0.2.11"]

[[policy.rule]]
name = "to-servers"
from = "lan"
to = "wan"
to_addresses = ["198.51.100.0/24", "@servers", "::1234/-64"]
protocol = ["tcp", "udp"]
ports = [53, "8000-8100"]
source_ports = [1024, "5000-5100"]
action = "reject"

[[policy.rule]]
name = "pinhole"
from = "wan"
to = "lan"
to_addresses = ["::1234/::ffff:ffff:ffff:ffff"]
protocol = "tcp"
ports = [443]
action = "accept"

[[policy.rule]]
name = "via-wan2"
from = "lan"
protocol = "tcp"
ports = [443]
set_mark = "0x10/0xff"

[[policy.rule]]
name = "mark-all"
from = ["10.0.0.5"]
set_mark = 7
action = "accept"

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.port_forward]]
name = "range-shifted"
from = "wan"
protocol = ["tcp", "udp"]
port = "8000-8010"
to = "10.0.0.10:9000-9010"
from_addresses = ["203.0.113.0/24", "@servers"]

[[policy.port_forward]]
name = "range-same"
from = "wan"
port = "7000-7005"
to = "[fd00::10]"
"#;

netns_test! {
    fn plan_of_the_match_snat_and_mark_keys_is_nft_text_that_loads_to_the_batch_state() {
        sh("ip link add eth-wan type veth peer name eth-wan-peer && ip link set eth-wan up");
        sh("ip addr add 198.51.100.1/24 dev eth-wan && ip addr add 2001:db8::1/64 dev eth-wan nodad");
        let ids = check_faithful("plan-matches", MATCH_POLICY);
        assert_eq!(ids, ["table inet edgenetd-policy"]);
        let text = &plan_parts("plan-matches-text", MATCH_POLICY)[0].1;
        for want in [
            "type filter hook prerouting priority -150; policy accept;",
            "ip6 daddr & ::ffff:ffff:ffff:ffff == ::1234",
            "ip daddr @servers",
            "tcp dport { 53, 8000-8100 } th sport { 1024, 5000-5100 }",
            "udp dport { 53, 8000-8100 } th sport { 1024, 5000-5100 }",
            "reject with tcp reset",
            "meta mark set meta mark & 0xffffff00 | 0x00000010",
            "ip saddr 10.0.0.5 counter meta mark set 0x00000007",
            "meta nfproto ipv4 oifname != \"lo\" oifname \"eth-wan\" counter snat ip to 198.51.100.7",
            "meta nfproto ipv6 oifname != \"lo\" oifname \"eth-wan\" counter snat ip6 to 2001:db8::7",
            "tcp dport 8000-8010 counter ct mark set ct mark | 0x80000000 dnat ip addr . port to tcp dport map { 8000 : 10.0.0.10 . 9000,",
            "udp dport 8000-8010",
            "ip saddr { 203.0.113.0/24 }",
            "ip saddr @servers",
            "tcp dport 7000-7005 counter ct mark set ct mark | 0x80000000 dnat ip6 to fd00::10",
        ] {
            assert!(text.contains(want), "`{want}` missing:\n{text}");
        }
        // The mark-only rule has no place in the filter chains.
        let forward = text.split("chain forward").nth(1).unwrap().split("chain").next().unwrap();
        assert!(!forward.contains("via-wan2"), "{forward}");
        // The new expressions read back as written: no drift after someone else's commit.
        let desired = load(MATCH_POLICY);
        let mut d = Driver::policy();
        d.sync_state(&desired).unwrap();
        sh("nft add table inet someone-else");
        let r = d.sync_state(&desired).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{}", r.summary);
    }
}
