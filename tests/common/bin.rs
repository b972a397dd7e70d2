//! One-shot runs of the real `edgenetd` binary (`check`, `plan`, `cleanup`, `status`, ...).

use std::process::{Command, Stdio};

/// What a finished run left behind.
#[derive(Debug)]
pub struct Outcome {
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl Outcome {
    /// True for exit code 0.
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Runs `edgenetd` with `args` to completion.
pub fn edgenetd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_edgenetd"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run edgenetd");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
