//! The block-by-block config splitter (the `[[route]]` fast path) against the whole-file
//! parse: any input (a main file and up to three conf.d files, split at byte 0x01) must give
//! the same document, route elements, diagnostics and validated state either way.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let files: Vec<&str> = text.split('\u{1}').take(4).collect();
        edgenetd::config::differential::same(&files);
    }
});
