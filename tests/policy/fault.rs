//! A rule group that the kernel refuses (crafted with the `fault-injection` feature's
//! `inject_kernel_reject` key) is isolated: every other rule keeps working, its own traffic
//! fails closed, the sync records as failed with the group named, and /healthz stays 200.
#![cfg(feature = "fault-injection")]

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::daemon::{Daemon, Options};
use common::policy::{HOME, lan_wan};
use common::shell::sh;
use common::topology::failed;
use common::wait::wait_until;

const BAD_ACCEPT: &str = r#"
[[policy.rule]]
name = "bad-accept"
from = "wan"
to = "self"
protocol = "tcp"
ports = [2222]
action = "accept"
inject_kernel_reject = true
"#;

netns_test! {
    fn a_refused_accept_group_fails_closed_and_everything_else_works() {
        let t = lan_wan();
        let mut d = Driver::policy();
        let cfg = format!("{HOME}{BAD_ACCEPT}");
        let err = d.sync(&cfg).unwrap_err();
        assert_eq!(err.failures.len(), 1, "{err}");
        assert_eq!(err.failures[0].object, "policy rule bad-accept");
        assert!(err.failures[0].error.contains("No such file or directory"), "{err}");
        assert!(err.report.changes > 0, "the rest was written: {err:?}");
        let table = sh("nft list table inet edgenetd-policy");
        assert!(!table.contains("bad-accept") && table.contains("ssh-from-lan"), "{table}");
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(t.router(), "tcp", 22);
        t.serve(t.router(), "tcp", 2222);
        t.serve(lan, "tcp", 80);
        // Its own traffic falls to the default verdict (drop).
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 2222)));
        // Every other rule works.
        assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "10.0.0.2");
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 8080), "192.0.2.2");
        // Each sync tries again and reports again (the kernel may accept it later).
        assert!(d.sync(&cfg).is_err());
        // Once the group is fixed, the next sync succeeds and programs it.
        d.sync(&cfg.replace("inject_kernel_reject = true", "")).unwrap();
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 2222), "192.0.2.2");
    }
}

netns_test! {
    fn a_refused_drop_group_leaves_a_barrier_so_its_traffic_is_never_let_through() {
        let t = lan_wan();
        let mut d = Driver::policy();
        // Placed before ssh-from-lan, which would otherwise accept lan -> :8000.
        let bad_drop = "\n[[policy.rule]]\nname = \"bad-drop\"\nfrom = \"lan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [8000]\naction = \"drop\"\ninject_kernel_reject = true\n";
        let cfg = HOME.replacen("[[policy.rule]]", &format!("{bad_drop}\n[[policy.rule]]"), 1);
        let err = d.sync(&cfg).unwrap_err();
        assert_eq!(err.failures[0].object, "policy rule bad-drop", "{err}");
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(input.contains("rule bad-drop refused by the kernel: fail closed"), "{input}");
        t.serve(t.router(), "tcp", 8000);
        assert!(failed(&t.connect(t.host("lan"), "tcp", "10.0.0.1", 8000)));
    }
}

netns_test! {
    fn the_daemon_stays_healthy_while_a_refused_group_fails_every_sync() {
        let _t = lan_wan();
        const LISTEN: &str = "127.0.0.1:19761";
        let cfg = format!(
            "[daemon]\nlisten = \"{LISTEN}\"\n[controller.policy]\nperiod = \"1s\"\nsync_budget = \"5s\"\n[controller.route]\nenabled = false\n[controller.service]\nenabled = false\n{HOME}{BAD_ACCEPT}"
        );
        let opts = Options { listen: LISTEN, ..Options::default() };
        let mut daemon = Daemon::start_with("policy-fault", &cfg, opts);
        let policy = &[("controller", "policy")];
        wait_until("two failed syncs to be counted", Duration::from_secs(15), || {
            daemon.metric("edgenetd_controller_sync_failures_total", policy).unwrap_or(0.0) >= 2.0
        });
        let (code, body) = daemon.get("/healthz");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("bad-accept"), "the last error names the group: {body}");
        assert!(sh("nft list table inet edgenetd-policy").contains("ssh-from-lan"));
        assert_eq!(daemon.metric("edgenetd_controller_sync_last_success", policy), Some(0.0));
        daemon.stop();
    }
}
