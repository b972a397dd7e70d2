//! Conntrack helpers (`[policy] helpers`, zone `helpers`, issue 11 item 11) with real packets:
//! FTP through the router's masquerade, active and passive, from a lan client (Python's
//! ftplib) to a wan server (pyftpdlib, Debian's python3-pyftpdlib): the data connection
//! passes a forward policy that drops it without the helper. A helper the kernel lacks is
//! reported while the rest stays programmed.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::policy::{lan_wan, planned_policy_nft};
use common::shell::sh;
use common::topology::{Host, Topology};
use common::wait::wait_until;

/// The lan may reach the wan's FTP control port only; no `[[policy.forward]]`: a data
/// connection passes only as `related`.
const FTP_ONLY: &str = r#"
[policy]
input = "drop"
forward_default = "drop"

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[[policy.rule]]
name = "ftp-control"
from = "lan"
to = "wan"
protocol = "tcp"
ports = [21]
action = "accept"
"#;

fn with_helpers(declared: &str) -> String {
    FTP_ONLY
        .replace("[policy]\n", &format!("[policy]\nhelpers = [{declared}]\n"))
        .replace(
            "networks = [\"10.0.0.0/24\"]\n",
            "networks = [\"10.0.0.0/24\"]\nhelpers = [\"ftp\"]\n",
        )
}

const SERVER: &str = r#"
import sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
auth = DummyAuthorizer()
auth.add_anonymous(sys.argv[1])
FTPHandler.authorizer = auth
FTPHandler.timeout = 10
FTPServer(("192.0.2.2", int(sys.argv[2])), FTPHandler).serve_forever()
"#;

const CLIENT: &str = r#"
import ftplib, sys
try:
    f = ftplib.FTP(timeout=3)
    f.connect("192.0.2.2", int(sys.argv[2]))
    f.login()
    f.set_pasv(sys.argv[1] == "passive")
    lines = []
    f.retrlines("RETR hello.txt", lines.append)
    print(lines[0])
    f.quit()
except Exception as e:
    print("FAIL:", type(e).__name__, e)
"#;

/// Starts the FTP server on the wan host; returns once it listens.
fn ftp_server(t: &Topology, wan: &Host) -> std::process::Child {
    ftp_server_on(t, wan, 21)
}

/// [`ftp_server`] on another control port.
fn ftp_server_on(t: &Topology, wan: &Host, port: u16) -> std::process::Child {
    let root = t.script("ftp-root/hello.txt", "hello through the helper\n");
    let root = root.trim_end_matches("/hello.txt").to_string();
    let script = t.script("ftp_server.py", SERVER);
    let log = t.script("ftp_server.log", "");
    let child = wan.spawn(&format!(
        "exec /usr/bin/python3 {script} {root} {port} > {log} 2>&1"
    ));
    wait_until("the FTP server", Duration::from_secs(10), || {
        wan.sh("ss -ltn").contains(&format!("192.0.2.2:{port} "))
    });
    child
}

/// One download from the lan host, `active` or `passive`: the file's line or `FAIL: ...`.
fn download(t: &Topology, lan: &Host, mode: &str) -> String {
    download_from(t, lan, mode, 21)
}

/// [`download`] from a server on another control port.
fn download_from(t: &Topology, lan: &Host, mode: &str, port: u16) -> String {
    let script = t.script("ftp_client.py", CLIENT);
    lan.sh(&format!("/usr/bin/python3 {script} {mode} {port}"))
        .trim()
        .to_string()
}

netns_test! {
    fn ftp_data_connections_pass_the_forward_policy_only_with_the_ftp_helper() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        let mut server = ftp_server(&t, wan);
        let mut d = Driver::policy();
        // Without the helper the data connections are new, and the forward chain drops them.
        d.sync(FTP_ONLY).unwrap();
        for mode in ["active", "passive"] {
            let answer = download(&t, lan, mode);
            assert!(answer.starts_with("FAIL"), "{mode} without the helper: {answer}");
        }
        // With it they are related: through, in both modes (active: through the masquerade,
        // the server connects back to the router's wan address).
        d.sync(&with_helpers("\"ftp\"")).unwrap();
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(helpers.contains("ct helper helper-ftp"), "{helpers}");
        assert!(helpers.contains("type \"ftp\" protocol tcp"), "{helpers}");
        let chain = sh("nft list chain inet edgenetd-policy helpers");
        assert!(chain.contains("ct helper set \"helper-ftp\""), "{chain}");
        for mode in ["active", "passive"] {
            let answer = download(&t, lan, mode);
            assert_eq!(answer, "hello through the helper", "{mode} with the helper");
        }
        server.kill().unwrap();
        server.wait().unwrap();
    }
}

netns_test! {
    /// fw4's `config helper` (its 02_zones/07_helpers declares every helper so): a helper
    /// defined as `[policy.helper.ftp-alt]` follows FTP on port 2121, which the built-in
    /// `ftp` (port 21) never sees.
    fn fw4_07_helpers_a_defined_helper_follows_ftp_on_the_port_it_names() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        let mut server = ftp_server_on(&t, wan, 2121);
        let on_2121 = FTP_ONLY.replace("ports = [21]", "ports = [2121]");
        let mut d = Driver::policy();
        // The built-in helper watches port 21: nothing is related on 2121.
        d.sync(&on_2121
            .replace("[policy]\n", "[policy]\nhelpers = [\"ftp\"]\n")
            .replace("networks = [\"10.0.0.0/24\"]\n", "networks = [\"10.0.0.0/24\"]\nhelpers = [\"ftp\"]\n"))
            .unwrap();
        assert!(download_from(&t, lan, "passive", 2121).starts_with("FAIL"));
        let defined = format!(
            "{}\n[policy.helper.ftp-alt]\ntype = \"ftp\"\nprotocol = \"tcp\"\nport = 2121\n",
            on_2121.replace(
                "networks = [\"10.0.0.0/24\"]\n",
                "networks = [\"10.0.0.0/24\"]\nhelpers = [\"ftp-alt\"]\n"
            )
        );
        d.sync(&defined).unwrap();
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(helpers.contains("ct helper helper-ftp-alt-ftp"), "{helpers}");
        let chain = sh("nft list chain inet edgenetd-policy helpers");
        assert!(chain.contains("tcp dport 2121 ct helper set \"helper-ftp-alt-ftp\""), "{chain}");
        for mode in ["active", "passive"] {
            assert_eq!(download_from(&t, lan, mode, 2121), "hello through the helper", "{mode}");
        }
        server.kill().unwrap();
        server.wait().unwrap();
    }
}

netns_test! {
    fn a_helper_the_kernel_lacks_is_reported_and_the_rest_stays_programmed() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        let mut server = ftp_server(&t, wan);
        let mut d = Driver::policy();
        // rtsp is fw4's out-of-tree helper: this kernel has no nf_conntrack_rtsp.
        let cfg = with_helpers("\"ftp\", \"rtsp\"").replace(
            "helpers = [\"ftp\"]\n",
            "helpers = [\"ftp\", \"rtsp\"]\n",
        );
        let err = d.sync(&cfg).unwrap_err();
        assert_eq!(err.failures.len(), 1, "{err:?}");
        assert_eq!(err.failures[0].object, "policy helper rtsp", "{err:?}");
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(helpers.contains("helper-ftp"), "{helpers}");
        assert!(!helpers.contains("helper-rtsp"), "{helpers}");
        assert_eq!(download(&t, lan, "passive"), "hello through the helper");
        server.kill().unwrap();
        server.wait().unwrap();
    }
}

netns_test! {
    fn the_plan_of_helpers_is_nft_text_nft_accepts() {
        use common::scratch::ScratchDir;
        use common::shell::sh_status;
        let cfg = with_helpers("\"ftp\", \"h323\", \"sip\"").replace(
            "helpers = [\"ftp\"]\n",
            "helpers = [\"ftp\", \"h323\", \"sip\"]\n",
        );
        let dir = ScratchDir::with_files("helpers-plan", &[("edgenetd.toml", &cfg)]);
        let (text, file) = planned_policy_nft(&dir);
        for want in [
            "ct helper helper-h323-Q.931 {",
            "type \"RAS\" protocol udp",
            "udp dport 5060 ct helper set \"helper-sip\"",
            "chain helpers {",
        ] {
            assert!(text.contains(want), "missing {want:?}:\n{text}");
        }
        // Loaded with nft -f, the objects are those the batch makes.
        let (ok, _, err) = sh_status(&format!("nft -f {}", file.display()));
        assert!(ok, "{err}");
        let from_text = sh("nft list ct helpers table inet edgenetd-policy");
        sh("nft delete table inet edgenetd-policy");
        Driver::policy().sync(&cfg).unwrap();
        assert_eq!(sh("nft list ct helpers table inet edgenetd-policy"), from_text);
    }
}

netns_test! {
    fn the_daemon_reports_a_helper_the_kernel_lacks_in_metrics_and_healthz() {
        use common::daemon::{Daemon, Options};
        let _t = lan_wan();
        const LISTEN: &str = "127.0.0.1:19762";
        let policy = with_helpers("\"ftp\", \"rtsp\"")
            .replace("helpers = [\"ftp\"]\n", "helpers = [\"ftp\", \"rtsp\"]\n");
        let cfg = format!(
            "[daemon]\nlisten = \"{LISTEN}\"\n[controller.policy]\nperiod = \"1s\"\n[controller.route]\nenabled = false\n[controller.service]\nenabled = false\n{policy}"
        );
        let opts = Options { listen: LISTEN, ..Options::default() };
        let mut daemon = Daemon::start_with("helper-missing", &cfg, opts);
        let labels = &[("controller", "policy")];
        wait_until("a failed policy sync", Duration::from_secs(15), || {
            daemon.metric("edgenetd_controller_sync_failures_total", labels).unwrap_or(0.0) >= 1.0
        });
        let (code, body) = daemon.get("/healthz");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("helper rtsp"), "the failure names the helper: {body}");
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(helpers.contains("helper-ftp"), "the rest is programmed: {helpers}");
        daemon.stop();
    }
}
