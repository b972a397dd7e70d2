//! The isolation harness itself: a kernel test really runs in a namespace of its own.

mod common;

use common::netns::sh;

netns_test! {
    fn runs_in_a_fresh_namespace_with_only_loopback() {
        assert!(common::netns::in_child());
        let links = sh("ip -o link show");
        assert_eq!(links.lines().count(), 1, "a fresh namespace has only lo: {links}");
        assert!(sh("ip -o link show lo").contains("UP"), "lo is up");
        // Anything created here is gone with the namespace, never on the host.
        sh("nft add table inet edgenetd-harness-probe");
        assert!(sh("nft list tables").contains("edgenetd-harness-probe"));
    }
}
