//! A set's `loadfile` (fw4's ipset `loadfile`, its 05_ipsets): the ruleset a set filled from a
//! data file makes is the one its `elements` would, and with real packets a blocklist read
//! from a file drops what it lists and nothing else.

use crate::common;
use crate::netns_test;

use edgenetd::dataplane::nft::text::render_table;

use common::controller::Driver;
use common::policy::{lan_wan, program_of};
use common::scratch::ScratchDir;
use common::topology::failed;

/// fw4's 05_ipsets set, its pairs given inline.
const INLINE: &str = r#"
[policy]
[policy.set.test-set-1]
type = "ipv4"
match = ["src_ip", "dest_port"]
elements = ["1.2.3.4 80", "5.6.7.8 . 22"]

[[policy.rule]]
name = "set-1"
protocol = "tcp"
ipset = "test-set-1"
"#;

#[test]
fn fw4_05_ipsets_pairs_from_a_loadfile_make_the_ruleset_inline_elements_make() {
    let dir = ScratchDir::new("loadfile-pairs");
    let data = dir.join("pairs.txt");
    std::fs::write(&data, "# fw4's loadfile\n1.2.3.4 80\n\n5.6.7.8 . 22\n").unwrap();
    let from_file = INLINE.replace(
        "elements = [\"1.2.3.4 80\", \"5.6.7.8 . 22\"]",
        &format!("loadfile = \"{}\"", data.display()),
    );
    assert_ne!(from_file, INLINE);
    assert_eq!(
        render_table(&program_of(&from_file).table),
        render_table(&program_of(INLINE).table)
    );
}

/// The lan reaches the wan, but not the addresses the blocklist file lists.
fn blocklist(data: &std::path::Path) -> String {
    format!(
        r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]
[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[[policy.forward]]
from = "lan"
to = "wan"

[policy.set.blocked]
type = "ipv4"
loadfile = "{}"

[[policy.rule]]
name = "drop-blocked"
from = "lan"
to = "wan"
to_addresses = ["@blocked"]
action = "drop"
"#,
        data.display()
    )
}

netns_test! {
    fn fw4_ipset_loadfile_a_blocklist_read_from_a_file_drops_what_it_lists() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let dir = ScratchDir::new("loadfile-blocklist");
        let data = dir.join("blocklist.txt");
        std::fs::write(&data, "# blocked hosts\n192.0.2.3\n198.51.100.0/24\n").unwrap();
        let config = blocklist(&data);
        let mut d = Driver::policy();
        d.sync(&config).unwrap();
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "a listed address passed");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "an unlisted address was dropped");
        // The file changes: the next load reads it, and the other address is the blocked one.
        std::fs::write(&data, "192.0.2.2\n").unwrap();
        d.sync(&config).unwrap();
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.2", 80)), "the newly listed address passed");
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.3", 80)), "the address no longer listed was dropped");
    }
}
