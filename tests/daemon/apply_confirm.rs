//! `edgenetd apply --confirm` and `edgenetd confirm` end to end, with real packets: a wan
//! host reaches the router's SSH port (a TCP server on port 22 in the router namespace); a
//! configuration that moves the allowed port cuts that access; without `confirm` the daemon
//! rolls back and the access returns.

use crate::common;
use crate::netns_test;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bin::{Outcome, edgenetd};
use common::daemon::{Daemon, Options};
use common::policy::lan_wan;
use common::scratch::ScratchDir;
use common::topology::{Topology, failed};
use common::wait::wait_until;

/// The wan host may open TCP port 22 on the router.
const OPEN: &str = r#"[controller.service]
enabled = false
[controller.route]
enabled = false

[policy]
input = "drop"
forward_default = "drop"
output = "accept"

[policy.zone.wan]
interfaces = ["veth-wan"]

[[policy.rule]]
name = "ssh-from-wan"
from = "wan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
"#;

/// The operator's mistake: the allowed port moved, the session's port is cut.
fn cut() -> String {
    OPEN.replace("ports = [22]", "ports = [2222]")
        .replace("ssh-from-wan", "ssh-moved")
}

/// The router under test: its config directory and state directory outlive a daemon, so a
/// restart finds them.
struct Router {
    /// Holds edgenetd.toml, state/ and control.sock.
    dir: ScratchDir,
    /// The topology (router = this namespace, wan host).
    t: Topology,
}

impl Router {
    fn new(tag: &str) -> Router {
        let t = lan_wan();
        t.serve(t.router(), "tcp", 22);
        Router {
            dir: ScratchDir::with_files(tag, &[("edgenetd.toml", OPEN)]),
            t,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("control.sock")
    }

    fn start(&self) -> Daemon {
        self.start_on(&self.dir.config())
    }

    /// A daemon on main config `config`, with this router's control socket and state
    /// directory.
    fn start_on(&self, config: &Path) -> Daemon {
        let (socket, state) = (self.socket(), self.dir.join("state"));
        let args: Vec<&str> = vec![
            "--config",
            config.to_str().unwrap(),
            "--control-socket",
            socket.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ];
        let d = Daemon::start_with(
            "apply-daemon",
            "",
            Options {
                args: &args,
                ..Options::default()
            },
        );
        d.wait_ready();
        wait_until("the control socket", Duration::from_secs(5), || {
            self.socket().exists()
        });
        d
    }

    /// `edgenetd apply` of `text` (written beside the main file) with `extra` arguments.
    fn apply(&self, text: &str, extra: &[&str]) -> Outcome {
        self.dir.write("new.toml", text);
        let new = self.dir.join("new.toml");
        let socket = self.socket();
        let mut args = vec![
            "apply",
            "--config",
            new.to_str().unwrap(),
            "--control-socket",
            socket.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        edgenetd(&args)
    }

    fn confirm(&self) -> Outcome {
        let socket = self.socket();
        edgenetd(&["confirm", "--control-socket", socket.to_str().unwrap()])
    }

    fn ssh_works(&self) -> bool {
        self.t.connect(self.t.host("wan"), "tcp", "192.0.2.1", 22) == "192.0.2.2"
    }

    fn wait_ssh(&self, works: bool, timeout: Duration) {
        wait_until(
            &format!("ssh from the wan works = {works}"),
            timeout,
            || {
                let answer = self.t.connect(self.t.host("wan"), "tcp", "192.0.2.1", 22);
                if works {
                    answer == "192.0.2.2"
                } else {
                    failed(&answer)
                }
            },
        );
    }

    fn main_text(&self) -> String {
        std::fs::read_to_string(self.dir.config()).unwrap()
    }
}

fn healthz(d: &Daemon) -> serde_json::Value {
    serde_json::from_str(&d.get("/healthz").1).unwrap()
}

netns_test! {
    fn an_unconfirmed_apply_that_cuts_ssh_is_rolled_back_and_ssh_returns() {
        let r = Router::new("apply-rollback");
        let d = r.start();
        assert!(r.ssh_works(), "ssh before the apply:\n{}", d.log());
        let applied_at = Instant::now();
        let out = r.apply(&cut(), &["--confirm", "3s"]);
        assert!(out.ok(), "{out:?}\n{}", d.log());
        assert!(out.stdout.contains("ssh-moved"), "the plan shows what changes: {}", out.stdout);
        assert!(out.stdout.contains("edgenetd confirm") && out.stdout.contains("within 3s"), "{}", out.stdout);
        r.wait_ssh(false, Duration::from_secs(2));
        assert!(r.main_text().contains("ssh-moved"), "NEW replaced the main file");
        let h = healthz(&d);
        assert!(h["config"]["pendingConfirm"]["deadline"].is_string(), "{h}");
        assert!(
            d.wait_notify(0, Duration::from_secs(3), |m| m.contains("waits for confirm until")).is_some(),
            "STATUS= shows the pending confirm: {:?}", d.messages()
        );
        // Within the deadline plus one sync (and a client's 1.5 s timeout), ssh is back.
        r.wait_ssh(true, Duration::from_secs(6));
        assert!(applied_at.elapsed() >= Duration::from_millis(2900), "not before the deadline");
        assert_eq!(d.metric("edgenetd_config_rollbacks_total", &[]), Some(1.0));
        assert_eq!(r.main_text(), OPEN, "the main file holds the confirmed text again");
        let h = healthz(&d);
        assert!(h["config"]["pendingConfirm"].is_null(), "{h}");
        assert!(h["config"]["lastRollback"]["reason"].as_str().unwrap().contains("not confirmed"), "{h}");
        assert!(
            d.wait_notify(0, Duration::from_secs(3), |m| m.contains("config rolled back at")).is_some(),
            "STATUS= shows the rollback: {:?}", d.messages()
        );
        // The restored file is not reloaded as a change of its own.
        assert_eq!(d.metric("edgenetd_config_reloads_total", &[]), Some(0.0), "{}", d.log());
    }
}

netns_test! {
    fn a_confirmed_apply_stays_after_its_deadline() {
        let r = Router::new("apply-confirm");
        let d = r.start();
        // Right after a rollback (its file write and sync still settling), as an operator
        // who retries at once would.
        assert!(r.apply(&cut(), &["--confirm", "1s"]).ok());
        wait_until("the first rollback", Duration::from_secs(5), || {
            d.metric("edgenetd_config_rollbacks_total", &[]) == Some(1.0)
        });
        let out = r.apply(&cut(), &["--confirm", "3s"]);
        assert!(out.ok(), "{out:?}");
        r.wait_ssh(false, Duration::from_secs(2));
        let confirmed = r.confirm();
        assert!(confirmed.ok(), "{confirmed:?}\n{}", d.log());
        std::thread::sleep(Duration::from_secs(4));
        assert!(!r.ssh_works(), "the confirmed block stays:\n{}", d.log());
        assert_eq!(d.metric("edgenetd_config_rollbacks_total", &[]), Some(1.0));
        assert_eq!(r.main_text(), cut());
        let copy = std::fs::read_to_string(r.dir.join("state/confirmed.toml")).unwrap();
        assert_eq!(copy, cut(), "the confirmed copy follows the confirm");
        let again = r.confirm();
        assert_eq!(again.code, 1, "{again:?}");
        assert!(again.stderr.contains("nothing to confirm"), "{again:?}");
    }
}

netns_test! {
    fn a_restart_while_a_confirm_is_pending_comes_back_confirmed() {
        let r = Router::new("apply-restart");
        let mut d = r.start();
        let out = r.apply(&cut(), &["--confirm", "60s"]);
        assert!(out.ok(), "{out:?}");
        r.wait_ssh(false, Duration::from_secs(2));
        assert!(d.stop().success());
        drop(d);
        assert!(r.main_text().contains("ssh-moved"));
        let d = r.start();
        // Rolled back before the first sync: ssh works as soon as the daemon is ready.
        assert!(r.ssh_works(), "{}", d.log());
        assert_eq!(r.main_text(), OPEN);
        assert_eq!(d.metric("edgenetd_config_rollbacks_total", &[]), Some(1.0));
        assert!(d.log().contains("restarted while"), "{}", d.log());
        assert!(!r.dir.join("state/pending.json").exists());
    }
}

netns_test! {
    fn an_invalid_apply_lists_every_problem_and_changes_nothing() {
        let r = Router::new("apply-invalid");
        let d = r.start();
        let bad = cut().replace("ports = [2222]", "ports = [99999]").replace("input = \"drop\"", "input = \"maybe\"");
        let out = r.apply(&bad, &["--confirm", "3s"]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains("new.toml:") && out.stderr.contains("2 problem(s)"), "{}", out.stderr);
        assert!(out.stderr.contains("nothing was changed"), "{}", out.stderr);
        assert_eq!(r.main_text(), OPEN);
        assert!(!r.dir.join("state/pending.json").exists());
        assert!(r.ssh_works());
        assert!(healthz(&d)["config"]["pendingConfirm"].is_null());
    }
}

netns_test! {
    fn while_a_confirm_is_pending_reloads_and_other_applies_are_refused() {
        let r = Router::new("apply-refuse");
        let d = r.start();
        assert!(r.apply(&cut(), &["--confirm", "30s"]).ok());
        r.wait_ssh(false, Duration::from_secs(2));
        // An edit on disk and a SIGHUP: refused, the pending change is not buried.
        r.dir.replace("edgenetd.toml", OPEN);
        d.signal("HUP");
        wait_until("the refusal", Duration::from_secs(3), || d.log().contains("config reload refused"));
        assert!(!r.ssh_works(), "the edit was not applied");
        let second = r.apply(OPEN, &[]);
        assert_eq!(second.code, 1, "{second:?}");
        assert!(second.stderr.contains("waiting for `edgenetd confirm`"), "{second:?}");
        assert!(r.confirm().ok());
        // After the confirm, reloads behave as always.
        d.signal("HUP");
        r.wait_ssh(true, Duration::from_secs(4));
    }
}

netns_test! {
    fn apply_without_confirm_applies_and_confirms_at_once() {
        let r = Router::new("apply-now");
        let d = r.start();
        let out = r.apply(&cut(), &[]);
        assert!(out.ok() && out.stdout.contains("applied and confirmed"), "{out:?}");
        r.wait_ssh(false, Duration::from_secs(2));
        assert!(healthz(&d)["config"]["pendingConfirm"].is_null());
        assert!(!r.confirm().ok(), "nothing waits for confirm");
    }
}

netns_test! {
    fn a_non_admin_user_is_refused_by_the_socket() {
        let r = Router::new("apply-nonadmin");
        let d = r.start();
        let socket = r.socket();
        let nobody = |args: &[&str]| {
            let out = std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_edgenetd")])
                .args(args)
                .output()
                .expect("setpriv");
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        // The file's mode (0660, owner root here) keeps the user out...
        let (code, err) = nobody(&["confirm", "--control-socket", socket.to_str().unwrap()]);
        assert_eq!(code, Some(3), "{err}");
        assert!(err.contains("Permission denied"), "{err}");
        // ...and so does the daemon's own SO_PEERCRED check when the mode is too wide.
        std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        r.dir.write("nobody.toml", &cut());
        let new = r.dir.join("nobody.toml");
        let (code, err) = nobody(&["apply", "--config", new.to_str().unwrap(), "--control-socket", socket.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("permission denied") && err.contains("uid 65534"), "{err}");
        assert_eq!(r.main_text(), OPEN);
        assert!(d.log().contains("connection refused"), "{}", d.log());
        assert!(r.ssh_works());
    }
}

netns_test! {
    /// An operator who retries at once: the route controller's syncs of a rollback and of
    /// the same change applied again follow each other closely; the confirmed route stays.
    fn a_route_applied_again_right_after_its_rollback_and_confirmed_stays() {
        let base = "[controller.policy]\nenabled = false\n[controller.service]\nenabled = false\n\n[[route]]\nto = \"198.51.100.0/24\"\ntype = \"blackhole\"\n";
        let with = format!("{base}\n[[route]]\nto = \"10.30.0.0/16\"\ntype = \"blackhole\"\n");
        let dir = ScratchDir::with_files("apply-route", &[("edgenetd.toml", base)]);
        let r = Router { dir, t: Topology::new() };
        let d = r.start();
        let has = || common::shell::sh("ip route show proto 190").contains("blackhole 10.30.0.0/16");
        for round in 0..3 {
            assert!(r.apply(&with, &["--confirm", "1s"]).ok());
            wait_until("the route", Duration::from_secs(3), has);
            wait_until("the rollback", Duration::from_secs(5), || !has());
            assert!(r.apply(&with, &["--confirm", "30s"]).ok());
            wait_until("the route again", Duration::from_secs(3), has);
            assert!(r.confirm().ok());
            std::thread::sleep(Duration::from_secs(2));
            assert!(has(), "round {round}: the confirmed route is gone:\n{}", d.log());
            assert!(r.apply(base, &[]).ok());
            wait_until("the route removed", Duration::from_secs(3), || !has());
        }
    }
}

/// The files in the router's directory whose name says a rollback kept them.
fn rejected_copies(r: &Router) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(r.dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".rejected-"))
        .collect();
    found.sort();
    found
}

netns_test! {
    /// The reproduction: a daemon on a.toml applied b.toml with --confirm 60s and was killed;
    /// a daemon then started on c.toml with the same state directory logged `restored
    /// …/confirmed.toml in place of c.toml`, and c.toml's content was gone (a.toml's in its
    /// place).
    fn a_pending_confirm_is_not_restored_over_the_config_the_next_daemon_starts_with() {
        let r = Router::new("apply-other-main");
        let c_text = OPEN.replace("ssh-from-wan", "ssh-of-c");
        r.dir.write("c.toml", &c_text);
        let mut d = r.start();
        assert!(r.apply(&cut(), &["--confirm", "60s"]).ok());
        d.signal("KILL");
        assert!(d.wait_exit(Duration::from_secs(5)).is_some());
        drop(d);
        let c = r.start_on(&r.dir.join("c.toml"));
        assert_eq!(std::fs::read_to_string(r.dir.join("c.toml")).unwrap(), c_text, "{}", c.log());
        assert!(c.log().contains("left alone"), "says why it did not roll back:\n{}", c.log());
        assert!(!c.log().contains("restored"), "{}", c.log());
        assert!(r.dir.join("state/pending.json").exists(), "the record waits for its own daemon");
        assert_eq!(c.metric("edgenetd_config_rollbacks_total", &[]), Some(0.0));
        // c.toml's daemon refuses to write a state directory that holds another file's
        // pending confirm (its confirmed copy is a.toml's way back).
        r.dir.write("new.toml", &c_text);
        let new = r.dir.join("new.toml");
        let refused = edgenetd(&["apply", "--config", new.to_str().unwrap(), "--control-socket", r.socket().to_str().unwrap()]);
        assert_eq!(refused.code, 1, "{refused:?}");
        assert!(refused.stderr.contains("holds a confirm pending for"), "{refused:?}");
        drop(c);
        // a.toml's own daemon rolls it back, and no copy is kept: the file held what apply
        // wrote.
        let a = r.start();
        assert_eq!(r.main_text(), OPEN, "{}", a.log());
        assert!(r.ssh_works(), "{}", a.log());
        assert_eq!(a.metric("edgenetd_config_rollbacks_total", &[]), Some(1.0));
        assert!(!r.dir.join("state/pending.json").exists());
        assert_eq!(rejected_copies(&r), Vec::<PathBuf>::new());
        assert_eq!(std::fs::read_to_string(r.dir.join("c.toml")).unwrap(), c_text);
    }
}

netns_test! {
    /// A rollback used to rename the confirmed copy over the main file whatever it held: an
    /// edit made while the confirm was pending (refused as a reload, left on disk) was lost.
    fn a_rollback_keeps_a_main_file_edited_while_the_confirm_was_pending_beside_it() {
        let r = Router::new("apply-keep-edit");
        let d = r.start();
        assert!(r.apply(&cut(), &["--confirm", "2s"]).ok());
        let edit = format!("{}# edited by hand while the confirm was pending\n", cut());
        r.dir.replace("edgenetd.toml", &edit);
        wait_until("the rollback", Duration::from_secs(6), || {
            d.metric("edgenetd_config_rollbacks_total", &[]) == Some(1.0)
        });
        assert_eq!(r.main_text(), OPEN);
        let kept = rejected_copies(&r);
        assert_eq!(kept.len(), 1, "{kept:?}\n{}", d.log());
        assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), edit);
        assert!(d.log().contains("its content is kept as"), "{}", d.log());
        r.wait_ssh(true, Duration::from_secs(4));
    }
}

netns_test! {
    /// Two daemons with the same control socket: the second warned and ran without one
    /// (and, before that, rolled back the first one's pending confirm at start-up).
    fn a_second_daemon_on_a_served_control_socket_stops_before_it_touches_the_first_ones_files() {
        let r = Router::new("apply-second");
        let first = r.start();
        assert!(r.apply(&cut(), &["--confirm", "60s"]).ok());
        let mut second = Command::new(env!("CARGO_BIN_EXE_edgenetd"))
            .args(["run", "--config", r.dir.config().to_str().unwrap()])
            .args(["--control-socket", r.socket().to_str().unwrap()])
            .args(["--state-dir", r.dir.join("state").to_str().unwrap()])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let exited = common::wait::poll_for(Duration::from_secs(10), || second.try_wait().unwrap());
        if exited.is_none() {
            let _ = second.kill();
        }
        let out = second.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(exited.and_then(|s| s.code()), Some(1), "{err}");
        let want = format!("another process (pid {}) is serving this control socket", first.pid());
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
        assert!(r.main_text().contains("ssh-moved"), "the first daemon's pending apply stays");
        assert!(r.dir.join("state/pending.json").exists());
        let confirmed = r.confirm();
        assert!(confirmed.ok(), "the first daemon still serves its socket: {confirmed:?}");
        assert!(confirmed.stdout.contains(&format!("daemon: pid {}", first.pid())), "{confirmed:?}");
    }
}

/// A config that enables no controller (two daemons in one namespace must not fight over
/// the kernel), listening on `port`, marked with `tag`.
fn idle(port: u16, tag: &str) -> String {
    format!(
        "# {tag}\n[daemon]\nlisten = \"127.0.0.1:{port}\"\n[controller.policy]\nenabled = false\n[controller.service]\nenabled = false\n[controller.route]\nenabled = false\n"
    )
}

/// Removes an instance's derived runtime and state directories when the test ends.
struct Derived(Vec<PathBuf>);

impl Drop for Derived {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

netns_test! {
    /// Two daemons on one host shared /run/edgenetd/control.sock and /var/lib/edgenetd: the
    /// second ran without a control socket, and `edgenetd apply` from a shell changed the
    /// first daemon's config.
    fn two_daemons_on_one_host_get_their_own_control_sockets_and_apply_changes_the_one_it_names() {
        use edgenetd::control::instance::Instance;
        let _topology = Topology::new();
        let dir = ScratchDir::with_files("apply-two", &[("a/edgenetd.toml", &idle(9761, "a")), ("b/edgenetd.toml", &idle(9762, "b"))]);
        let (a_main, b_main) = (dir.join("a/edgenetd.toml"), dir.join("b/edgenetd.toml"));
        let (a_id, b_id) = (Instance::new(&a_main, None), Instance::new(&b_main, None));
        let _cleanup = Derived(vec![
            a_id.control_socket().parent().unwrap().to_path_buf(),
            b_id.control_socket().parent().unwrap().to_path_buf(),
            a_id.state_dir(),
            b_id.state_dir(),
        ]);
        let start = |main: &Path, listen: &str| {
            let args = ["--config", main.to_str().unwrap()];
            let opts = Options { args: &args, listen, scratch_control: false, ..Options::default() };
            let d = Daemon::start_with("apply-two-d", "", opts);
            d.wait_ready();
            d
        };
        let a = start(&a_main, "127.0.0.1:9761");
        let b = start(&b_main, "127.0.0.1:9762");
        for (id, d) in [(&a_id, &a), (&b_id, &b)] {
            wait_until("the derived control socket", Duration::from_secs(5), || id.control_socket().exists());
            assert!(!d.log().contains("unavailable"), "{}", d.log());
        }
        let new = dir.join("new.toml");
        let apply_to = |text: &str, extra: &[&str]| {
            std::fs::write(&new, text).unwrap();
            let mut args = vec!["apply", "--config", new.to_str().unwrap()];
            args.extend_from_slice(extra);
            edgenetd(&args)
        };
        let target_a = ["--target", a_main.to_str().unwrap()];
        let out = apply_to(&idle(9761, "a, applied"), &target_a);
        assert!(out.ok(), "{out:?}\n{}", a.log());
        let names = format!(
            "daemon: pid {}, main config {}, netns - (control socket {})",
            a.pid(), a_id.config.display(), a_id.control_socket().display()
        );
        assert!(out.stdout.contains(&names), "missing {names:?} in {out:?}");
        assert!(std::fs::read_to_string(&a_main).unwrap().contains("a, applied"));
        assert!(std::fs::read_to_string(&b_main).unwrap().starts_with("# b\n"), "b is untouched");
        // A request meant for b that reaches a's socket is refused before anything changes.
        let a_sock = a_id.control_socket();
        let misdirected = apply_to(
            &idle(9762, "b, misdirected"),
            &["--target", b_main.to_str().unwrap(), "--control-socket", a_sock.to_str().unwrap()],
        );
        assert_eq!(misdirected.code, 1, "{misdirected:?}");
        let why = format!("this daemon runs main config {}, not {}", a_id.config.display(), b_id.config.display());
        assert!(misdirected.stderr.contains(&why) && misdirected.stderr.contains("nothing was changed"), "{misdirected:?}");
        assert!(std::fs::read_to_string(&a_main).unwrap().contains("a, applied"));
        // And the netns: a runs in the namespace it was started in, not in r1.
        let wrong_ns = edgenetd(&["confirm", "--netns", "r1", "--control-socket", a_sock.to_str().unwrap()]);
        assert_eq!(wrong_ns.code, 1, "{wrong_ns:?}");
        assert!(wrong_ns.stderr.contains("not r1"), "{wrong_ns:?}");
        let to_b = edgenetd(&["confirm", "--target", b_main.to_str().unwrap()]);
        assert_eq!(to_b.code, 1, "{to_b:?}");
        assert!(to_b.stderr.contains("nothing to confirm") && to_b.stderr.contains(&format!("daemon: pid {}", b.pid())), "{to_b:?}");
    }
}
