//! Time rules (issue 23 item 8, fw4's `tests/03_rules/09_time`) with real packets: a window
//! of the day and a set of weekdays that contain now pass pings to the router, ones that
//! exclude now drop them; the `plan` text loads to the batch's kernel expressions; a local
//! window is moved to UTC by the zone's offset (a plan made under `TZ=Asia/Kolkata`, loaded
//! and pinged); `explain --at` follows the time it is given and says when it needs one.
//!
//! Windows are ±2 h around now and the weekdays are today and tomorrow (or the five other
//! days), so a test that runs across midnight still sees the day it expects; a window
//! around now near midnight wraps it, which the test then proves too.

use crate::common;
use crate::netns_test;

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::bin::edgenetd;
use common::controller::Driver;
use common::policy::{ZONES_ONLY, lan_wan, planned_policy_nft};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::Host;
use common::wait::poll_for;
use edgenetd::calendar::{DAY, WEEKDAYS, format_time_of_day, weekday_from_days};

const HOUR: i64 = 3600;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `"HH:MM:SS"` of `secs` since some midnight (wrapped into the day).
fn hm(secs: i64) -> String {
    format_time_of_day(secs.rem_euclid(DAY) as u32)
}

/// A rule accepting pings from the lan to the router with the time keys `keys`.
fn config(keys: &str) -> String {
    format!(
        "{ZONES_ONLY}[[policy.rule]]\nname = \"timed\"\nfrom = \"lan\"\nto = \"self\"\n\
         protocol = \"icmp\"\n{keys}\naction = \"accept\"\n"
    )
}

/// One ping passes within 10 s (`false`: the last of them failed).
fn pings(host: &Host) -> bool {
    poll_for(Duration::from_secs(10), || {
        host.sh_status("ping -n -c 1 -W 1 10.0.0.1").0.then_some(())
    })
    .is_some()
}

/// One ping, once (for the drops: no retry can make it pass).
fn ping_once(host: &Host) -> bool {
    host.sh_status("ping -n -c 1 -W 1 10.0.0.1").0
}

/// The kernel expressions of every rule in `listing` (`nft --debug=netlink list ...`),
/// anonymous set numbers and counters' values dropped.
fn bytecode(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.starts_with("  ["))
        .map(|l| l.split(" pkts ").next().unwrap_or(l))
        .map(|l| {
            l.split(' ')
                .map(|w| if w.starts_with("__set") { "__set" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// `plan`'s text for `config` loads (with `TZ=UTC`, as `plan` writes UTC) to the very
/// expressions the batch programmed.
fn assert_plan_matches_batch(name: &str, config: &str) {
    let dir = ScratchDir::with_files(name, &[("edgenetd.toml", config)]);
    let (_, file) = planned_policy_nft(&dir);
    let from_text = bytecode(&sh(&format!(
        "unshare --net sh -c 'TZ=UTC nft -f {} && nft --debug=netlink list table inet edgenetd-policy'",
        file.display()
    )));
    let batch = bytecode(&sh("nft --debug=netlink list table inet edgenetd-policy"));
    assert!(batch.iter().any(|e| e.contains("meta load")), "{batch:?}");
    assert_eq!(batch, from_text, "the batch and the plan's text differ");
}

netns_test! {
    fn fw4_09_time_a_window_and_weekdays_containing_now_pass_and_others_drop() {
        let t = lan_wan();
        let lan = t.host("lan");
        let now = now();
        let today = weekday_from_days(now.div_euclid(DAY));
        let day = |k: u8| WEEKDAYS[usize::from((today + k) % 7)];

        // A window of ±2 h around now (across midnight when now is near it).
        let around = config(&format!(
            "start_time = \"{}\"\nstop_time = \"{}\"\nutc_time = true",
            hm(now - 2 * HOUR),
            hm(now + 2 * HOUR)
        ));
        Driver::policy().sync(&around).unwrap();
        assert!(pings(lan), "a window around now dropped a ping:\n{around}");
        let listed = sh("nft list table inet edgenetd-policy");
        assert!(listed.contains("meta hour"), "{listed}");
        assert_plan_matches_batch("time-around", &around);

        // A window 6-10 h from now, and the 20 h from now+2h round to now-2h (the other
        // side of the clock, across midnight): both leave now out.
        for keys in [
            format!("start_time = \"{}\"\nstop_time = \"{}\"", hm(now + 6 * HOUR), hm(now + 10 * HOUR)),
            format!("start_time = \"{}\"\nstop_time = \"{}\"", hm(now + 2 * HOUR), hm(now - 2 * HOUR)),
        ] {
            let away = config(&format!("{keys}\nutc_time = true"));
            Driver::policy().sync(&away).unwrap();
            assert!(!ping_once(lan), "a window away from now passed a ping:\n{away}");
        }

        // Today and tomorrow pass; the five other days drop.
        let days = config(&format!("weekdays = \"{} {}\"\nutc_time = true", day(0), day(1)));
        Driver::policy().sync(&days).unwrap();
        assert!(pings(lan), "today's weekday dropped a ping:\n{days}");
        assert_plan_matches_batch("time-days", &days);
        let others: Vec<&str> = (2..7).map(day).collect();
        let not_today = config(&format!("weekdays = {others:?}\nutc_time = true"));
        Driver::policy().sync(&not_today).unwrap();
        assert!(!ping_once(lan), "another weekday passed a ping:\n{not_today}");
        // The inverted form of the same: `!` and today and tomorrow.
        let inverted = config(&format!("weekdays = \"!{} {}\"\nutc_time = true", day(0), day(1)));
        Driver::policy().sync(&inverted).unwrap();
        assert!(!ping_once(lan), "`!today tomorrow` passed a ping:\n{inverted}");

        // Dates: from yesterday on passes; one that ended yesterday drops.
        let date = |secs: i64| {
            let ((y, m, d), _) = edgenetd::calendar::civil_from_unix(secs);
            format!("{y:04}-{m:02}-{d:02}")
        };
        let since = config(&format!("start_date = \"{}\"\nutc_time = true", date(now - DAY)));
        Driver::policy().sync(&since).unwrap();
        assert!(pings(lan), "a start_date of yesterday dropped a ping:\n{since}");
        assert_plan_matches_batch("time-since", &since);
        let ended = config(&format!(
            "start_date = \"{}\"\nstop_date = \"{}\"\nutc_time = true",
            date(now - 3 * DAY),
            date(now - DAY)
        ));
        Driver::policy().sync(&ended).unwrap();
        assert!(!ping_once(lan), "a date range that ended passed a ping:\n{ended}");
    }
}

netns_test! {
    fn a_local_window_is_moved_to_utc_by_the_time_zones_offset() {
        let t = lan_wan();
        let lan = t.host("lan");
        // Asia/Kolkata is UTC+5:30 all year: its local now is now + 5:30.
        let local_now = now() + 5 * HOUR + 1800;
        let keys = format!(
            "start_time = \"{}\"\nstop_time = \"{}\"",
            hm(local_now - 2 * HOUR),
            hm(local_now + 2 * HOUR)
        );
        let plan_in_kolkata = |config: &str, name: &str| {
            let dir = ScratchDir::with_files(name, &[("edgenetd.toml", config)]);
            let out = Command::new(env!("CARGO_BIN_EXE_edgenetd"))
                .args(["plan", "--config", dir.config().to_str().unwrap()])
                .env("TZ", "Asia/Kolkata")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let text: String = String::from_utf8_lossy(&out.stdout)
                .lines()
                .skip_while(|l| !l.starts_with("# nft begin: table inet edgenetd-policy"))
                .take_while(|l| !l.starts_with("# nft end:"))
                .map(|l| format!("{l}\n"))
                .collect();
            let file = dir.join("policy.nft");
            std::fs::write(&file, &text).unwrap();
            sh(&format!("TZ=UTC nft -f {}", file.display()));
            text
        };
        // Local (no utc_time): the window holds now.
        let text = plan_in_kolkata(&config(&keys), "time-kolkata");
        assert!(pings(lan), "a local window around the local now dropped a ping:\n{text}");
        // The same times read as UTC are 5:30 h off: now is outside them.
        let text = plan_in_kolkata(&config(&format!("{keys}\nutc_time = true")), "time-kolkata-utc");
        assert!(!ping_once(lan), "the window read as UTC passed a ping:\n{text}");
    }
}

netns_test! {
    fn explain_follows_the_time_given_by_at_and_says_when_it_needs_one() {
        let config = config(
            "start_time = \"08:00\"\nstop_time = \"17:00\"\nweekdays = \"Mon Tue Wed Thu Fri\"\nutc_time = true",
        );
        let dir = ScratchDir::with_files("time-explain", &[("edgenetd.toml", &config)]);
        let cfg = dir.config();
        let explain = |at: Option<&str>| {
            let mut args = vec![
                "explain", "--json", "--config", cfg.to_str().unwrap(), "--addresses",
                "veth-lan=10.0.0.1/24", "--in", "veth-lan", "--from", "10.0.0.2", "--to",
                "10.0.0.1", "--proto", "icmp",
            ];
            if let Some(at) = at {
                args.extend(["--at", at]);
            }
            edgenetd(&args)
        };
        let verdict = |at: &str| {
            let run = explain(Some(at));
            assert_eq!(run.code, 0, "explain --at {at}: {}", run.stderr);
            let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            format!("{} {}", j["verdict"].as_str().unwrap(), j["rule"].as_str().unwrap())
        };
        // 2026-12-02 is a Wednesday, 2026-12-05 a Saturday.
        assert_eq!(verdict("2026-12-02T13:05:00Z"), "accept timed");
        assert_eq!(verdict("2026-12-02T17:00:00Z"), "accept timed");
        assert_eq!(verdict("2026-12-02T17:00:01Z"), "drop default");
        assert_eq!(verdict("2026-12-02T07:59Z"), "drop default");
        assert_eq!(verdict("2026-12-05T13:05Z"), "drop default");
        let run = explain(None);
        assert_ne!(run.code, 0, "explain without --at gave a verdict: {}", run.stdout);
        assert!(
            run.stderr.contains("its verdict depends on when the packet comes; give --at"),
            "{}",
            run.stderr
        );
    }
}

netns_test! {
    fn fw4_09_time_plan_renders_each_of_fw4s_rules_and_nft_takes_it() {
        // fw4's twelve rules, `utc_time` added so that the text does not depend on the
        // machine's zone; fw4's `>=` is a range to the end of the day or to 2200 here.
        let rules = [
            ("start_date = \"2022-05-30T21:51:23\"", r#"meta time "2022-05-30 21:51:23"-"2200-01-01 00:00:00""#),
            ("start_date = \"2022-05-30T21:51\"", r#"meta time "2022-05-30 21:51:00"-"2200-01-01 00:00:00""#),
            ("start_date = \"2022-05-30T21\"", r#"meta time "2022-05-30 21:00:00"-"2200-01-01 00:00:00""#),
            ("start_date = \"2022-05-30\"", r#"meta time "2022-05-30 00:00:00"-"2200-01-01 00:00:00""#),
            ("start_date = \"2022-05\"", r#"meta time "2022-05-01 00:00:00"-"2200-01-01 00:00:00""#),
            ("start_date = \"2022\"", r#"meta time "2022-01-01 00:00:00"-"2200-01-01 00:00:00""#),
            ("start_time = \"21:51:23\"", r#"meta hour "21:51:23"-"23:59:59""#),
            ("start_time = \"21:51\"", r#"meta hour "21:51:00"-"23:59:59""#),
            ("start_time = \"21\"", r#"meta hour "21:00:00"-"23:59:59""#),
            (
                "start_date = \"2022-05-30T21:51:23\"\nstop_date = \"2022-06-01T23:51:23\"",
                r#"meta time "2022-05-30 21:51:23"-"2022-06-01 23:51:23""#,
            ),
            ("start_time = \"21:51:23\"\nstop_time = \"23:51:23\"", r#"meta hour "21:51:23"-"23:51:23""#),
            (
                "weekdays = \"Monday tuEsday wed SUN Th\"",
                r#"meta day { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday" }"#,
            ),
        ];
        let mut config = ZONES_ONLY.to_string();
        for (i, (keys, _)) in rules.iter().enumerate() {
            config.push_str(&format!(
                "[[policy.rule]]\nname = \"time-rule-{}\"\nto = \"self\"\n{keys}\nutc_time = true\naction = \"accept\"\n",
                i + 1
            ));
        }
        let dir = ScratchDir::with_files("time-fw4-plan", &[("edgenetd.toml", &config)]);
        let (text, _) = planned_policy_nft(&dir);
        for (i, (_, expected)) in rules.iter().enumerate() {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("comment \"rule time-rule-{} ", i + 1)))
                .unwrap_or_else(|| panic!("no rule time-rule-{}:\n{text}", i + 1));
            assert!(line.contains(expected), "time-rule-{}: `{expected}` not in `{line}`", i + 1);
        }
    }
}
