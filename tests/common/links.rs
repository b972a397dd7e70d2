//! Links whose kernel-side changes are over: a test that then starts watching for link
//! events sees only the ones it causes.

use std::time::Duration;

use super::shell::sh;
use super::wait::wait_until;

/// Waits until every link in `devs` is operationally up, and until the kernel has sent the
/// link notification that says so.
///
/// `ip link set X up` returns before a veth pair has carrier: the kernel's link watch turns
/// the operational state to up later, in a worker, and announces it with an RTM_NEWLINK. A
/// monitor subscribed in between (e.g. the route controller's, opened at its first sync)
/// receives that notification as a link change, which rightly invalidates its cache.
pub fn wait_until_up(devs: &[&str]) {
    for dev in devs {
        wait_until(
            &format!("{dev} to be operationally up"),
            Duration::from_secs(10),
            // Not /sys/class/net: that sysfs belongs to the namespace it was mounted in.
            || sh(&format!("ip -o link show dev {dev}")).contains(" state UP "),
        );
    }
    // The link watch sets the state and sends the notification in one section under the
    // routing netlink lock; a request that takes that lock returns only after the section
    // ended, so the notification went out before anything subscribed after this.
    sh(&format!("ip link set dev {} up", devs[0]));
}
