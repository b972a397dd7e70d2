//! `edgenetd plan` and `edgenetd cleanup` on the real binary, for the policy area.

use crate::common;
use crate::netns_test;

use common::bin::edgenetd;
use common::policy::HOME;
use common::scratch::ScratchDir;
use common::shell::sh;

/// The policy area's part of `plan` output: from `# policy` through its `#` difference lines.
fn policy_part(out: &str) -> &str {
    let start = out.find("# policy\n").expect("a policy section");
    let rest = &out[start..];
    let diff = rest
        .find("# differences from the running kernel:\n")
        .expect("a differences block");
    let len: usize = rest[diff..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.len() + 1)
        .sum();
    &rest[..diff + len]
}

netns_test! {
    fn plan_loads_with_nft_check_and_cleanup_removes_only_the_policy_table() {
        let dir = ScratchDir::with_files("policy-cli", &[(
            "edgenetd.toml",
            &format!("[controller.route]\nenabled = false\n[controller.service]\nenabled = false\n{HOME}"),
        )]);
        let cfg = dir.config();
        let cfg = cfg.to_str().unwrap();
        let run = edgenetd(&["plan", "--config", cfg]);
        let (ok, out, err) = (run.ok(), run.stdout, run.stderr);
        assert!(ok, "{err}");
        assert!(out.contains("table inet edgenetd-policy {"), "{out}");
        assert!(out.contains("#   + table inet edgenetd-policy"), "{out}");
        let plan = dir.join("plan.nft");
        std::fs::write(&plan, policy_part(&out)).unwrap();
        sh(&format!("nft -c -f {}", plan.display()));
        assert!(!sh("nft list tables").contains("edgenetd-policy"), "plan wrote nothing");
        // Install it as plan printed it, with a foreign table beside it.
        sh(&format!("nft -f {}", plan.display()));
        sh("nft add table inet other && nft add chain inet other c && nft add rule inet other c counter");
        let other = sh("nft list table inet other");
        let run = edgenetd(&["plan", "--config", cfg]);
        let (ok, out) = (run.ok(), run.stdout);
        assert!(ok && policy_part(&out).ends_with("#   none\n"), "what plan loads is what a sync writes: {out}");
        let run = edgenetd(&["cleanup", "--config", cfg]);
        let (ok, out, err) = (run.ok(), run.stdout, run.stderr);
        assert!(ok, "{err}");
        assert!(out.contains("policy: deleted table inet edgenetd-policy"), "{out}");
        assert!(!sh("nft list tables").contains("edgenetd-policy"));
        assert_eq!(sh("nft list table inet other"), other);
    }
}
