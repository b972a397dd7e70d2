//! The `[[route]]` fast path against the whole-file parse (see `differential`): hand-written
//! layouts first, then a deterministic random differential, a fuzzer that runs in
//! `cargo test` (`fuzz/` runs the same check under cargo-fuzz).

use super::differential::{Recorder, observe, same};
use super::limits::ParseBudget;
use super::load::SINK_KEY;
use super::split;

const ROUTES: &str = "[[route]]\nto = \"10.0.0.0/24\"\nvia = \"192.0.2.1\"\n\n[[route]] # second\nto = \"10.0.1.0/24\"\nmetric = 0x1F\n[[route.nexthops]]\nvia = \"192.0.2.2\"\n[route.extra]\nq = 1.5e3\n";

#[test]
fn a_route_tail_after_other_sections_takes_the_fast_path() {
    let text = format!("[daemon]\nlisten = \"127.0.0.1:9\"\n\n{ROUTES}");
    assert_eq!(same(&[&text]), 1);
    assert_eq!(same(&[ROUTES]), 1);
    let head_routes = format!("[[route]]\nto = \"10.9.0.0/16\"\ndev = \"x\"\n[daemon]\n{ROUTES}");
    assert_eq!(same(&[&head_routes]), 1);
}

#[test]
fn cuts_inside_strings_or_arrays_fall_back_to_the_whole_parse() {
    for text in [
        format!("s = \"\"\"\n{ROUTES}\"\"\"\n"),
        format!("s = '''\n{ROUTES}'''\n"),
        format!("{ROUTES}[[route]]\ns = \"\"\"\n[[route]]\nto = \"x\"\n\"\"\"\n"),
        format!("x = [\n{ROUTES}]\n"),
        format!("[[route]]\nx = [\n[[route]]\n]\n{ROUTES}"),
    ] {
        same(&[&text]);
    }
}

#[test]
fn conflicting_definitions_give_the_whole_parse_errors() {
    for text in [
        format!("route = [{{ to = \"a\" }}]\n{ROUTES}"),
        format!("route = []\n{ROUTES}"),
        format!("route.a = 1\n{ROUTES}"),
        format!("[route]\na = 1\n{ROUTES}"),
        format!("{ROUTES}[route]\na = 1\n"),
        format!("{ROUTES}[[route]]\nto = \"a\"\nto = \"b\"\n"),
        format!("{ROUTES}[[route]]\nto = \n[[route]]\nto = \"c\"\n"),
        format!("{ROUTES}[[route]]\n[route]\n"),
    ] {
        assert_eq!(same(&[&text]), 0, "{text}");
    }
}

#[test]
fn odd_layouts_and_several_files() {
    same(&["[[route]]\r\nto = \"a\"\r\n  [[route]]\t# c\r\nto = \"b\""]);
    same(&["[[route]]\n[[route]]\n[[route]]\n"]);
    assert_eq!(same(&[&format!("{ROUTES}[[route]]\n[[route.extra]]\n")]), 1);
    same(&["[[bogus]]\nx = 1\n[[bogus]]\nx = 2\n[[daemon]]\n[[daemon]]\n"]);
    assert_eq!(same(&[ROUTES, ROUTES, "[[route]]\nto = \"z\"\n"]), 3);
    same(&[ROUTES, "route = 5\n", ROUTES]);
    same(&["route = 5\n", ROUTES]);
    same(&[
        "route = [1, { to = \"10.1.0.0/16\", dev = \"x\" }]\n",
        ROUTES,
    ]);
    same(&[&format!("[[ route ]]\nto = \"q\"\n{ROUTES}")]);
    same(&[&format!(
        "[[\"route\"]]\nto = \"q\"\n{ROUTES}[[ route ]]\nto = \"r\"\n"
    )]);
}

/// A small deterministic PRNG (splitmix64): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'p>(&mut self, items: &[&'p str]) -> &'p str {
        items[self.below(items.len())]
    }
}

/// Lines a route block may hold, each valid TOML on its own (some not valid routes).
const ROUTE_LINES: &[&str] = &[
    "via = \"192.0.2.1\"\n",
    "dev = \"eth0\"\n",
    "metric = 0\n",
    "metric = 1024\n",
    "metric = -1\n",
    "table = \"main\"\n",
    "type = \"blackhole\"\n",
    "# a comment\n",
    "# [[route]]\n",
    "\n",
    "vai = 1\n",
    "nexthops = [{ via = \"192.0.2.9\" }, { dev = \"eth1\" }]\n",
    "[[route.nexthops]]\nvia = \"192.0.2.3\"\n",
    "[route.extra]\nq = 1\n",
    "note = \"\"\"\n[[route]]\nto = \"10.99.0.0/16\"\n\"\"\"\n",
    "note = '''\n[[route]]\n'''\n",
    "x = [\n1,\n]\n",
    "dev = \"a\\u0000b\"\n",
    "onlink = true\n",
];

/// Lines that break a block or the file (or the block's claim to be only a route).
const BROKEN_LINES: &[&str] = &[
    "to = \"10.0.0.1/8\"\n",
    "x = [\n[[route]]\n]\n",
    "to = \n",
    "s = '''\n",
    "s = \"\"\"\n",
    "\"\"\"\n",
    "x = [\n",
    "]\n",
    "=\n",
    "[\n",
    "[route]\n",
    "[daemon]\nlisten = \"127.0.0.1:9\"\n",
];

/// Other sections a file may hold.
const SECTIONS: &[&str] = &[
    "[daemon]\nlisten = \"127.0.0.1:9\"\n",
    "[daemon]\nnote = \"\"\"\n[[route]]\nto = \"10.0.0.0/8\"\n\"\"\"\n",
    "[[service]]\nname = \"s\"\naddress = \"192.0.2.10\"\nport = 80\n",
    "[policy]\nforward = \"drop\"\n",
    "[[policy.forward]]\nfrom = \"a\"\nto = \"b\"\n",
    "[[route_rule]]\npriority = 5\nfwmark = \"16\"\ntable = 100\n",
    "[[route_rule]]\npriority = 5\nfwmark = \"0x10/0xffffffff\"\ntable = 100\n",
    "route = 5\n",
    "route = []\n",
    "[route]\na = 1\n",
    "route.a = 1\n",
    "[route.late]\na = 1\n",
    "[[ route ]] # spaced\nto = \"10.200.0.0/16\"\ndev = \"x\"\n",
    "[[\"route\"]]\nto = \"10.201.0.0/16\"\ndev = \"x\"\n",
    "[unknown]\n",
];

fn route_block(rng: &mut Rng, i: usize) -> String {
    let header = rng.pick(&[
        "[[route]]\n",
        "[[route]]\n",
        "[[route]] # r\n",
        "  [[ route ]]\t\n",
    ]);
    let to = match rng.below(4) {
        0 => format!("to = \"2001:db8:{:x}::/48\"\n", i % 7),
        _ => format!("to = \"10.{}.{}.0/24\"\n", i / 256 % 256, i % 256 % 5),
    };
    let mut out = format!("{header}{to}");
    for _ in 0..rng.below(3) {
        out.push_str(rng.pick(ROUTE_LINES));
    }
    if rng.below(2) == 0 {
        out.push_str("via = \"192.0.2.1\"\n");
    }
    out
}

fn random_file(rng: &mut Rng) -> String {
    let mut out = String::new();
    let broken = rng.below(3) == 0;
    for i in 0..rng.below(24) {
        match rng.below(40) {
            38.. if broken => out.push_str(rng.pick(BROKEN_LINES)),
            32.. => out.push_str(rng.pick(SECTIONS)),
            _ => out.push_str(&route_block(rng, i)),
        }
    }
    if rng.below(8) == 0 {
        out = out.replace('\n', "\r\n");
    }
    if rng.below(8) == 0 {
        out.pop();
    }
    out
}

#[test]
fn random_files_give_what_the_whole_file_parse_gives() {
    let mut rng = Rng(0x5eed_ed9e_7d00);
    let mut fast = 0;
    let cases = 1500;
    for _ in 0..cases {
        let files: Vec<String> = (0..1 + rng.below(3))
            .map(|_| random_file(&mut rng))
            .collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        fast += same(&files);
    }
    // The fast path must be taken often enough for the comparison to mean something.
    assert!(fast > cases / 2, "only {fast} files took the fast path");
}

#[test]
fn a_big_route_file_takes_the_fast_path_with_the_default_threshold() {
    let mut text = String::from("[daemon]\nlisten = \"127.0.0.1:9\"\n");
    for i in 0..300 {
        text.push_str(&format!(
            "[[route]]\nto = \"10.0.{i}.0/24\"\nvia = \"192.0.2.1\"\n"
        ));
    }
    let mut sink = Recorder::default();
    assert!(
        split::parse(
            &text,
            0,
            SINK_KEY,
            split::MIN_BLOCKS,
            &mut ParseBudget::default(),
            &mut sink
        )
        .is_some()
    );
    assert_eq!(sink.0.len(), 300);
    assert_eq!(
        observe(&[&text], split::MIN_BLOCKS),
        observe(&[&text], usize::MAX)
    );
}
