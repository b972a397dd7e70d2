//! The HTTP server on the real binary, under the clients that broke servers before it: many
//! slow clients from one or many addresses, sources outside `metrics_allow`, and request
//! heads HTTP/1.1 says to refuse. Each test runs in its own network namespace; extra source
//! addresses are put on its `lo`, so a connection to 10.0.0.k comes from 10.0.0.k.

use crate::common;
use crate::netns_test;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Options};
use common::http::{self, exchange};
use common::shell::sh;

fn config(listen: &str, extra: &str) -> String {
    format!(
        "[daemon]\nlisten = \"{listen}\"\n{extra}\n[controller.policy]\nenabled = false\n\
         [controller.service]\nenabled = false\n[controller.route]\nenabled = false\n\n\
         [[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n"
    )
}

fn start(tag: &str, listen: &'static str, extra: &str) -> Daemon {
    let opts = Options {
        listen,
        ..Options::default()
    };
    let d = Daemon::start_with(tag, &config(listen, extra), opts);
    d.wait_ready();
    d
}

/// `n` connections to `to` that send half a request head and then nothing.
fn slow_clients(to: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(to).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect()
}

/// GET /livez from `base` `n` times; each must be 200 within a second.
fn probes_answer(base: &str, n: usize) {
    for i in 0..n {
        let t = Instant::now();
        let got = http::try_get(base, "/livez");
        assert!(
            matches!(got, Ok((200, _))),
            "probe {i} of {n} from {base}: {got:?}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "probe {i} took {:?}",
            t.elapsed()
        );
    }
}

netns_test! {
    fn slow_clients_from_ten_addresses_do_not_lock_out_probes_from_an_eleventh() {
        for k in 1..=11 {
            sh(&format!("ip addr add 10.0.0.{k}/32 dev lo"));
        }
        let d = start("ten", "0.0.0.0:9750", "");
        let _slow: Vec<TcpStream> = (1..=10)
            .flat_map(|k| slow_clients(&format!("10.0.0.{k}:9750"), 32))
            .collect();
        probes_answer("http://10.0.0.11:9750", 100);
        drop(d);
    }
}

netns_test! {
    fn thirty_three_local_slow_clients_do_not_lock_out_local_probes() {
        let d = start("local", "127.0.0.1:9750", "");
        let _slow = slow_clients("127.0.0.1:9750", 40);
        probes_answer("http://127.0.0.1:9750", 20);
        drop(d);
    }
}

netns_test! {
    fn sources_outside_metrics_allow_are_refused_before_they_take_a_slot() {
        sh("ip addr add 10.9.9.1/32 dev lo");
        for k in 1..=10 {
            sh(&format!("ip addr add 10.8.8.{k}/32 dev lo"));
        }
        let d = start("allow", "0.0.0.0:9750", "metrics_allow = [\"10.9.9.0/24\"]");
        // Ten sources outside the list, 32 slow connections each: enough to fill every cap.
        let _slow: Vec<TcpStream> = (1..=10)
            .flat_map(|k| slow_clients(&format!("10.8.8.{k}:9750"), 32))
            .collect();
        probes_answer("http://10.9.9.1:9750", 20);
        let answer = exchange("127.0.0.1:9750", b"GET /livez HTTP/1.0\r\n\r\n");
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 403"), "{answer}");
        drop(d);
    }
}

netns_test! {
    fn request_heads_are_checked_as_http_1_1_asks() {
        let d = start("heads", "127.0.0.1:9750", "");
        let ask = |request: &str| exchange("127.0.0.1:9750", request.as_bytes());
        let absolute = ask("GET http://127.0.0.1:9750/livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert!(absolute.starts_with("HTTP/1.1 200 OK\r\n"), "{absolute}");
        let date = absolute.lines().find_map(|l| l.strip_prefix("Date: ")).expect("a Date header");
        // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
        let words: Vec<&str> = date.split(' ').collect();
        assert!(words.len() == 6 && words[0].ends_with(',') && words[5] == "GMT", "{date}");
        for (request, status) in [
            ("GET /livez HTTP/1.1\r\n\r\n", "400"),
            ("GET /livez HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
            ("GET /livez HTTP/2.0\r\nHost: a\r\n\r\n", "505"),
            ("GET * HTTP/1.1\r\nHost: a\r\n\r\n", "400"),
            ("PUT /livez HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", "405"),
            ("GET /livez HTTP/1.0\r\n\r\n", "200"),
        ] {
            let answer = ask(request);
            assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{request:?}: {answer}");
        }
        assert!(ask("PUT /livez HTTP/1.1\r\nHost: a\r\n\r\n").contains("\r\nAllow: GET, HEAD\r\n"));
        drop(d);
    }
}
