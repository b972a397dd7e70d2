//! The `edgenetd` command line: the verbs, parsed once into [`Verb`], and what each does.
//!
//! Exit codes (the README lists the same): 0 success; 1 the config is invalid, an operation
//! failed, or the daemon is not live; 2 a usage error; 3 `status` could not get an answer
//! from the daemon (unreachable, or not /healthz JSON), or `apply`/`confirm` could not reach
//! its control socket.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::control::instance::{self, Instance};
use crate::control::protocol::{Request, Target};
use crate::daemon::registry::{BUILTIN, BuiltinController, VerbFuture};
use crate::{config, control, daemon, logging, status};

pub mod flags;
pub mod man;

/// The main config file when `--config` is not given (the packaged daemon's).
pub const DEFAULT_CONFIG: &str = instance::PACKAGED_CONFIG;
/// The daemon's base URL when `--url` is not given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:9750";

/// How `edgenetd` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Success,
    /// 1: invalid config, a failed operation, or a daemon that is not live.
    Failure,
    /// 2: the command line is wrong.
    Usage,
    /// 3: `status` got no /healthz answer, or `apply`/`confirm` no answer, from the daemon.
    Unreachable,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Unreachable => 3,
        })
    }
}

/// What edgenetd is, in one line (`--help`'s first line, the man page's NAME).
pub const ABOUT: &str = "firewall, service load-balancing and routes for edge routers, from TOML";

/// The usage text between the synopsis and the options: the verbs.
const USAGE_VERBS: &str = "\
VERBS:
    run       keep the kernel in line with the config until SIGTERM (SIGHUP reloads)
    check     validate the config; exit 0, or 1 listing every problem with file:line:col
    plan      print what a sync would change in the running kernel, changing nothing
    cleanup   remove exactly what edgenetd owns (its nftables tables, routes and rules
              carrying its route protocol)
    status    show a running daemon's health (reads URL/healthz)
    explain   which rule decides a packet: its DNAT, route, deciding rule (or default),
              SNAT and verdict, from the rules edgenetd would program; the router's own
              addresses are read from the kernel where the packet's interface exists
    apply     hand NEW to the running daemon: validated like a reload (with conf.d; every
              problem listed, nothing changed), the changes printed, then put in place of
              the main config and applied; with --confirm it is rolled back unless
              `edgenetd confirm` follows within DURATION (root or group edgenetd-admin);
              prints the daemon it changed (pid, main config, netns)
    confirm   keep the configuration a running daemon waits to have confirmed
";

/// The exit codes and what each means: `--help`'s EXIT CODES, the man page's EXIT STATUS.
pub const EXIT_CODES: [(u8, &str); 4] = [
    (0, "success"),
    (
        1,
        "invalid config, failed operation, or (status) a daemon that is not live",
    ),
    (2, "usage error"),
    (
        3,
        "(status) no answer from the daemon; (apply, confirm) none on its control socket",
    ),
];

/// The usage text (`--help`, and after every usage error); the synopsis and the options
/// from [`flags`].
pub fn usage() -> String {
    let codes: String = EXIT_CODES
        .iter()
        .map(|(code, meaning)| format!("    {code}  {meaning}\n"))
        .collect();
    format!(
        "edgenetd — {ABOUT}\n\nUSAGE:\n{}\n{USAGE_VERBS}\nOPTIONS:\n{}\nEXPLAIN OPTIONS:\n{}\nEXIT CODES:\n{codes}",
        flags::help_synopsis(),
        flags::help_section(flags::OPTIONS),
        flags::help_section(flags::EXPLAIN_OPTIONS)
    )
}

/// The first argument given to `explain` that is not a flag of [`flags`]' tables: explain's
/// parser must not take a flag `--help` and the man page do not show.
fn unlisted_explain_flag(args: &[String]) -> Option<&str> {
    args.iter()
        .map(|a| a.split_once('=').map_or(a.as_str(), |(flag, _)| flag))
        .find(|a| a.starts_with("--") && flags::find(a).is_none())
}

/// What `edgenetd` was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `run`: the daemon.
    Run,
    /// `check`: validate the config.
    Check,
    /// `plan`: what a sync would change.
    Plan,
    /// `cleanup`: remove what edgenetd owns.
    Cleanup,
    /// `status`: a running daemon's /healthz as a table.
    Status,
    /// `explain`: which rule decides a packet (its own flags, see `crate::explain`).
    Explain,
    /// `apply`: hand a new main config file to the running daemon.
    Apply,
    /// `confirm`: keep the configuration that waits for confirm.
    Confirm,
    /// `--version`.
    Version,
    /// `--help` or `help`.
    Help,
    /// `--generate man`: print the man page (for the package build; not in `--help`).
    GenerateMan,
}

impl Verb {
    /// The verbs a user types as a word, with that word.
    const WORDS: [(&'static str, Verb); 9] = [
        ("run", Verb::Run),
        ("check", Verb::Check),
        ("plan", Verb::Plan),
        ("cleanup", Verb::Cleanup),
        ("status", Verb::Status),
        ("explain", Verb::Explain),
        ("apply", Verb::Apply),
        ("confirm", Verb::Confirm),
        ("help", Verb::Help),
    ];

    /// The verb a word names.
    pub fn from_word(word: &str) -> Option<Verb> {
        Self::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, v)| *v)
    }

    /// The word that names the verb.
    pub fn word(self) -> &'static str {
        match self {
            Verb::Version => "version",
            Verb::GenerateMan => "generate",
            verb => Self::WORDS
                .iter()
                .find(|(_, v)| *v == verb)
                .map_or("help", |(w, _)| w),
        }
    }
}

/// The parsed command line.
#[derive(Debug)]
pub struct Cli {
    /// What to do.
    pub verb: Verb,
    /// `--config`.
    pub config: PathBuf,
    /// `--netns`.
    pub netns: Option<String>,
    /// `--log-level`, unparsed.
    pub log_level: Option<String>,
    /// `--url`.
    pub url: String,
    /// Whether `--config` was given (`apply` has no default file).
    pub config_given: bool,
    /// `--confirm`.
    pub confirm: Option<Duration>,
    /// `--control-socket` (`None`: the instance's own).
    pub control_socket: Option<PathBuf>,
    /// `--state-dir` (`None`: the instance's own).
    pub state_dir: Option<PathBuf>,
    /// `--target`: the main config of the daemon `apply` and `confirm` mean.
    pub target: Option<PathBuf>,
}

impl Cli {
    /// The daemon this command line is about: `run`'s own (`--config`, `--netns`), or the
    /// one `apply` and `confirm` mean (`--target`, `--netns`).
    pub fn instance(&self) -> Instance {
        let config = match self.verb {
            Verb::Apply | Verb::Confirm => {
                self.target.as_deref().unwrap_or(Path::new(DEFAULT_CONFIG))
            }
            _ => &self.config,
        };
        Instance::new(config, self.netns.as_deref())
    }

    /// The control socket: `--control-socket`, or the instance's own.
    pub fn control_socket(&self) -> PathBuf {
        self.control_socket
            .clone()
            .unwrap_or_else(|| self.instance().control_socket())
    }

    /// What `apply` and `confirm` tell the daemon about the one they mean.
    fn target(&self) -> Target {
        Target {
            config: self
                .target
                .as_deref()
                .map(|t| instance::canonical(t).display().to_string()),
            netns: self.netns.clone(),
        }
    }
}

/// Parses the arguments (without the program name).
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut verb = None;
    let mut cli = Cli {
        verb: Verb::Help,
        config: PathBuf::from(DEFAULT_CONFIG),
        netns: None,
        log_level: None,
        url: DEFAULT_URL.to_string(),
        config_given: false,
        confirm: None,
        control_socket: None,
        state_dir: None,
        target: None,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "--config" | "-c" => {
                cli.config = PathBuf::from(value("--config")?);
                cli.config_given = true;
            }
            "--confirm" => cli.confirm = Some(parse_confirm(&value("--confirm")?)?),
            "--control-socket" => {
                cli.control_socket = Some(PathBuf::from(value("--control-socket")?));
            }
            "--state-dir" => cli.state_dir = Some(PathBuf::from(value("--state-dir")?)),
            "--target" => cli.target = Some(PathBuf::from(value("--target")?)),
            "--netns" => cli.netns = Some(value("--netns")?),
            "--log-level" => cli.log_level = Some(value("--log-level")?),
            "--url" => cli.url = value("--url")?,
            "--version" | "-V" => verb = Some(Verb::Version),
            "--help" | "-h" | "help" => verb = Some(Verb::Help),
            // A maintainer's flag, left out of the tables: the package build's man page.
            "--generate" => match value("--generate")?.as_str() {
                "man" => verb = Some(Verb::GenerateMan),
                other => return Err(format!("--generate: `{other}` is not one of: man")),
            },
            word if !word.starts_with('-') && verb.is_none() => {
                verb = Some(Verb::from_word(word).ok_or_else(|| format!("unknown verb `{word}`"))?);
            }
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    cli.verb = verb.ok_or("missing verb: run, check, plan, cleanup or status")?;
    if cli.verb == Verb::Apply && !cli.config_given {
        return Err("apply needs --config NEW (the new main config file)".into());
    }
    if cli.target.is_some() && !matches!(cli.verb, Verb::Apply | Verb::Confirm) {
        return Err("--target is for apply and confirm (run's main config is --config)".into());
    }
    Ok(cli)
}

/// `--confirm`: a duration from one second to one day (a longer window is no safety net).
fn parse_confirm(text: &str) -> Result<Duration, String> {
    let d = config::parse_duration(text).map_err(|e| format!("--confirm: {e}"))?;
    if (Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&d) {
        Ok(d)
    } else {
        Err(format!("--confirm: {text} is not between 1s and 24h"))
    }
}

/// `edgenetd` with these arguments (without the program name).
pub fn main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.into_iter().collect();
    if args.first().map(String::as_str) == Some("explain") {
        if let Some(flag) = unlisted_explain_flag(&args[1..]) {
            eprintln!(
                "edgenetd: unexpected argument `{flag}`: not a flag of explain (src/cli/flags.rs)\n\n{}",
                usage()
            );
            return Exit::Usage.into();
        }
        return crate::explain::main(&args[1..], DEFAULT_CONFIG, &usage());
    }
    let cli = match parse_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgenetd: {e}\n\n{}", usage());
            return Exit::Usage.into();
        }
    };
    let level = match cli
        .log_level
        .as_deref()
        .map(logging::parse_level)
        .transpose()
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("edgenetd: {e}");
            return Exit::Usage.into();
        }
    };
    if let Err(e) = logging::init(level) {
        eprintln!("edgenetd: {e}");
        return Exit::Usage.into();
    }
    match cli.verb {
        Verb::Help => {
            print!("{}", usage());
            Exit::Success.into()
        }
        Verb::Version => {
            println!("edgenetd {}", env!("CARGO_PKG_VERSION"));
            Exit::Success.into()
        }
        Verb::GenerateMan => {
            print!("{}", man::page());
            Exit::Success.into()
        }
        Verb::Run => {
            let own = cli.instance();
            daemon::run(daemon::RunOptions {
                control_socket: cli.control_socket.unwrap_or_else(|| own.control_socket()),
                state_dir: cli.state_dir.unwrap_or_else(|| own.state_dir()),
                config: cli.config,
                netns: cli.netns,
            })
        }
        Verb::Check => check(&cli.config).into(),
        Verb::Status => status_cmd(&cli.url).into(),
        Verb::Plan => plan(&cli.config).into(),
        Verb::Apply => apply(&cli).into(),
        Verb::Confirm => ask_daemon(
            &cli.control_socket(),
            &Request::Confirm {
                target: cli.target(),
            },
        )
        .into(),
        Verb::Cleanup => each_controller(Verb::Cleanup, &cli.config).into(),
        // Only as a later word (`edgenetd --log-level x explain`): its flags come after it.
        Verb::Explain => {
            eprintln!(
                "edgenetd: `explain` must be the first argument\n\n{}",
                usage()
            );
            Exit::Usage.into()
        }
    }
}

fn check(path: &Path) -> Exit {
    match config::load(path).and_then(daemon::includes::vet) {
        Ok(state) => {
            let files: Vec<String> = state
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            println!("{}: ok ({})", path.display(), files.join(", "));
            Exit::Success
        }
        Err(e) => {
            eprintln!("{e}");
            eprintln!("{}: {} problem(s)", path.display(), e.count);
            Exit::Failure
        }
    }
}

fn status_cmd(base: &str) -> Exit {
    let url = format!("{}/healthz", base.trim_end_matches('/'));
    match status::http_get(&url) {
        Ok((code, body)) => match serde_json::from_str(&body) {
            Ok(doc) => {
                print!("{}", status::render(&doc));
                if code == 200 {
                    Exit::Success
                } else {
                    Exit::Failure
                }
            }
            Err(e) => {
                eprintln!(
                    "edgenetd: {url} answered {code} with something that is not /healthz JSON: {e}"
                );
                Exit::Unreachable
            }
        },
        Err(e) => {
            eprintln!("edgenetd: {e}");
            Exit::Unreachable
        }
    }
}

/// `plan`: every enabled controller's plan; fails if any plan failed.
fn plan(config_path: &Path) -> Exit {
    let desired = match config::load(config_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return Exit::Failure;
        }
    };
    let plan = smol::block_on(daemon::plan::plan_all(&desired));
    print!("{}", plan.text);
    for failure in &plan.failures {
        eprintln!("{failure}");
    }
    if plan.failures.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    }
}

/// `apply`: reads NEW and hands it to the daemon, which validates, plans and applies it.
fn apply(cli: &Cli) -> Exit {
    let new = &cli.config;
    let text = match config::text::read(new) {
        config::text::FileText::Text(t) => t,
        config::text::FileText::NotUtf8 { shown, at, byte } => {
            let before = &shown[..at];
            let line = before.matches('\n').count() + 1;
            let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
                .chars()
                .count()
                + 1;
            eprintln!(
                "edgenetd: {}:{line}:{column}: not UTF-8 text: invalid byte at offset {byte}; nothing was sent",
                new.display()
            );
            return Exit::Failure;
        }
        config::text::FileText::TooLarge { size, at_least } => {
            let why = config::limits::size_message(size, at_least, 0);
            eprintln!("edgenetd: {}: {why}; nothing was sent", new.display());
            return Exit::Failure;
        }
        config::text::FileText::Unreadable(why) => {
            eprintln!("edgenetd: {}: {why}", new.display());
            return Exit::Failure;
        }
    };
    let request = Request::Apply {
        shown_as: new.display().to_string(),
        text,
        confirm_ms: cli.confirm.map(|d| d.as_millis() as u64),
        target: cli.target(),
    };
    ask_daemon(&cli.control_socket(), &request)
}

/// Sends one request to the daemon's control socket and prints its answer, and which daemon
/// gave it.
fn ask_daemon(socket: &Path, request: &Request) -> Exit {
    let target = request.target();
    match control::client::request(socket, request) {
        Ok(response)
            if response.daemon.is_none() && (target.config.is_some() || target.netns.is_some()) =>
        {
            // An older daemon ignores the target: say that it was not checked.
            eprintln!(
                "edgenetd: warning: the daemon on {} did not say who it is (an older edgenetd): --target and --netns were not checked",
                socket.display()
            );
            finish(response, socket)
        }
        Ok(response) => finish(response, socket),
        Err(e) => {
            eprintln!("edgenetd: {e}");
            Exit::Unreachable
        }
    }
}

/// Prints a response and the daemon that gave it; the exit code it means.
fn finish(response: control::protocol::Response, socket: &Path) -> Exit {
    let daemon = match &response.daemon {
        Some(id) => format!("daemon: {id} (control socket {})", socket.display()),
        None => format!("daemon: the one on {}", socket.display()),
    };
    if response.ok {
        println!("{}{daemon}", response.text);
        Exit::Success
    } else {
        eprintln!("{}{daemon}", response.text);
        Exit::Failure
    }
}

/// `cleanup` on every built-in controller, in table order: prints each one's
/// output, reports each failure, and fails if any did.
fn each_controller(verb: Verb, config_path: &Path) -> Exit {
    let desired = match config::load(config_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return Exit::Failure;
        }
    };
    let mut failed = false;
    for controller in &BUILTIN {
        let Some(work) = one_shot(verb, controller, &desired) else {
            continue;
        };
        match smol::block_on(work) {
            Ok(text) => print!("{text}"),
            Err(e) => {
                failed = true;
                eprintln!("{}: {} failed: {e}", controller.name, verb.word());
            }
        }
    }
    if failed { Exit::Failure } else { Exit::Success }
}

/// The one-shot work of `verb` for one controller; `None` when it has none.
fn one_shot<'a>(
    verb: Verb,
    controller: &BuiltinController,
    desired: &'a config::DesiredState,
) -> Option<VerbFuture<'a>> {
    match verb {
        // `cleanup` removes what any controller may have left, enabled or not.
        Verb::Cleanup => Some((controller.cleanup)(&desired.daemon)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        parse_args(args.iter().map(|s| s.to_string()))
    }

    /// A value each flag's parser accepts.
    fn sample(flag: &flags::Flag) -> Option<&'static str> {
        flag.value.map(|_| match flag.long {
            "--confirm" => "30s",
            "--from" | "--to" => "10.0.0.1",
            "--sport" | "--dport" | "--mark" => "1",
            "--proto" => "tcp",
            "--state" => "new",
            "--addresses" => "x=10.0.0.1/24",
            _ => "x",
        })
    }

    #[test]
    fn every_flag_of_the_tables_is_one_its_parser_knows() {
        let unknown = |e: &str| e.contains("unexpected argument");
        for flag in flags::OPTIONS {
            let verb = match flag.long {
                "--confirm" | "--target" => "apply",
                _ => "run",
            };
            let mut args = vec![verb, "--config", "c.toml", flag.long];
            args.extend(sample(flag));
            if let Err(e) = parse(&args) {
                assert!(!unknown(&e), "{}: {e}", flag.long);
            }
        }
        for flag in flags::EXPLAIN_OPTIONS {
            let mut args = vec![flag.long.to_string()];
            args.extend(sample(flag).map(str::to_string));
            if let Err(e) = crate::explain::query::parse(&args, "c.toml") {
                assert!(!unknown(&e), "{}: {e}", flag.long);
            }
        }
        // The check can fail: a name no parser has.
        assert!(parse(&["run", "--no-such-flag"]).is_err_and(|e| unknown(&e)));
    }

    #[test]
    fn flags_take_values_inline_or_separately_and_default_sensibly() {
        let cli = parse(&[
            "run",
            "--config=/tmp/a.toml",
            "--netns",
            "demo",
            "--log-level",
            "debug",
        ])
        .unwrap();
        assert_eq!(
            (cli.verb, cli.config.to_str()),
            (Verb::Run, Some("/tmp/a.toml"))
        );
        assert_eq!(
            (cli.netns.as_deref(), cli.log_level.as_deref()),
            (Some("demo"), Some("debug"))
        );
        let cli = parse(&["status"]).unwrap();
        assert_eq!(
            (cli.config.to_str(), cli.url.as_str()),
            (Some(DEFAULT_CONFIG), DEFAULT_URL)
        );
    }

    #[test]
    fn mistakes_are_explained() {
        assert_eq!(
            parse(&[]).err().unwrap(),
            "missing verb: run, check, plan, cleanup or status"
        );
        assert_eq!(
            parse(&["check", "--config"]).err().unwrap(),
            "--config needs a value"
        );
        assert_eq!(
            parse(&["check", "--bogus"]).err().unwrap(),
            "unexpected argument `--bogus`"
        );
        assert_eq!(
            parse(&["check", "run"]).err().unwrap(),
            "unexpected argument `run`"
        );
    }

    /// An unknown word used to reach a `_ => cleanup` arm in the plan/cleanup dispatch: a
    /// destructive default. Now it never gets past parsing.
    #[test]
    fn an_unknown_verb_is_a_usage_error_never_a_default_action() {
        assert_eq!(
            parse(&["frobnicate"]).err().unwrap(),
            "unknown verb `frobnicate`"
        );
        assert_eq!(parse(&["cleanup"]).unwrap().verb, Verb::Cleanup);
    }

    #[test]
    fn apply_needs_a_file_and_a_sane_confirm_window() {
        let cli = parse(&["apply", "--config", "/tmp/new.toml", "--confirm", "30s"]).unwrap();
        assert_eq!(
            (cli.verb, cli.confirm),
            (Verb::Apply, Some(Duration::from_secs(30)))
        );
        assert_eq!(cli.control_socket(), Path::new(control::DEFAULT_SOCKET));
        assert!(parse(&["apply"]).unwrap_err().contains("--config NEW"));
        assert!(parse(&["apply", "-c", "x", "--confirm", "0s"]).is_err());
        assert!(parse(&["apply", "-c", "x", "--confirm", "2d"]).is_err());
        let cli = parse(&["confirm", "--control-socket", "/tmp/c.sock"]).unwrap();
        assert_eq!(cli.control_socket(), Path::new("/tmp/c.sock"));
    }

    /// A second daemon (in a namespace, or a test one on its own file) shared the packaged
    /// daemon's socket, and `apply` from a shell changed the first daemon instead.
    #[test]
    fn apply_and_confirm_reach_the_daemon_run_with_the_same_config_and_netns() {
        let run = parse(&["run", "-c", "/srv/r1/edgenetd.toml", "--netns", "r1"]).unwrap();
        let apply = parse(&[
            "apply",
            "-c",
            "/tmp/new.toml",
            "--target",
            "/srv/r1/edgenetd.toml",
            "--netns",
            "r1",
        ])
        .unwrap();
        assert_eq!(apply.control_socket(), run.control_socket());
        assert_ne!(run.control_socket(), Path::new(control::DEFAULT_SOCKET));
        let confirm = parse(&["confirm", "--netns", "r1"]).unwrap();
        let run_default_in_r1 = parse(&["run", "--netns", "r1"]).unwrap();
        assert_eq!(confirm.control_socket(), run_default_in_r1.control_socket());
        let packaged = parse(&["run"]).unwrap();
        assert_eq!(
            packaged.control_socket(),
            Path::new(control::DEFAULT_SOCKET)
        );
        assert_eq!(
            packaged.instance().state_dir(),
            Path::new(control::DEFAULT_STATE_DIR)
        );
        assert_eq!(
            apply.target().config.as_deref(),
            Some("/srv/r1/edgenetd.toml")
        );
        assert!(parse(&["run", "--target", "/x.toml"]).is_err());
    }

    #[test]
    fn the_synopsis_names_every_verb_and_generate_man_is_the_only_generator() {
        let words: Vec<&str> = Verb::WORDS
            .iter()
            .map(|(w, _)| *w)
            .filter(|w| *w != "help")
            .collect();
        let lines: Vec<&str> = flags::SYNOPSIS
            .iter()
            .map(|u| u.verb)
            .filter(|v| !v.is_empty())
            .collect();
        assert_eq!(lines, words);
        assert_eq!(
            parse(&["--generate", "man"]).unwrap().verb,
            Verb::GenerateMan
        );
        assert_eq!(
            parse(&["--generate", "html"]).unwrap_err(),
            "--generate: `html` is not one of: man"
        );
        assert!(!usage().contains("--generate"));
    }

    /// Regression (issue 22): explain's parser took `--dscp` while the flag table, and so
    /// `--help` and the man page, could lack it.
    #[test]
    fn explain_refuses_a_flag_that_is_not_in_the_tables() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            unlisted_explain_flag(&args(&["--in", "x", "--no-such=1", "--json"])),
            Some("--no-such")
        );
        assert_eq!(
            unlisted_explain_flag(&args(&["--mark=1", "--in", "x", "-c", "y"])),
            None
        );
    }

    #[test]
    fn every_verb_has_one_word_and_the_flags_win() {
        for (word, verb) in Verb::WORDS {
            assert_eq!((Verb::from_word(word), verb.word()), (Some(verb), word));
        }
        assert_eq!(parse(&["run", "--version"]).unwrap().verb, Verb::Version);
        assert_eq!(parse(&["-h"]).unwrap().verb, Verb::Help);
    }
}
