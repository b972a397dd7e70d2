//! Hooks that ordinary config triggers by a name: a service or a backend check path with a
//! reserved prefix behaves badly on purpose, so a test needs no extra key for them.

/// Services named so have elements the kernel refuses (their verdict points at a chain that
/// does not exist).
const REFUSED_SERVICE: &str = "fault-reject";

/// HTTP backend checks of a path so never return, past their own timeout.
const HANGING_CHECK_PATH: &str = "/fault-hang";

/// Whether the elements of service `name` are to be refused by the kernel.
pub fn service_refused(name: &str) -> bool {
    name.starts_with(REFUSED_SERVICE)
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
        assert!(!service_refused("web-fault-reject"));
        assert!(check_hangs("/fault-hang/x"));
        assert!(!check_hangs("/healthz"));
    }
}
