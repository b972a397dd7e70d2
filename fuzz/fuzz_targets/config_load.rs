//! The config loader: TOML text to a validated DesiredState or rendered diagnostics, never a
//! panic. The input is a main file and up to three conf.d files (split at byte 0x01), merged
//! as `edgenetd.toml` plus `conf.d/*.toml` are; invalid UTF-8 is replaced, as an operator's
//! editor might leave it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let names = [
        "edgenetd.toml",
        "conf.d/10-a.toml",
        "conf.d/20-b.toml",
        "conf.d/30-c.toml",
    ];
    let files: Vec<(&str, &str)> = names.iter().copied().zip(text.split('\u{1}')).collect();
    match edgenetd::config::load_str(&files) {
        Ok(state) => {
            let _ = format!("{state:?}");
        }
        Err(e) => assert!(!e.to_string().is_empty(), "an error without a message"),
    }
});
