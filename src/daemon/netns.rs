//! Entering the network namespace the kernel work belongs to (`run --netns NAME`).

/// Moves the calling thread into `ip netns` namespace `name`. Call before any other thread
/// exists: namespaces are per thread, and threads inherit their creator's.
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    let file = std::fs::File::open(format!("/run/netns/{name}"))?;
    crate::sys::enter_net_namespace(&file)
}
