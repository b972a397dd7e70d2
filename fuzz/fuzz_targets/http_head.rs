//! The HTTP request head parser: any bytes give a head, "incomplete" or a rejection, never a
//! panic. An accepted head's path is in origin form, and bytes after a complete head (a body
//! or a pipelined request) do not change what the head parses to.
#![no_main]

use edgenetd::http::request::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let head = parse(data);
    if let Ok(Some(h)) = &head {
        assert!(h.path.starts_with('/'), "not origin form: {:?}", h.path);
        let mut more = data.to_vec();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse(&more), head, "trailing bytes changed a complete head");
    }
});
