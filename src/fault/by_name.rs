//! Hooks that ordinary config triggers by a name: a service or a backend check path with a
//! reserved prefix behaves badly on purpose, so a test needs no extra key for them.

/// Services named so have elements the kernel refuses (their verdict points at a chain that
/// does not exist).
const REFUSED_SERVICE: &str = "fault-reject";

/// While a service is named so, every full compare of the service table pauses before each
/// set it reads ([`COMPARE_PAUSE`]), so a test can land a change during one.
const SLOW_COMPARE_SERVICE: &str = "fault-slow-compare";

/// How long a slowed full compare pauses before each set (28 sets: about 5.6 s a compare).
pub const COMPARE_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// HTTP backend checks of a path so never return, past their own timeout.
const HANGING_CHECK_PATH: &str = "/fault-hang";

/// Whether the elements of service `name` are to be refused by the kernel.
pub fn service_refused(name: &str) -> bool {
    name.starts_with(REFUSED_SERVICE)
}

/// Whether a full compare against services of these names is to be slowed.
pub fn slow_compare<'a>(mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|n| n.starts_with(SLOW_COMPARE_SERVICE))
}

/// The pause of a slowed full compare before it reads a set: [`COMPARE_PAUSE`], cut short
/// when `stop` says the compare is to stop (as the work it stands for would be). Logged
/// before the `first` set, so a test knows a compare is under way.
pub fn compare_pause(first: bool, stop: &dyn Fn() -> bool) {
    if first {
        log::info!("fault: the full compare is slowed ({SLOW_COMPARE_SERVICE}*): started");
    }
    let step = std::time::Duration::from_millis(10);
    let mut left = COMPARE_PAUSE;
    while !left.is_zero() && !stop() {
        std::thread::sleep(step.min(left));
        left = left.saturating_sub(step);
    }
}

/// Whether an HTTP backend check of `path` is to hang.
pub fn check_hangs(path: &str) -> bool {
    path.starts_with(HANGING_CHECK_PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reserved_prefixes_trigger() {
        assert!(service_refused("fault-reject-web"));
        assert!(slow_compare(["web", "fault-slow-compare-x"].into_iter()));
        assert!(!slow_compare(["web", "x-fault-slow-compare"].into_iter()));
        assert!(!service_refused("web-fault-reject"));
        assert!(check_hangs("/fault-hang/x"));
        assert!(!check_hangs("/healthz"));
    }
}
