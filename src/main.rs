//! The `edgenetd` command: run, check, status, plan, cleanup (see `edgenetd::cli`).

use std::process::ExitCode;

fn main() -> ExitCode {
    // Fault-injection builds: every verb's config load accepts `[[test_controller]]`.
    edgenetd::fault_hook!(edgenetd::fault::test_controller::install(), ());
    edgenetd::cli::main(std::env::args().skip(1))
}

// The binary's only libm functions, defined here so the linker resolves them in the binary
// and the loader maps no libm (0.3 MiB of idle RSS; see `edgenetd::math`).

/// C `exp`, from [`edgenetd::math::exp`].
#[unsafe(no_mangle)]
pub extern "C" fn exp(x: f64) -> f64 {
    edgenetd::math::exp(x)
}

/// C `log`, from [`edgenetd::math::log`].
#[unsafe(no_mangle)]
pub extern "C" fn log(x: f64) -> f64 {
    edgenetd::math::log(x)
}

/// C `log1p`, from [`edgenetd::math::log1p`].
#[unsafe(no_mangle)]
pub extern "C" fn log1p(x: f64) -> f64 {
    edgenetd::math::log1p(x)
}

/// C `log2`, from [`edgenetd::math::log2`].
#[unsafe(no_mangle)]
pub extern "C" fn log2(x: f64) -> f64 {
    edgenetd::math::log2(x)
}
