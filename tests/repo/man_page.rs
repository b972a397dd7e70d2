//! The manual page the package installs (`edgenetd --generate man`, run by
//! packaging/build-debs.sh) against the real binary's `--help`: the same verbs, the same
//! options, the same defaults and the same exit codes, and roff that groff formats without a
//! warning. Its SYNOPSIS and OPTIONS come from the flag table (src/cli/flags.rs) like
//! `--help`'s; what is checked here is what could still differ: the prose of src/cli/man.rs
//! (COMMANDS against VERBS, the defaults) and the roff itself.

use crate::common;

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

/// The page as the package build makes it.
fn man_source() -> String {
    let run = common::bin::edgenetd(&["--generate", "man"]);
    assert_eq!(run.code, 0, "edgenetd --generate man: {}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    run.stdout
}

fn help() -> String {
    let run = common::bin::edgenetd(&["--help"]);
    assert_eq!(run.code, 0, "edgenetd --help: {}", run.stderr);
    run.stdout
}

/// The roff source as plain words: escapes for `-` and the no-hyphenation mark undone.
fn unescape(roff: &str) -> String {
    roff.replace("\\-", "-")
        .replace("\\%", "")
        .replace("\\&", "")
}

/// The indented lines of a `NAME:` section of the help text, up to the next blank line.
fn help_section<'a>(help: &'a str, name: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| l.trim_end() != format!("{name}:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// The lines of a `.SH NAME` section of the man page, up to the next `.SH`.
fn man_section<'a>(man: &'a str, name: &str) -> Vec<&'a str> {
    man.lines()
        .skip_while(|l| *l != format!(".SH {name}"))
        .skip(1)
        .take_while(|l| !l.starts_with(".SH "))
        .collect()
}

/// The tags of a man section's `.TP` paragraphs: the line after each `.TP`, macro stripped.
fn man_tags(section: &[&str]) -> Vec<String> {
    section
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .map(|w| {
            let tag = w[1].split_once(' ').map_or("", |(_, rest)| rest);
            unescape(tag).trim_matches('"').to_string()
        })
        .collect()
}

/// Every `--flag` in a text.
fn flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if !name.is_empty() {
            found.insert(format!("--{name}"));
        }
    }
    found
}

#[test]
fn man_page_names_every_verb_of_help_and_no_other() {
    let help = help();
    let help_verbs: BTreeSet<String> = help_section(&help, "VERBS")
        .iter()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(
        help_verbs.contains("run") && help_verbs.len() >= 5,
        "{help_verbs:?}"
    );
    let man = man_source();
    let commands: BTreeSet<String> = man_tags(&man_section(&man, "COMMANDS"))
        .into_iter()
        .collect();
    assert_eq!(
        commands, help_verbs,
        "COMMANDS of edgenetd.8 vs VERBS of --help"
    );
    let synopsis: BTreeSet<String> = man_section(&man, "SYNOPSIS")
        .iter()
        .filter_map(|l| l.strip_prefix(".B edgenetd "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        synopsis, help_verbs,
        "SYNOPSIS of edgenetd.8 vs VERBS of --help"
    );
}

#[test]
fn man_page_names_every_flag_of_help_and_no_other() {
    let help = help();
    let man = unescape(&man_source());
    assert_eq!(
        flags(&man),
        flags(&help),
        "flags of edgenetd.8 vs flags of --help"
    );
    let options: BTreeSet<String> = man_tags(&man_section(&man_source(), "OPTIONS"))
        .iter()
        .filter_map(|tag| tag.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(options, flags(&help), "OPTIONS of edgenetd.8 vs --help");
}

/// The page's OPTIONS and SYNOPSIS are the flag table's, as the package gets them.
#[test]
fn man_page_synopsis_and_options_are_rendered_from_the_flag_table() {
    let man = man_source();
    let section = |name: &str| man_section(&man, name).join("\n") + "\n";
    assert_eq!(section("OPTIONS"), edgenetd::cli::flags::man_options());
    assert_eq!(section("SYNOPSIS"), edgenetd::cli::flags::man_synopsis());
    assert!(section("SYNOPSIS").contains(".RB [ \\-\\-mark\n.IR N ]\n"));
    let help = help();
    assert!(
        help.contains(&edgenetd::cli::flags::help_synopsis()),
        "{help}"
    );
    assert!(
        man.contains(&format!("\"edgenetd {}\"", env!("CARGO_PKG_VERSION"))),
        "the page's title does not carry the version"
    );
}

#[test]
fn man_page_states_the_defaults_of_help() {
    let help = help();
    let man = unescape(&man_source());
    let defaults: Vec<&str> = help
        .match_indices("[default: ")
        .map(|(at, m)| {
            let rest = &help[at + m.len()..];
            rest[..rest.find([',', ']']).expect("closed default")].trim()
        })
        .collect();
    assert!(
        defaults.contains(&"/etc/edgenetd/edgenetd.toml"),
        "{defaults:?}"
    );
    for default in defaults {
        assert!(
            man.contains(default),
            "edgenetd.8 does not state default {default}"
        );
    }
}

#[test]
fn man_page_exit_status_matches_help_exit_codes() {
    let help = help();
    let help_codes: Vec<(String, String)> = help_section(&help, "EXIT CODES")
        .iter()
        .map(|l| {
            let (code, meaning) = l.trim().split_once(' ').expect("code and meaning");
            (code.to_string(), meaning.trim().to_string())
        })
        .collect();
    assert_eq!(
        help_codes
            .iter()
            .map(|(c, _)| c.as_str())
            .collect::<Vec<_>>(),
        ["0", "1", "2", "3"]
    );
    let man = man_source();
    let section = man_section(&man, "EXIT STATUS");
    let man_codes: Vec<(String, String)> = section
        .windows(3)
        .filter(|w| w[0] == ".TP")
        .map(|w| (man_tags(&w[..2])[0].clone(), unescape(w[2])))
        .collect();
    assert_eq!(
        man_codes, help_codes,
        "EXIT STATUS of edgenetd.8 vs EXIT CODES of --help"
    );
}

#[test]
fn man_page_has_the_sections_an_operator_looks_for() {
    let man = man_source();
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "OPTIONS",
        "HEALTH",
        "SIGNALS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ] {
        assert!(
            !man_section(&man, section).is_empty(),
            "edgenetd.8 lacks section {section}"
        );
    }
    let signals = man_tags(&man_section(&man, "SIGNALS")).join(" ");
    for signal in ["SIGHUP", "SIGTERM", "SIGINT"] {
        assert!(signals.contains(signal), "SIGNALS lacks {signal}");
    }
    let files = man_tags(&man_section(&man, "FILES")).join(" ");
    assert!(files.contains("/etc/edgenetd/edgenetd.toml"), "{files}");
}

/// `groff -ww` warns about every roff mistake (unknown macros, bad escapes, broken fonts);
/// lintian's `groff-message` check runs the same formatter.
#[test]
fn man_page_formats_without_groff_warnings() {
    let mut groff = Command::new("groff")
        .args(["-man", "-ww", "-z", "-Tutf8"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run groff (package groff-base; scripts/install-deps.sh --test installs it)");
    groff
        .stdin
        .take()
        .expect("groff's stdin")
        .write_all(man_source().as_bytes())
        .expect("write the page to groff");
    let out = groff.wait_with_output().expect("groff's answer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "groff: {stderr}"
    );
}
