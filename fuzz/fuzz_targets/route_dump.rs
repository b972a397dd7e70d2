//! The rtnetlink dump parser (edgenetd's own codec, `route::codec`): arbitrary bytes as the
//! kernel's answer to a route or rule dump give specs or nothing, never a panic; a spec read
//! back renders and normalizes.
#![no_main]

use edgenetd::dataplane::route::Links;
use edgenetd::dataplane::route::message::specs_in_datagram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut links = Links::default();
    links.insert(1, "lo".into());
    links.insert(2, "eth0".into());
    let (routes, rules) = specs_in_datagram(data, &links);
    for r in routes {
        let _ = format!("{r:?}");
    }
    for r in rules {
        let _ = format!("{:?}", r.normalized());
    }
});
