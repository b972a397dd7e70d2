//! The size and depth limits, through `load` (files on disk) and `load_str`.

use std::io::Write as _;

use super::limits::{MAX_DEPTH, MAX_FILE_BYTES, MAX_PARSE_WEIGHT, MAX_TOTAL_BYTES};
use super::{load, load_str};

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("edgenetd-limits-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    dir
}

/// A valid config file of exactly `size` bytes (one long comment).
fn write_comment_file(path: &std::path::Path, size: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let body = vec![b'x'; size as usize - 3];
    f.write_all(b"# ").unwrap();
    f.write_all(&body).unwrap();
    f.write_all(b"\n").unwrap();
}

#[test]
fn a_file_over_the_size_limit_is_refused_unread_saying_by_how_much() {
    let dir = scratch("file");
    let main = dir.join("edgenetd.toml");
    // Sparse: its size is in the metadata, not on the disk; it must not be read.
    std::fs::File::create(&main)
        .unwrap()
        .set_len(MAX_FILE_BYTES + 5)
        .unwrap();
    let e = load(&main).unwrap_err();
    let want = format!(
        "{}:1:1: error: the file is 16,777,221 bytes, over the limit of 16,777,216 bytes (16 MiB) for one config file by 5 bytes; it was not read",
        main.display()
    );
    assert!(e.rendered.starts_with(&want), "{}", e.rendered);
    assert_eq!(e.count, 1, "{}", e.rendered);
    // Nothing of it to quote.
    assert_eq!(e.rendered.lines().count(), 1, "{}", e.rendered);
    // At the limit, it is read (and is a valid file).
    write_comment_file(&main, MAX_FILE_BYTES);
    load(&main).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn conf_d_fragments_that_add_up_past_the_total_limit_are_refused() {
    let dir = scratch("total");
    let main = dir.join("edgenetd.toml");
    let part = MAX_TOTAL_BYTES / 3;
    write_comment_file(&main, part);
    write_comment_file(&dir.join("conf.d/10-a.toml"), part);
    write_comment_file(&dir.join("conf.d/20-b.toml"), part);
    load(&main).expect("three thirds of the total are within it");
    let over = dir.join("conf.d/30-c.toml");
    write_comment_file(&over, 10);
    let e = load(&main).unwrap_err();
    let read = 3 * part;
    let want = format!(
        "{}:1:1: error: the file is 10 bytes; with the {} bytes of the files before it, over the limit of 33,554,432 bytes (32 MiB) for all config files of one load by {} bytes",
        over.display(),
        group(read),
        read + 10 - MAX_TOTAL_BYTES
    );
    assert!(e.rendered.starts_with(&want), "{}", e.rendered);
    assert_eq!(e.count, 1, "{}", e.rendered);
    std::fs::remove_dir_all(dir).unwrap();
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn a_file_nested_past_the_depth_limit_is_not_parsed_and_the_others_are() {
    let n = 100_000;
    let deep = format!("k = {}{}\n", "[".repeat(n), "]".repeat(n));
    let e = load_str(&[
        ("edgenetd.toml", "[daemon]\nroute_protocol = 300\n"),
        ("conf.d/10-deep.toml", &deep),
    ])
    .unwrap_err();
    assert_eq!(e.count, 2, "{}", e.rendered);
    assert!(
        e.rendered.contains("edgenetd.toml:2:18: error"),
        "{}",
        e.rendered
    );
    let want = format!(
        "conf.d/10-deep.toml:1:{}: error: nested more than {MAX_DEPTH} deep",
        4 + MAX_DEPTH
    );
    assert!(e.rendered.contains(&want), "{}", e.rendered);
    assert!(
        e.rendered.len() < 1500,
        "{} bytes:\n{}",
        e.rendered.len(),
        e.rendered
    );
}

/// The limits are stated in docs/operations.md, the README and the man page (its prose is in
/// src/cli/man.rs, read as text: config does not depend on cli): they must say what the code
/// enforces.
#[test]
fn the_docs_state_the_limits_the_code_enforces() {
    let root = env!("CARGO_MANIFEST_DIR");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let ops = read("docs/operations.md").replace('\n', " ");
    for want in [
        format!(
            "| one config file | {} MiB ({} bytes)",
            MAX_FILE_BYTES >> 20,
            group(MAX_FILE_BYTES)
        ),
        format!(
            "| {} MiB ({} bytes)",
            MAX_TOTAL_BYTES >> 20,
            group(MAX_TOTAL_BYTES)
        ),
        format!("| nesting | {MAX_DEPTH} levels"),
        format!(
            "| weight parsed whole, one load | {} (",
            group(MAX_PARSE_WEIGHT as u64)
        ),
        format!(
            "a table weighs {}, an array {}, a key {}, an array element {}",
            super::limits::TABLE_WEIGHT,
            super::limits::ARRAY_WEIGHT,
            super::limits::KEY_WEIGHT,
            super::limits::ELEMENT_WEIGHT
        ),
        format!("longer than {} characters", super::diag::QUOTE_CHARS),
        format!(
            "longer than {} bytes",
            group(super::diag::MESSAGE_BYTES as u64)
        ),
    ] {
        assert!(
            ops.contains(&want),
            "docs/operations.md does not say {want:?}"
        );
    }
    let short = format!(
        "over {} MiB, the files of one load over {} MiB together, or nesting deeper than",
        MAX_FILE_BYTES >> 20,
        MAX_TOTAL_BYTES >> 20
    );
    let man = read("src/cli/man.rs").replace('\n', " ");
    let readme = read("README.md").replace("\n  ", " ");
    for (name, text) in [("man page", &man), ("README", &readme)] {
        assert!(text.contains(&short), "the {name} does not say {short:?}");
        let depth = format!("deeper than {MAX_DEPTH} levels");
        assert!(text.contains(&depth), "the {name} does not say {depth:?}");
        let weight = format!("more than {} of weight", group(MAX_PARSE_WEIGHT as u64));
        assert!(text.contains(&weight), "the {name} does not say {weight:?}");
    }
}

/// `k = [1,1,…]` with `n` elements: weighs `n + 4` (the key 2, the array 3, `n - 1` commas).
fn dense(n: usize) -> String {
    let mut text = String::with_capacity(2 * n + 8);
    text.push_str("k = [");
    for i in 0..n {
        text.push_str(if i == 0 { "1" } else { ",1" });
    }
    text.push_str("]\n");
    text
}

/// The 1-based column of the comma of `dense` where an allowance of `allowed` runs out: comma
/// `j` brings the weight to `5 + j` and sits at column `5 + 2j`.
fn dense_column_past(allowed: usize) -> usize {
    let j = allowed - 5 + 1;
    5 + 2 * j
}

/// A 52 MB line took `check` to 3.9 GB; under the size limit a 16 MiB one still took
/// 1.2 GiB, as toml's tree holds ~150 bytes per element.
#[test]
fn a_dense_file_under_the_size_limit_is_refused_before_toml_builds_its_tree() {
    let over = dense(MAX_PARSE_WEIGHT);
    let e = load_str(&[
        ("edgenetd.toml", "[daemon]\n"),
        ("conf.d/60-big.toml", &over),
    ])
    .unwrap_err();
    assert_eq!(e.count, 1, "{}", e.rendered);
    let col = dense_column_past(MAX_PARSE_WEIGHT - super::limits::TABLE_WEIGHT);
    let want = format!(
        "conf.d/60-big.toml:1:{col}: error: more than {} of weight for toml to parse whole in one load",
        group(MAX_PARSE_WEIGHT as u64)
    );
    assert!(e.rendered.contains(&want), "{}", e.rendered);
    assert!(
        e.rendered.contains(", 10 of it in the files before;"),
        "{}",
        e.rendered
    );
    assert!(e.rendered.len() < 1500, "{}", e.rendered.len());
    // Exactly at the limit it is parsed: an unknown section, not a limit.
    let at = dense(MAX_PARSE_WEIGHT - 4);
    let e = load_str(&[("edgenetd.toml", &at)]).unwrap_err();
    assert!(e.rendered.contains("unknown section `k`"), "{}", e.rendered);
    assert!(!e.rendered.contains("of weight"), "{}", e.rendered);
}

/// Tables weigh what they cost: 50,000 `[[x]]` tables of one key took 73 MiB, as much as
/// 500,000 array elements, and are refused like them.
#[test]
fn many_small_tables_weigh_like_the_memory_they_take() {
    let n = MAX_PARSE_WEIGHT / (super::limits::TABLE_WEIGHT + super::limits::KEY_WEIGHT) + 1;
    let text = "[[x]]\na = 1\n".repeat(n);
    let e = load_str(&[("edgenetd.toml", &text)]).unwrap_err();
    assert!(e.rendered.contains("of weight for toml"), "{}", e.rendered);
    let fewer = "[[x]]\na = 1\n".repeat(n - 1);
    let e = load_str(&[("edgenetd.toml", &fewer)]).unwrap_err();
    assert!(!e.rendered.contains("of weight"), "{}", e.rendered);
}

#[test]
fn weight_parsed_whole_adds_up_over_the_files_of_one_load() {
    let half = dense(MAX_PARSE_WEIGHT / 2);
    let e = load_str(&[
        ("edgenetd.toml", "[daemon]\n"),
        ("conf.d/10-a.toml", &half),
        ("conf.d/20-b.toml", &half.replace("k =", "j =")),
    ])
    .unwrap_err();
    // `[daemon]` weighs 10, 10-a.toml half + 4.
    let before = 10 + MAX_PARSE_WEIGHT / 2 + 4;
    let want = format!(
        "conf.d/20-b.toml:1:{}: error: more than {} of weight for toml to parse whole in one load (a table weighs 10, an array 3, a key 2, an array element 1), {} of it in the files before;",
        dense_column_past(MAX_PARSE_WEIGHT - before),
        group(MAX_PARSE_WEIGHT as u64),
        group(before as u64),
    );
    assert!(e.rendered.contains(&want), "{}", e.rendered);
}

/// The fast path's `[[route]]` entries are not weighed: 40,000 of them weigh 560,000.
#[test]
fn route_entries_at_the_end_of_a_file_are_not_weighed() {
    let n = 40_000;
    let mut text = String::from("[daemon]\n");
    for i in 0..n {
        text.push_str(&format!(
            "[[route]]\nto = \"10.{}.{}.0/24\"\nvia = \"192.0.2.1\"\n",
            i >> 8,
            i & 255
        ));
    }
    let state = load_str(&[("edgenetd.toml", &text)]).unwrap();
    assert_eq!(state.routing.routes.len(), n);
    // The same routes before another section are parsed whole: over the limit.
    text.push_str("[policy]\n");
    let e = load_str(&[("edgenetd.toml", &text)]).unwrap_err();
    assert!(e.rendered.contains("of weight for toml"), "{}", e.rendered);
}
