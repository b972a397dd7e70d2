//! Policy benchmark (prints figures; asserts nothing about time).
//!
//! A policy with 1,000 rules and named sets holding 100,000 elements, in a throwaway network
//! namespace: the controller's cold sync versus `nft -f` loading the same ruleset text, a
//! no-op resync (time and kernel writes), a one-element set change, and a resync after a
//! foreign commit (drift check without drift).
//!
//! Run with `scripts/bench-policy.sh` (builds in release mode and runs under `unshare --net`).

use std::fmt::Write;
use std::process::Command;
use std::time::Instant;

use edgenetd::config::load_str;
use edgenetd::controller::Controller;
use edgenetd::controller::policy::{PolicyController, program};
use edgenetd::dataplane::nft::{GenerationWatch, Nft, text};
use edgenetd::sync::{NoProgress, trigger};

const RULES: usize = 1_000;
const SETS: usize = 4;
const ELEMENTS: usize = 100_000;

fn config(extra_element: Option<&str>) -> String {
    config_with(extra_element, true)
}

/// The benchmark policy; `prefixes`: every 10th set element is a /28 (interval sets), else
/// all are single addresses (hash sets).
fn config_with(extra_element: Option<&str>, prefixes: bool) -> String {
    let mut c = String::from(
        "[policy]\ninput = \"drop\"\nforward_default = \"drop\"\n\n\
         [policy.zone.lan]\ninterfaces = [\"veth-lan\"]\nnetworks = [\"10.0.0.0/16\"]\n\n\
         [policy.zone.wan]\ninterfaces = [\"veth-wan\"]\nmasquerade = true\n\n",
    );
    let per_set = ELEMENTS / SETS;
    for s in 0..SETS {
        let _ = writeln!(c, "[policy.set.bl{s}]\ntype = \"ipv4\"\nelements = [");
        for i in 0..per_set {
            // Mostly single addresses, every 10th a /28 prefix; disjoint across sets.
            let n = (s * per_set + i) as u32;
            let base = 0x6400_0000u32 + n * 16; // 100.0.0.0 onwards
            let a = std::net::Ipv4Addr::from(base);
            if prefixes && i % 10 == 0 {
                let _ = write!(c, "\"{a}/28\",");
            } else {
                let _ = write!(c, "\"{a}\",");
            }
        }
        if s == 0
            && let Some(e) = extra_element
        {
            let _ = write!(c, "\"{e}\",");
        }
        c.push_str("]\n\n");
    }
    for r in 0..RULES {
        let _ = writeln!(c, "[[policy.rule]]\nname = \"rule-{r}\"");
        match r % 4 {
            0 => {
                let _ = writeln!(c, "from = \"@bl{}\"\naction = \"drop\"", (r / 4) % SETS);
            }
            1 => {
                let _ = writeln!(
                    c,
                    "from = \"lan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [{}, \"{}-{}\"]\naction = \"accept\"",
                    1000 + r,
                    20000 + r * 10,
                    20005 + r * 10
                );
            }
            2 => {
                let _ = writeln!(
                    c,
                    "from = [\"172.{}.0.0/16\"]\nto = \"lan\"\nprotocol = \"udp\"\nports = [{}]\naction = \"accept\"",
                    r % 250,
                    5000 + r
                );
            }
            _ => {
                let _ = writeln!(
                    c,
                    "to = \"self\"\nprotocol = \"tcp\"\nports = [{}]\naction = \"reject\"\nlimit = \"100/second\"",
                    30000 + r
                );
            }
        }
        c.push('\n');
    }
    c.push_str("[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n\n[[policy.port_forward]]\nname = \"web\"\nfrom = \"wan\"\nport = 8080\nto = \"10.0.0.10:80\"\n");
    c
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    if String::from_utf8_lossy(&links.stdout).lines().count() > 1
        && std::env::var_os("EDGENETD_BENCH_ANY_NETNS").is_none()
    {
        eprintln!("refusing to run outside a fresh network namespace: use scripts/bench-policy.sh");
        std::process::exit(2);
    }
    let text = config(None);
    let t = Instant::now();
    let desired = load_str(&[("bench.toml", &text)]).unwrap_or_else(|e| panic!("{e}"));
    let parse_ms = ms(t);
    let table = desired.daemon.policy_table();
    let t = Instant::now();
    let prog = program::build(desired.policy.as_ref().unwrap(), &table);
    let plan_ms = ms(t);
    println!(
        "policy benchmark: {RULES} config rules -> {} kernel rules, {SETS} sets with {ELEMENTS} elements ({} after normalization)",
        prog.rule_count(),
        prog.table
            .sets
            .iter()
            .map(|s| s.elements.len())
            .sum::<usize>()
    );
    println!("  parse + validate config         {parse_ms:9.1} ms");
    println!("  plan (config -> table)          {plan_ms:9.1} ms");

    // Reference: nft -f with the same ruleset text.
    let nft_text = text::render_replace(&prog.table);
    let path =
        std::env::temp_dir().join(format!("edgenetd-bench-policy-{}.nft", std::process::id()));
    std::fs::write(&path, &nft_text).unwrap();
    let t = Instant::now();
    let st = Command::new("nft").arg("-f").arg(&path).status().unwrap();
    let nft_ms = ms(t);
    assert!(st.success(), "nft -f failed");
    Command::new("nft")
        .args(["delete", "table", "inet", &table])
        .status()
        .unwrap();
    let _ = std::fs::remove_file(&path);

    let (trig, _rx) = trigger();
    let mut ctrl = PolicyController::new(trig, GenerationWatch::new());
    let mut nft = Nft::open().unwrap();
    let t = Instant::now();
    let cold = smol::block_on(ctrl.sync(&desired, &NoProgress)).unwrap();
    let cold_ms = ms(t);
    println!(
        "  cold sync (edgenetd)            {cold_ms:9.1} ms   ({} netlink messages)",
        cold.changes
    );
    println!("  nft -f of the same ruleset      {nft_ms:9.1} ms");
    println!(
        "  ratio nft -f / edgenetd         {:9.1} x",
        nft_ms / cold_ms
    );

    let gen_before = nft.generation().unwrap();
    let mut runs = Vec::new();
    let mut noop = None;
    for _ in 0..5 {
        let t = Instant::now();
        noop = Some(smol::block_on(ctrl.sync(&desired, &NoProgress)).unwrap());
        runs.push(ms(t));
    }
    let noop = noop.unwrap();
    let noop_ms = median(&mut runs);
    let writes = u32::from(nft.generation().unwrap() != gen_before);
    println!(
        "  no-op resync (median of 5)      {noop_ms:9.3} ms   (kernel writes: {}, commits: {writes})",
        noop.changes
    );

    // One element added, removed, added ...: the median of 5 changes.
    let changed = load_str(&[("bench.toml", &config(Some("198.18.0.1")))]).unwrap();
    let mut runs = Vec::new();
    let mut delta = None;
    for i in 0..5 {
        let target = if i % 2 == 0 { &changed } else { &desired };
        let t = Instant::now();
        delta = Some(smol::block_on(ctrl.sync(target, &NoProgress)).unwrap());
        runs.push(ms(t));
    }
    let delta = delta.unwrap();
    let delta_ms = median(&mut runs);
    println!(
        "  one-element set change (median) {delta_ms:9.1} ms   ({} netlink messages: {})",
        delta.changes, delta.summary
    );

    Command::new("nft")
        .args(["add", "table", "inet", "someone-else"])
        .status()
        .unwrap();
    let t = Instant::now();
    let check = smol::block_on(ctrl.sync(&changed, &NoProgress)).unwrap();
    let check_ms = ms(t);
    println!(
        "  resync after a foreign commit   {check_ms:9.1} ms   (drift check, {} writes, {} repairs)",
        check.changes, check.drift_repairs
    );
    // The kernel part of that change alone: one element add through the dataplane.
    let set = prog.table.sets[1].clone();
    let t = Instant::now();
    let mut batch = edgenetd::dataplane::nft::Batch::new();
    batch
        .elements(
            &edgenetd::dataplane::nft::TableRef::from(&prog.table),
            &set,
            &[edgenetd::dataplane::nft::ir::Element::key(
                edgenetd::dataplane::nft::ir::ElemKey::Prefix("198.18.0.2/32".parse().unwrap()),
            )],
            edgenetd::dataplane::nft::Op::Add,
        )
        .unwrap();
    nft.execute(batch).unwrap();
    println!(
        "  one-element add, kernel only    {:9.1} ms   (a dataplane batch, no planning)",
        ms(t)
    );

    // Where the cold sync's time goes: building the batch versus the kernel's commit.
    let mut raw = prog.table.clone();
    raw.name = "bench-raw".into();
    let t = Instant::now();
    let mut batch = edgenetd::dataplane::nft::Batch::new();
    batch.replace_table(&raw).unwrap();
    let build_ms = ms(t);
    let t = Instant::now();
    nft.execute(batch).unwrap();
    let commit_ms = ms(t);
    Command::new("nft")
        .args(["delete", "table", "inet", "bench-raw"])
        .status()
        .unwrap();
    println!(
        "  cold write split: batch build {build_ms:.1} ms, send + kernel commit {commit_ms:.1} ms"
    );

    // The same policy with single addresses only: the sets become hash sets.
    let hosts = load_str(&[("bench.toml", &config_with(None, false))]).unwrap();
    let hosts_prog = program::build(hosts.policy.as_ref().unwrap(), &table);
    Command::new("nft")
        .args(["delete", "table", "inet", &table])
        .status()
        .unwrap();
    let path =
        std::env::temp_dir().join(format!("edgenetd-bench-hosts-{}.nft", std::process::id()));
    std::fs::write(&path, text::render_replace(&hosts_prog.table)).unwrap();
    let t = Instant::now();
    assert!(
        Command::new("nft")
            .arg("-f")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    let nft_hosts_ms = ms(t);
    let _ = std::fs::remove_file(&path);
    Command::new("nft")
        .args(["delete", "table", "inet", &table])
        .status()
        .unwrap();
    let (trig, _rx) = trigger();
    let mut fresh = PolicyController::new(trig, GenerationWatch::new());
    let t = Instant::now();
    smol::block_on(fresh.sync(&hosts, &NoProgress)).unwrap();
    let hosts_ms = ms(t);
    println!(
        "  addresses only (hash sets): cold sync {hosts_ms:.1} ms, nft -f {nft_hosts_ms:.1} ms, ratio {:.1} x",
        nft_hosts_ms / hosts_ms
    );
    let mut raw = hosts_prog.table.clone();
    raw.name = "bench-raw".into();
    let t = Instant::now();
    let mut batch = edgenetd::dataplane::nft::Batch::new();
    batch.replace_table(&raw).unwrap();
    let build_ms = ms(t);
    let t = Instant::now();
    nft.execute(batch).unwrap();
    let commit_ms = ms(t);
    let t = Instant::now();
    let rules = nft
        .list_rules(&edgenetd::dataplane::nft::TableRef::from(&raw))
        .unwrap();
    let list_ms = ms(t);
    println!(
        "    split: batch build {build_ms:.1} ms, send + kernel commit {commit_ms:.1} ms, listing {} rules {list_ms:.1} ms",
        rules.len()
    );
    println!("  (sync times include planning from the validated config: {plan_ms:.1} ms each)");
}
