//! Logging to stderr, the way journald wants it.
//!
//! Under systemd (`JOURNAL_STREAM` set) each line starts with a syslog priority prefix
//! (`<3>` error … `<7>` debug) that journald turns into the entry's priority, and carries no
//! timestamp (journald adds its own). Elsewhere lines carry a level word instead.
//! The level comes from `--log-level` or `EDGENETD_LOG` (error, warn, info, debug, trace).

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

struct StderrLogger {
    journald: bool,
    level: LevelFilter,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && metadata.target().starts_with("edgenetd")
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = if self.journald {
            writeln!(err, "<{}>{}", priority(record.level()), record.args())
        } else {
            writeln!(err, "{:<5} {}", record.level(), record.args())
        };
    }

    fn flush(&self) {}
}

fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// Parses a level name; the error lists the accepted names.
pub fn parse_level(text: &str) -> Result<LevelFilter, String> {
    text.parse::<LevelFilter>().map_err(|_| {
        format!("invalid log level `{text}`: expected one of error, warn, info, debug, trace, off")
    })
}

/// Installs the logger; `level` wins over `EDGENETD_LOG`, default `info`.
pub fn init(level: Option<LevelFilter>) -> Result<(), String> {
    let level = match level {
        Some(l) => l,
        None => match std::env::var("EDGENETD_LOG") {
            Ok(v) if !v.is_empty() => parse_level(&v)?,
            _ => LevelFilter::Info,
        },
    };
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    log::set_boxed_logger(Box::new(StderrLogger { journald, level })).map_err(|e| e.to_string())?;
    log::set_max_level(level);
    Ok(())
}
