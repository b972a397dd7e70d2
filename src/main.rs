//! The `edgenetd` command: run, check, status, plan, cleanup.

use std::path::PathBuf;
use std::process::ExitCode;

use edgenetd::{config, daemon, logging, status};

const DEFAULT_CONFIG: &str = "/etc/edgenetd/edgenetd.toml";
const DEFAULT_URL: &str = "http://127.0.0.1:9750";

const USAGE: &str = "\
edgenetd — firewall, service load-balancing and routes for edge routers, from TOML

USAGE:
    edgenetd run     [--config PATH] [--netns NAME] [--log-level LEVEL]
    edgenetd check   [--config PATH]
    edgenetd plan    [--config PATH]
    edgenetd cleanup [--config PATH]
    edgenetd status  [--url URL]
    edgenetd --version | --help

VERBS:
    run       keep the kernel in line with the config until SIGTERM (SIGHUP reloads)
    check     validate the config; exit 0, or 1 listing every problem with file:line:col
    plan      print what a sync would change in the running kernel, changing nothing
    cleanup   remove exactly what edgenetd owns (its nftables tables, routes and rules
              carrying its route protocol)
    status    show a running daemon's health (reads URL/healthz)

OPTIONS:
    --config PATH      main config file; conf.d/*.toml beside it is merged after it
                       [default: /etc/edgenetd/edgenetd.toml]
    --netns NAME       program the kernel inside `ip netns` NAME; HTTP stays where edgenetd
                       was started (demos, tests, routers that live in a namespace)
    --log-level LEVEL  error, warn, info, debug, trace [default: info, or $EDGENETD_LOG]
    --url URL          daemon base URL for status [default: http://127.0.0.1:9750]
";

/// Parsed command line.
struct Cli {
    verb: String,
    config: PathBuf,
    netns: Option<String>,
    log_level: Option<String>,
    url: String,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut cli = Cli {
        verb: String::new(),
        config: PathBuf::from(DEFAULT_CONFIG),
        netns: None,
        log_level: None,
        url: DEFAULT_URL.to_string(),
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
            "--config" | "-c" => cli.config = PathBuf::from(value("--config")?),
            "--netns" => cli.netns = Some(value("--netns")?),
            "--log-level" => cli.log_level = Some(value("--log-level")?),
            "--url" => cli.url = value("--url")?,
            "--version" | "-V" => cli.verb = "version".into(),
            "--help" | "-h" | "help" => cli.verb = "help".into(),
            verb if !verb.starts_with('-') && cli.verb.is_empty() => cli.verb = verb.to_string(),
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    if cli.verb.is_empty() {
        return Err("missing verb: run, check, plan, cleanup or status".into());
    }
    Ok(cli)
}

fn main() -> ExitCode {
    let cli = match parse_args(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgenetd: {e}\n\n{USAGE}");
            return ExitCode::from(2);
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
            return ExitCode::from(2);
        }
    };
    if let Err(e) = logging::init(level) {
        eprintln!("edgenetd: {e}");
        return ExitCode::from(2);
    }
    match cli.verb.as_str() {
        "help" => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        "version" => {
            println!("edgenetd {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        "run" => daemon::run(daemon::RunOptions {
            config: cli.config,
            netns: cli.netns,
        }),
        "check" => check(&cli.config),
        "status" => status_cmd(&cli.url),
        "plan" | "cleanup" => edgenetd::cli::run_verb(&cli.verb, &cli.config),
        other => {
            eprintln!("edgenetd: unknown verb `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn check(path: &std::path::Path) -> ExitCode {
    match config::load(path) {
        Ok(state) => {
            let files: Vec<String> = state
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            println!("{}: ok ({})", path.display(), files.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            eprintln!("{}: {} problem(s)", path.display(), e.count);
            ExitCode::from(1)
        }
    }
}

fn status_cmd(base: &str) -> ExitCode {
    let url = format!("{}/healthz", base.trim_end_matches('/'));
    match status::http_get(&url) {
        Ok((code, body)) => match serde_json::from_str(&body) {
            Ok(doc) => {
                print!("{}", status::render(&doc));
                if code == 200 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(e) => {
                eprintln!(
                    "edgenetd: {url} answered {code} with something that is not /healthz JSON: {e}"
                );
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("edgenetd: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        parse_args(args.iter().map(|s| s.to_string()))
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
            (cli.verb.as_str(), cli.config.to_str()),
            ("run", Some("/tmp/a.toml"))
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
}
