//! The command line, on the real binary (no kernel needed).

use crate::common;

use common::scratch::ScratchDir;

fn edgenetd(args: &[&str]) -> (i32, String, String) {
    let run = common::bin::edgenetd(args);
    (run.code, run.stdout, run.stderr)
}

#[test]
fn version_and_usage() {
    let (code, out, _) = edgenetd(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (
            0,
            format!("edgenetd {}", env!("CARGO_PKG_VERSION")).as_str()
        )
    );
    let (code, _, err) = edgenetd(&[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("missing verb") && err.contains("USAGE"),
        "{err}"
    );
    let (code, _, err) = edgenetd(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown verb `frobnicate`"), "{err}");
    let (code, out, _) = edgenetd(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("EXIT CODES:") && out.contains("3  (status) no answer from the daemon"),
        "{out}"
    );
}

#[test]
fn check_lists_every_problem_of_every_file_and_exits_1() {
    let dir = ScratchDir::with_files(
        "cli-bad",
        &[
            (
                "edgenetd.toml",
                "[daemon]\nlisten = \"nowhere\"\nroute_protocol = 300\n",
            ),
            (
                "conf.d/10-more.toml",
                "[daemon]\nlisten = \"127.0.0.1:1\"\n\n[controller.route]\nperiod = \"soon\"\n",
            ),
        ],
    );
    let (code, _, err) = edgenetd(&[
        "check",
        "--config",
        dir.join("edgenetd.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let main = dir.join("edgenetd.toml").display().to_string();
    let more = dir.join("conf.d/10-more.toml").display().to_string();
    for want in [
        format!("{main}:2:10: error: invalid listen address `nowhere`"),
        format!("{main}:3:18: error: invalid route_protocol 300"),
        format!("{more}:2:1: error: `listen` is set twice"),
        format!("{main}:2:1: note: first set here"),
        format!("{more}:5:10: error: invalid duration `soon`"),
        format!("{main}: 4 problem(s)"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
}

#[test]
fn check_accepts_a_good_config_and_names_the_files_it_read() {
    let dir = ScratchDir::with_files(
        "cli-good",
        &[
            ("edgenetd.toml", "[daemon]\nroute_protocol = 191\n"),
            ("conf.d/20-x.toml", ""),
        ],
    );
    let (code, out, err) = edgenetd(&[
        "check",
        "--config",
        dir.join("edgenetd.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(": ok (") && out.contains("conf.d/20-x.toml"),
        "{out}"
    );
}

#[test]
fn the_example_config_is_valid() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/edgenetd.toml");
    let (code, out, err) = edgenetd(&["check", "--config", example]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Exit 2 is for usage errors; a daemon that does not answer is 3 (it used to be 2, which
/// the README reserved for usage errors).
#[test]
fn status_reports_an_unreachable_daemon_with_exit_3() {
    let (code, _, err) = edgenetd(&["status", "--url", "http://127.0.0.1:1"]);
    assert_eq!(code, 3);
    assert!(err.contains("cannot connect to 127.0.0.1:1"), "{err}");
}

/// The schema example (kept in tests/data) is accepted key for key, with the forward verdict
/// written as `forward_default` beside `[[policy.forward]]`.
#[test]
fn the_schema_example_is_accepted_key_for_key() {
    let schema = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/schema-example.toml"
    );
    let (code, out, err) = edgenetd(&["check", "--config", schema]);
    assert_eq!(code, 0, "{out}{err}");
}

/// `check` on a conf.d file of many routes (read entry by entry) next to a main file that
/// writes the forward verdict beside `[[policy.forward]]`: every problem, each at its place.
#[test]
fn check_reports_the_forward_clash_and_duplicate_routes_of_a_big_route_file() {
    let mut routes = String::from("# generated\n");
    for i in 0..200 {
        routes.push_str(&format!(
            "[[route]]\nto = \"10.{}.{}.0/24\"\nvia = \"192.0.2.1\"\n",
            i / 256,
            i % 256
        ));
    }
    routes.push_str("[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth0\"\nmetric = 1024\n");
    routes.push_str("[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth1\"\nmetric = 0\n");
    let dir = ScratchDir::with_files(
        "big",
        &[
            (
                "edgenetd.toml",
                "[policy]\nforward = \"drop\"\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[[policy.forward]]\nfrom = \"lan\"\nto = \"lan\"\n",
            ),
            ("conf.d/50-routes.toml", &routes),
        ],
    );
    let (code, _, err) = edgenetd(&[
        "check",
        "--config",
        dir.join("edgenetd.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let main = dir.join("edgenetd.toml").display().to_string();
    let more = dir.join("conf.d/50-routes.toml").display().to_string();
    for want in [
        format!("{main}:5:10: error: `forward` under [policy] is both the forward verdict"),
        format!("{main}:2:1: note: the other `forward` is here"),
        format!(
            "{more}:606:1: error: route to 2001:db8::/32 (table 254, metric 1024) is defined twice"
        ),
        format!("{more}:602:1: note: first defined here"),
        format!("{main}: 2 problem(s)"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
}

/// `[kubernetes]` is checked like any other section: a build with the `kubernetes` feature
/// accepts a good one; a build without it names the feature at the section; both point at
/// each bad key.
#[test]
fn check_reads_the_kubernetes_section_and_names_the_feature_it_needs() {
    let dir = ScratchDir::with_files(
        "cli-k8s",
        &[
            (
                "edgenetd.toml",
                "[kubernetes]\nserver = \"https://10.0.0.1:6443\"\nca_file = \"/etc/edgenetd/ca.crt\"\ntoken_file = \"credential:k8s-token\"\nfeeds = [\"services\"]\n",
            ),
            (
                "bad/edgenetd.toml",
                "[kubernetes]\nin_cluster = true\ntoken_file = \"/t\"\nfeeds = [\"pods\"]\nservice_selector = \"app in (web\"\n",
            ),
        ],
    );
    let good = dir.join("edgenetd.toml").display().to_string();
    let (code, out, err) = edgenetd(&["check", "--config", &good]);
    if cfg!(feature = "kubernetes") {
        assert_eq!(code, 0, "{out}{err}");
    } else {
        assert_eq!(code, 1, "{out}{err}");
        let want = format!(
            "{good}:1:2: error: `[kubernetes]` needs a build with the `kubernetes` feature"
        );
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
    let bad = dir.join("bad/edgenetd.toml").display().to_string();
    let (code, _, err) = edgenetd(&["check", "--config", &bad]);
    assert_eq!(code, 1, "{err}");
    for want in [
        format!("{bad}:3:14: error: `token_file` does not go with in_cluster = true"),
        format!("{bad}:4:10: error: unknown feed `pods`"),
        format!("{bad}:5:32: error: invalid label selector `app in (web`: expected `)`"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
}

/// `config_files()` kept only what `is_file()` accepted: a conf.d entry that dangles or loops
/// was dropped, `check` said ok and a reload read one file fewer.
#[test]
fn check_names_a_conf_d_symlink_that_dangles_or_loops() {
    let dir = ScratchDir::with_files(
        "cli-links",
        &[
            ("edgenetd.toml", "[daemon]\n"),
            (
                "conf.d/10-ok.toml",
                "[controller.route]\nperiod = \"10s\"\n",
            ),
        ],
    );
    let link = |name: &str, to: &str| {
        std::os::unix::fs::symlink(to, dir.join(&format!("conf.d/{name}"))).unwrap()
    };
    link("20-gone.toml", "/nonexistent/edgenetd-routes.toml");
    link("30-loop.toml", "30-loop.toml");
    let main = dir.join("edgenetd.toml").display().to_string();
    let (code, out, err) = edgenetd(&["check", "--config", &main]);
    assert_eq!(code, 1, "{out}{err}");
    let gone = dir.join("conf.d/20-gone.toml").display().to_string();
    let looped = dir.join("conf.d/30-loop.toml").display().to_string();
    for want in [
        format!(
            "{gone}: cannot read: a symlink to /nonexistent/edgenetd-routes.toml that does not resolve to a file"
        ),
        format!("{looped}: cannot read: a symlink to 30-loop.toml that does not resolve to a file"),
        format!("{main}: 2 problem(s)"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in\n{err}");
    }
}

/// Binary garbage was reported as "stream did not contain valid UTF-8", with no place.
#[test]
fn check_and_apply_locate_bytes_that_are_not_utf8() {
    let dir = ScratchDir::with_files("cli-binary", &[("edgenetd.toml", "[daemon]\n")]);
    let mut garbage = b"[controller.route]\nperiod = \"1\x1b[2J".to_vec();
    garbage.extend_from_slice(&[0xc3, 0x28, 0xff]);
    garbage.extend_from_slice(b"0s\"\n[policy]\n");
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::write(dir.join("conf.d/50-bin.toml"), &garbage).unwrap();
    let main = dir.join("edgenetd.toml").display().to_string();
    let bin = dir.join("conf.d/50-bin.toml").display().to_string();
    let (code, _, err) = edgenetd(&["check", "--config", &main]);
    assert_eq!(code, 1, "{err}");
    let want = format!("{bin}:2:16: error: not UTF-8 text: invalid byte at offset 34");
    assert!(err.contains(&want), "missing {want:?} in\n{err}");
    assert!(!err.contains("stream did not contain"), "{err}");
    assert!(
        !err.contains('\x1b'),
        "no control character reaches the terminal: {err:?}"
    );
    assert!(
        err.contains(&format!("{main}: 1 problem(s)")),
        "only that problem: {err}"
    );
    // `apply` reads NEW itself: the same place, before anything is sent.
    let (code, _, err) = edgenetd(&[
        "apply",
        "--config",
        &bin,
        "--control-socket",
        "/nonexistent/c.sock",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{bin}:2:16: not UTF-8 text: invalid byte at offset 34"
        )),
        "{err}"
    );
}

/// Runs `edgenetd args`, stdout and stderr to files in `dir`: (exit code, stderr, peak RSS in
/// KiB, wall time). The peak is the child's own: a process records the peak of the address
/// space it replaces at exec, and a child of this test binary replaces a copy of (or, spawned
/// with vfork, the very) address space of a process that runs eight tests at once (140 MiB
/// was read as edgenetd's peak so). A small python parent launches it instead and reports its
/// children's peak.
fn run_measured(dir: &ScratchDir, args: &[&str]) -> (i32, String, u64, std::time::Duration) {
    const LAUNCHER: &str = "import resource, subprocess, sys\n\
        code = subprocess.call(sys.argv[2:])\n\
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n\
        open(sys.argv[1], 'w').write(f'{code} {peak}')\n";
    let err_path = dir.join("stderr");
    let result_path = dir.join("measured");
    let start = std::time::Instant::now();
    let status = std::process::Command::new("python3")
        .args(["-c", LAUNCHER])
        .arg(&result_path)
        .arg(env!("CARGO_BIN_EXE_edgenetd"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .status()
        .expect("run python3 with edgenetd");
    let elapsed = start.elapsed();
    assert!(status.success(), "the launcher failed: {status}");
    let measured = std::fs::read_to_string(result_path).unwrap();
    let (code, peak) = measured.split_once(' ').expect("code and peak");
    let err = std::fs::read_to_string(err_path).unwrap();
    (code.parse().unwrap(), err, peak.parse().unwrap(), elapsed)
}

/// Bug: a config file that is one 52 MB line (`k = [1,1,…]`) took `check` to 3.9 GB and
/// 9.5 s (`ExecReload=` runs it in the unit's cgroup), and the rejection printed the line.
#[test]
fn bug_a_52_mb_config_line_is_refused_quickly_with_bounded_memory() {
    let dir = ScratchDir::new("cli-52mb");
    let mut line = String::with_capacity(52 << 20);
    line.push_str("k = [");
    while line.len() < 52_000_000 {
        line.push_str("1,");
    }
    line.push_str("1]\n");
    std::fs::write(dir.config(), &line).unwrap();
    drop(line);
    let main = dir.config().display().to_string();
    let (code, err, peak_kib, took) = run_measured(&dir, &["check", "--config", &main]);
    assert_eq!(code, 1, "{err}");
    assert!(
        peak_kib < 64 * 1024,
        "check peaked at {peak_kib} KiB (limit 64 MiB); took {took:?}"
    );
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    let want = format!(
        "{main}:1:1: error: the file is 52,000,004 bytes, over the limit of 16,777,216 bytes (16 MiB) for one config file by 35,222,788 bytes"
    );
    assert!(err.contains(&want), "missing {want:?} in\n{err}");
    assert!(err.len() < 1000, "{} bytes of stderr", err.len());
}

/// Bug: a 100,000-deep nesting was handed to the parser, whose error quoted the whole line
/// (1.2 MB in the log).
#[test]
fn bug_a_100000_deep_nesting_is_refused_with_a_short_message() {
    let n = 100_000;
    let deep = format!("k = {}{}\n", "[".repeat(n), "]".repeat(n));
    let dir = ScratchDir::with_files("cli-deep", &[("edgenetd.toml", &deep)]);
    let main = dir.config().display().to_string();
    let (code, _, err) = edgenetd(&["check", "--config", &main]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{main}:1:36: error: nested more than 32 deep (tables, dotted keys, arrays and inline tables counted together)"
        )),
        "{err}"
    );
    assert!(err.len() < 1000, "{} bytes of stderr:\n{err}", err.len());
}

/// Bug: every diagnostic quoted its whole line, however long; now a window around the column.
#[test]
fn bug_a_diagnostic_on_a_long_line_quotes_a_window_around_the_column() {
    let pad = " ".repeat(20_000);
    let text =
        format!("daemon = {{ listen = \"127.0.0.1:9750\",{pad}route_protocol = 300,{pad}}}\n");
    let dir = ScratchDir::with_files("cli-long-line", &[("edgenetd.toml", &text)]);
    let main = dir.config().display().to_string();
    let (code, _, err) = edgenetd(&["check", "--config", &main]);
    assert_eq!(code, 1, "{err}");
    let column = text.find("300").unwrap() + 1;
    assert!(err.contains(&format!("{main}:1:{column}: error")), "{err}");
    let quoted = err
        .lines()
        .find(|l| l.starts_with("1 | "))
        .unwrap_or_else(|| panic!("no quoted line in\n{err}"));
    assert!(
        quoted.starts_with("1 | …") && quoted.ends_with('…'),
        "{quoted:?}"
    );
    assert!(quoted.chars().count() < 120, "{quoted:?}");
    // The caret is under the value, in the window.
    let carets = err.lines().find(|l| l.contains('^')).unwrap();
    let at = carets.find('^').unwrap();
    let window: Vec<char> = quoted.chars().collect();
    let under: String = window[at..at + 3].iter().collect();
    assert_eq!(under, "300", "{quoted}\n{carets}");
    assert!(err.len() < 1000, "{} bytes of stderr", err.len());
}
