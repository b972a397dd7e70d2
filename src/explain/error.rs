//! Why `explain` could not explain.

/// Errors of `edgenetd explain`.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The IR holds something the interpreter does not know: it says so instead of guessing
    /// (the kernel still evaluates it; `explain` cannot tell what it does).
    #[error("unsupported {0}: explain cannot evaluate it, so it cannot say what the kernel does")]
    Unsupported(String),
    /// A rule jumps to a chain, or looks up a set, that the table lacks.
    #[error("table {table} has no {what} {name}")]
    Missing {
        /// The table.
        table: String,
        /// `chain` or `set`.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// Jumps nest deeper than the kernel allows.
    #[error("jumps nest deeper than {0} chains in table {1}")]
    TooDeep(usize, String),
    /// A rule compares the time (`meta hour`, `meta day`, `meta time`) and the query gave
    /// none: the verdict depends on when the packet comes.
    #[error(
        "a rule matches on the time ({0}): its verdict depends on when the packet comes; give --at \"YYYY-MM-DDTHH:MM[:SS]\" (local time, or UTC with a trailing Z)"
    )]
    NeedsTime(String),
    /// The config does not load.
    #[error("{0}")]
    Config(String),
}
