//! The `edgenetd` command: run, check, status, plan, cleanup (see `edgenetd::cli`).

use std::process::ExitCode;

fn main() -> ExitCode {
    edgenetd::cli::main(std::env::args().skip(1))
}
