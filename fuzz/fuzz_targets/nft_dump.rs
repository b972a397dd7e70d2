//! The nf_tables answer reader: arbitrary bytes as the kernel's answer to a dump are framed
//! into messages or stop at a truncated one, never a panic, and a rule's user data (where
//! the comment lives) gives a comment or nothing. libnftnl's own object parsers are not fed
//! arbitrary bytes: they exit the process on an attribute of the wrong size, by design (see
//! `list_answer`).
#![no_main]

use edgenetd::dataplane::nft::read::dump::{list_answer, rule_comment};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let n = list_answer(data, false);
    assert!(n.messages * 16 <= data.len(), "more messages than bytes allow");
    let _ = rule_comment(data);
});
