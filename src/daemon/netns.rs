//! Entering the network namespace the kernel work belongs to (`run --netns NAME`).

/// Moves the calling thread into `ip netns` namespace `name`. Call before any other thread
/// exists: namespaces are per thread, and threads inherit their creator's.
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: a valid namespace fd; setns only changes this (still single) thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
