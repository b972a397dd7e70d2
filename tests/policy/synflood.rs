//! `synflood_protect`, `synflood_rate`, `synflood_burst` (issue 23 item 9, fw4's defaults of
//! those names): the input chain's jump and the `syn_flood` chain as fw4 renders them, the
//! keys' errors, and with real packets that SYNs over the rate do not reach the router.

use crate::common;
use crate::netns_test;

use edgenetd::config::load_str;
use edgenetd::controller::policy::program::{self, SYN_FLOOD};

use common::controller::Driver;
use common::policy::{HOME, lan_wan, program_of, rendered_rules};

/// The rules of `chain` in the program of `text`, as nft text.
fn rendered(text: &str, chain: &str) -> Vec<String> {
    rendered_rules(&program_of(text), chain, "")
}
use common::shell::sh;
use common::topology::failed;

fn protected(keys: &str) -> String {
    HOME.replacen(
        "[policy]\n",
        &format!("[policy]\nsynflood_protect = true\n{keys}"),
        1,
    )
}

#[test]
fn fw4_synflood_protect_jumps_from_input_to_a_rate_limited_syn_flood_chain() {
    // fw4's defaults: 25/second, burst 50.
    assert_eq!(
        rendered(&protected(""), SYN_FLOOD),
        [
            "limit rate 25/second burst 50 packets return",
            "counter drop"
        ]
    );
    let input = rendered(&protected(""), "input");
    let jump = input
        .iter()
        .position(|r| r == "tcp flags & (fin | syn | rst | ack) == syn jump syn_flood")
        .unwrap_or_else(|| panic!("{input:#?}"));
    // After the established and invalid verdicts, before every rule of the config.
    let invalid = input
        .iter()
        .position(|r| r.contains("ct state invalid"))
        .unwrap();
    let ssh = input.iter().position(|r| r.contains("tcp dport")).unwrap();
    assert!(invalid < jump && jump < ssh, "{input:#?}");
    assert_eq!(
        rendered(
            &protected("synflood_rate = \"10/minute\"\nsynflood_burst = 5\n"),
            SYN_FLOOD
        )[0],
        "limit rate 10/minute burst 5 packets return"
    );
    // Off (the default): no chain, no jump.
    assert!(rendered(HOME, SYN_FLOOD).is_empty());
    assert!(
        rendered(HOME, "input")
            .iter()
            .all(|r| !r.contains("syn_flood"))
    );
}

#[test]
fn synflood_keys_are_checked_at_their_place() {
    let out = load_str(&[(
        "main.toml",
        "[policy]\nsynflood_rate = \"25/second\"\nsynflood_burst = 0\n",
    )])
    .expect_err("config must be rejected")
    .rendered;
    for e in [
        "main.toml:2:17: error: `synflood_rate` tunes the SYN flood protection: expected `synflood_protect = true` beside it",
        "main.toml:3:18: error: invalid synflood_burst 0: expected a number of packets from 1 to 1000000",
        "main.toml:3:18: error: `synflood_burst` tunes the SYN flood protection",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
    let out = load_str(&[(
        "main.toml",
        "[policy]\nsynflood_protect = true\nsynflood_rate = \"fast\"\n",
    )])
    .expect_err("config must be rejected")
    .rendered;
    assert!(
        out.contains(
            "main.toml:3:17: error: invalid synflood_rate `fast`: expected \"<n>/second\""
        ),
        "{out}"
    );
}

/// The memo patched set elements into the last program whenever "only elements differ",
/// and that test listed `[policy]`'s fields by hand: `synflood_protect` was not among them,
/// so turning it off kept the old chain in the kernel. The comparison now names every field.
#[test]
fn bug_turning_synflood_protect_off_was_taken_for_a_set_element_change() {
    let on = load_str(&[("edgenetd.toml", &protected(""))]).unwrap();
    let off = load_str(&[("edgenetd.toml", HOME)]).unwrap();
    let (on, off) = (on.policy.unwrap(), off.policy.unwrap());
    assert!(!program::only_set_elements_differ(&on, &off));
    assert!(program::only_set_elements_differ(&off, &off.clone()));
}

netns_test! {
    /// A burst of 2 and then 1 a minute: the lan host's third connection to the router's
    /// SSH in a row gets no answer (its SYN and the retry are dropped), and the drops are
    /// counted; without the protection all three connect.
    fn fw4_synflood_protect_drops_syns_to_the_router_over_the_rate() {
        let t = lan_wan();
        let lan = t.host("lan");
        t.serve_named(t.router(), "router", 22);
        let mut d = Driver::policy();
        d.sync(&protected("synflood_rate = \"1/minute\"\nsynflood_burst = 2\n"))
            .unwrap();
        let answers: Vec<String> = (0..3).map(|_| t.connect(lan, "tcp", "10.0.0.1", 22)).collect();
        assert_eq!(answers[..2], ["router", "router"], "{answers:?}");
        assert!(failed(&answers[2]), "{answers:?}");
        let chain = sh("nft list chain inet edgenetd-policy syn_flood");
        assert!(!chain.contains("counter packets 0 "), "{chain}");
        d.sync(HOME).unwrap();
        for _ in 0..3 {
            assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "router");
        }
    }
}
