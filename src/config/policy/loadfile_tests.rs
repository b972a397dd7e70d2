//! `loadfile` of `[policy.set.*]` (fw4's ipset `loadfile`, its 05_ipsets): elements from a
//! data file, with the config's, and every problem at the key's place.

use std::path::PathBuf;

use crate::config::load_str;
use crate::config::policy::NamedSet;

/// A scratch directory of its own per test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("edgenetd-loadfile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn set_config(extra: &str, loadfile: &str) -> String {
    format!("[policy]\n[policy.set.blocked]\ntype = \"ipv4\"\n{extra}loadfile = \"{loadfile}\"\n")
}

fn load_set(text: &str) -> NamedSet {
    let state = load_str(&[("main.toml", text)]).unwrap_or_else(|e| panic!("{e}"));
    state.policy.unwrap().sets["blocked"].clone()
}

fn errors(text: &str) -> String {
    load_str(&[("main.toml", text)])
        .expect_err("config must be rejected")
        .rendered
}

#[test]
fn fw4_05_ipsets_loadfile_elements_join_the_configs_and_comments_are_skipped() {
    let dir = scratch("union");
    let file = dir.join("blocklist.txt");
    std::fs::write(
        &file,
        "# a blocklist\n198.51.100.0/24\n\n   192.0.2.9   # trailing comment\n192.0.2.1\n",
    )
    .unwrap();
    let set = load_set(&set_config(
        "elements = [\"192.0.2.1\"]\n",
        &file.display().to_string(),
    ));
    let shown: Vec<String> = set.elements.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        [
            "192.0.2.1/32",
            "198.51.100.0/24",
            "192.0.2.9/32",
            "192.0.2.1/32"
        ]
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fw4_05_ipsets_loadfile_fills_an_address_port_set_with_its_pairs() {
    let dir = scratch("pairs");
    let file = dir.join("pairs.txt");
    std::fs::write(&file, "# ADDRESS PORT\n5.6.7.8 22\n1.2.3.4 . 80\n").unwrap();
    let set = load_set(&set_config(
        "match = [\"src_ip\", \"dest_port\"]\nelements = [\"1.2.3.4 80\"]\n",
        &file.display().to_string(),
    ));
    let pairs: Vec<String> = set.tuples.iter().map(|t| format!("{t:?}")).collect();
    assert_eq!(
        pairs,
        [
            "[Address(1.2.3.4/32), Port(80)]",
            "[Address(5.6.7.8/32), Port(22)]"
        ],
        "the union, once each"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_bad_line_is_reported_at_the_loadfile_key_naming_its_place_in_the_data_file() {
    let dir = scratch("bad-lines");
    let file = dir.join("blocklist.txt");
    std::fs::write(&file, "192.0.2.1\n# fine\n1.2.3\n  2001:db8::1\n").unwrap();
    let path = file.display().to_string();
    let out = errors(&set_config("", &path));
    // The key is on line 4 of main.toml, its value from column 12.
    assert!(
        out.contains(&format!(
            "main.toml:4:12: error: {path}:3:1: invalid prefix `1.2.3`"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{path}:4:3: element `2001:db8::1` is not an IPv4 address or prefix"
        )),
        "{out}"
    );
    assert_eq!(out.matches("error:").count(), 2, "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_lines_past_the_first_twenty_are_counted_not_shown() {
    let dir = scratch("many");
    let file = dir.join("blocklist.txt");
    let text: String = (1..=25).map(|i| format!("bad{i}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let path = file.display().to_string();
    let out = errors(&set_config("", &path));
    assert!(out.contains(&format!("{path}:20:1:")), "{out}");
    assert!(!out.contains(&format!("{path}:21:1:")), "{out}");
    assert!(out.contains("and 5 more bad line(s)"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_relative_loadfile_is_refused_saying_so() {
    let out = errors(&set_config("", "blocklist.txt"));
    assert!(
        out.contains("main.toml:4:12: error: `loadfile` must be an absolute path: `blocklist.txt` is relative"),
        "{out}"
    );
}

#[test]
fn a_missing_too_large_or_not_utf8_data_file_is_an_error_at_the_key() {
    let dir = scratch("unreadable");
    let missing = dir.join("missing.txt");
    let out = errors(&set_config("", &missing.display().to_string()));
    assert!(
        out.contains(&format!(
            "main.toml:4:12: error: {}: cannot read:",
            missing.display()
        )),
        "{out}"
    );
    let binary = dir.join("binary.txt");
    std::fs::write(&binary, b"192.0.2.1\n19\xff2.0.2.2\n").unwrap();
    let out = errors(&set_config("", &binary.display().to_string()));
    assert!(
        out.contains(&format!(
            "{}:2:3: not UTF-8 text: invalid byte at offset 12",
            binary.display()
        )),
        "{out}"
    );
    let big = dir.join("big.txt");
    let f = std::fs::File::create(&big).unwrap();
    // One byte over the limit of one data file (8 MiB).
    f.set_len((8 << 20) + 1).unwrap();
    let out = errors(&set_config("", &big.display().to_string()));
    assert!(
        out.contains("the data file is 8,388,609 bytes, over the limit of 8,388,608 bytes (8 MiB) for one data file"),
        "{out}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_data_file_named_by_two_sets_is_read_once_and_kept_once() {
    let dir = scratch("twice");
    let file = dir.join("blocklist.txt");
    std::fs::write(&file, "192.0.2.1\n").unwrap();
    std::fs::write(
        dir.join("edgenetd.toml"),
        format!(
            "[policy]\n[policy.set.a]\ntype = \"ipv4\"\nloadfile = \"{0}\"\n[policy.set.b]\ntype = \"ipv4\"\nloadfile = \"{0}\"\n",
            file.display()
        ),
    )
    .unwrap();
    let (state, texts) = crate::config::load_keeping_texts(&dir.join("edgenetd.toml")).unwrap();
    let sets = state.policy.unwrap().sets;
    assert_eq!(sets["a"].elements, sets["b"].elements);
    assert_eq!(texts.data, [(file, "192.0.2.1\n".to_string())]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fw4_05_ipsets_a_loadfile_line_overlapping_an_element_of_a_net_set_is_an_error_at_the_key() {
    let dir = scratch("net-overlap");
    let file = dir.join("nets.txt");
    std::fs::write(&file, "10.1.0.0/16 80\n10.2.0.0/16 80\n").unwrap();
    let out = errors(&set_config(
        "match = [\"src_net\", \"dest_port\"]\nelements = [\"10.0.0.0/8 80\", \"10.2.0.0/16 80\"]\n",
        &file.display().to_string(),
    ));
    // The loadfile key's value is at line 6, column 12; the duplicate 10.2.0.0/16 of the
    // file is only dropped.
    assert!(
        out.contains(
            "main.toml:6:12: error: element `10.1.0.0/16 80` overlaps element `10.0.0.0/8 80`"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "main.toml:5:30: error: element `10.2.0.0/16 80` overlaps element `10.0.0.0/8 80`"
        ),
        "{out}"
    );
    assert_eq!(out.matches("overlaps").count(), 2, "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}
