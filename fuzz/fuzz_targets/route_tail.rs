//! The `[[route]]` fast path of the config loader against the whole-file parse: any input
//! (up to three files, split at byte 0x01) must give the same document, route elements,
//! diagnostics and validated state either way.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let files: Vec<&str> = text.split('\u{1}').take(3).collect();
        edgenetd::config::differential::same(&files);
    }
});
