//! Per-case results: every row runs whatever the rows before it did, and the test fails at
//! the end listing each case with HOLDS or FAILS and why. The table is printed (the netns
//! harness shows it when the test fails) and written to
//! `$CARGO_TARGET_TMPDIR/kube_proxy_conformance/<test>.txt`, so a passing run can be read
//! too (`cat target/tmp/kube_proxy_conformance/*.txt`).

use std::fmt::Write as _;
use std::path::PathBuf;

use super::lab::{Lab, ruleset};

/// One case's result.
#[derive(Debug, Clone)]
struct Line {
    name: String,
    phase: String,
    what: String,
    note: String,
    result: Result<String, String>,
}

/// The results of one test binary test (one upstream test, or a group of e2e tests).
#[derive(Debug, Default)]
pub struct Report {
    /// The test's name (the file name of its report).
    test: String,
    /// The cases so far.
    lines: Vec<Line>,
    /// Things the lab did not get as asked (refused config keys).
    setup: Vec<String>,
}

/// Where the reports go.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kube_proxy_conformance")
}

impl Report {
    /// An empty report for `test`.
    pub fn new(test: &str) -> Report {
        Report {
            test: test.to_string(),
            ..Default::default()
        }
    }

    /// Records one case: `Ok(seen)` holds, `Err(why)` does not.
    pub fn record(
        &mut self,
        name: &str,
        phase: &str,
        what: &str,
        note: &str,
        result: Result<String, String>,
    ) {
        self.lines.push(Line {
            name: name.to_string(),
            phase: phase.to_string(),
            what: what.to_string(),
            note: note.to_string(),
            result,
        });
    }

    /// Notes what the lab's daemon runs without (keys this build refused).
    pub fn note_start(&mut self, lab: &Lab) {
        for (k, err) in &lab.started.refused {
            let line = format!("`[kubernetes] {}` refused: {err}", k.name());
            if !self.setup.contains(&line) {
                self.setup.push(line);
            }
        }
    }

    /// Prints and writes the table; panics when a case failed.
    pub fn finish(self, lab: &Lab) {
        let failed = self.lines.iter().filter(|l| l.result.is_err()).count();
        let mut text = String::new();
        let _ = writeln!(
            text,
            "== {}: {} of {} cases hold",
            self.test,
            self.lines.len() - failed,
            self.lines.len()
        );
        for s in &self.setup {
            let _ = writeln!(text, "   setup: {s}");
        }
        for l in &self.lines {
            let (verdict, detail) = match &l.result {
                Ok(seen) => ("HOLDS", seen.clone()),
                Err(why) => ("FAILS", why.clone()),
            };
            let _ = writeln!(text, "{verdict} [{}] {}", l.phase, l.name);
            let _ = writeln!(text, "      {}", l.what);
            let _ = writeln!(text, "      -> {detail}");
            if !l.note.is_empty() {
                let _ = writeln!(text, "      note: {}", l.note);
            }
        }
        if failed > 0 {
            let _ = writeln!(text, "--- the node's ruleset at the end ---\n{}", ruleset());
        }
        let _ = std::fs::create_dir_all(dir());
        let _ = std::fs::write(dir().join(format!("{}.txt", self.test)), &text);
        println!("{text}");
        if failed > 0 {
            let log = lab.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            println!("--- the daemon's log, last lines ---");
            for l in tail.iter().rev() {
                println!("{l}");
            }
        }
        assert!(
            failed == 0,
            "{failed} of {} cases of {} do not hold (see the table above)",
            self.lines.len(),
            self.test
        );
    }
}
