//! The UDP, DNS and TLS backend checks against real servers on the test namespace's loopback:
//! up with a good server; down, with the reason the transition logs, with a silent, a wrong
//! and a closed one.

use crate::common;
use crate::netns_test;

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use common::scratch::ScratchDir;
use common::shell::{sh, sh_status};
use common::wait::wait_until;
use edgenetd::config::service::BackendCheckKind;
use edgenetd::controller::service::backend_check::check;

const TIMEOUT: Duration = Duration::from_millis(500);

/// Small servers: `udp PORT REPLY|-`, `dns PORT RCODE|-` (`-`: read and never answer),
/// `tcp-silent PORT` (accept and never write).
const SERVERS: &str = r#"
import socket, sys, time
mode, port, arg = sys.argv[1], int(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else '-')
if mode == 'tcp-silent':
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port)); s.listen(16); held = []
    while True:
        held.append(s.accept()[0])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', port))
while True:
    d, a = s.recvfrom(4096)
    if arg == '-':
        continue
    if mode == 'udp':
        s.sendto(arg.encode(), a)
    else:
        r = bytearray(d); r[2] |= 0x80; r[3] = (r[3] & 0xf0) | int(arg)
        s.sendto(bytes(r), a)
"#;

/// A background server, killed on drop.
struct Bg(Child);

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &str, listening: &str) -> Bg {
    let child = std::process::Command::new("sh")
        .args(["-c", &format!("exec {cmd}")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (flag, port) = listening.split_once(' ').unwrap();
    wait_until(&format!("{cmd} to listen"), Duration::from_secs(10), || {
        sh_status(&format!("ss -Hn{flag}"))
            .1
            .contains(&format!(":{port} "))
    });
    Bg(child)
}

fn server(dir: &ScratchDir, args: &str) -> Bg {
    let port = args.split(' ').nth(1).unwrap();
    let flag = if args.starts_with("tcp") { "lt" } else { "lu" };
    spawn(
        &format!("python3 -u {} {args}", dir.join("servers.py").display()),
        &format!("{flag} {port}"),
    )
}

fn run(port: u16, kind: &BackendCheckKind) -> Result<(), String> {
    let backend: SocketAddr = ([127, 0, 0, 1], port).into();
    smol::block_on(check(backend, kind, TIMEOUT))
}

fn udp(send: &str, expect: Option<&str>) -> BackendCheckKind {
    BackendCheckKind::Udp {
        send: send.as_bytes().to_vec(),
        expect: expect.map(|e| e.as_bytes().to_vec()),
    }
}

netns_test! {
    fn udp_check_is_up_with_a_reply_and_down_when_silent_wrong_or_closed() {
        let dir = ScratchDir::with_files("udpcheck", &[("servers.py", SERVERS)]);
        let _good = server(&dir, "udp 5001 pong-1");
        let _silent = server(&dir, "udp 5002 -");
        assert_eq!(run(5001, &udp("ping", None)), Ok(()));
        assert_eq!(run(5001, &udp("ping", Some("pong"))), Ok(()));
        assert_eq!(run(5001, &udp("ping", Some("PONG"))), Err("unexpected reply".into()));
        assert_eq!(run(5002, &udp("ping", None)), Err("timeout".into()));
        assert_eq!(run(5003, &udp("ping", None)), Err("refused".into()), "nothing listens");
    }
}

netns_test! {
    fn dns_check_is_up_with_rcode_0_and_down_with_another_rcode_silence_or_a_closed_port() {
        let dir = ScratchDir::with_files("dnscheck", &[("servers.py", SERVERS)]);
        let _good = server(&dir, "dns 5301 0");
        let _nx = server(&dir, "dns 5302 3");
        let _silent = server(&dir, "dns 5303 -");
        let dns = BackendCheckKind::Dns { query_name: "example.com".into() };
        assert_eq!(run(5301, &dns), Ok(()));
        assert_eq!(run(5302, &dns), Err("DNS rcode 3".into()));
        assert_eq!(run(5303, &dns), Err("timeout".into()));
        assert_eq!(run(5304, &dns), Err("refused".into()));
    }
}

netns_test! {
    fn tls_check_is_up_with_a_tls_server_and_down_with_plain_tcp_silence_or_a_closed_port() {
        let dir = ScratchDir::with_files(
            "tlscheck",
            &[("servers.py", SERVERS), ("server.py", include_str!("../common/scripts/server.py"))],
        );
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        sh(&format!(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout {} -out {} -days 1 -subj /CN=backend.test 2>/dev/null",
            key.display(),
            cert.display()
        ));
        let s_server = |port: u16, version: &str| {
            spawn(
                &format!(
                    "openssl s_server -quiet -accept 127.0.0.1:{port} -cert {} -key {} {version}",
                    cert.display(),
                    key.display()
                ),
                &format!("lt {port}"),
            )
        };
        let _tls13 = s_server(5441, "-tls1_3");
        let _tls12 = s_server(5442, "-tls1_2");
        let _silent = server(&dir, "tcp-silent 5443");
        let plain = spawn(
            &format!("python3 -u {} tcp 5444 4 plain", dir.join("server.py").display()),
            "lt 5444",
        );
        let sni = BackendCheckKind::Tls { sni: Some("backend.test".into()) };
        let bare = BackendCheckKind::Tls { sni: None };
        assert_eq!(run(5441, &sni), Ok(()), "a TLS 1.3 server");
        assert_eq!(run(5441, &bare), Ok(()), "without SNI");
        assert_eq!(run(5442, &sni), Ok(()), "a TLS 1.2 server");
        assert_eq!(run(5443, &sni), Err("timeout".into()));
        assert_eq!(run(5444, &sni), Err("not a TLS ServerHello".into()));
        assert_eq!(run(5445, &sni), Err("refused".into()));
        drop(plain);
    }
}
