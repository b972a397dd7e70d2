//! SIGHUP, SIGTERM and SIGINT, read by the executor itself.
//!
//! The handlers write to a pipe the reactor already polls (async-signal), so a signal costs
//! no thread of its own and no wake-up while none arrives.

use futures_lite::StreamExt;

/// What a signal asks of the daemon.
pub enum Signal {
    /// SIGHUP: load the configuration again.
    Reload,
    /// SIGTERM or SIGINT (named): stop.
    Stop(&'static str),
}

/// The signals, handed over in order.
pub struct Signals(async_signal::Signals);

impl Signals {
    /// Installs the handlers; from now on these signals no longer kill the process.
    pub fn install() -> std::io::Result<Signals> {
        use async_signal::Signal::{Hup, Int, Term};
        async_signal::Signals::new([Hup, Term, Int]).map(Signals)
    }

    /// The next signal; a stop if the signal pipe failed.
    pub async fn next(&self) -> Signal {
        use async_signal::Signal::{Hup, Term};
        let mut signals = &self.0;
        match signals.next().await {
            Some(Ok(Hup)) => Signal::Reload,
            Some(Ok(Term)) => Signal::Stop("SIGTERM"),
            Some(Ok(_)) => Signal::Stop("SIGINT"),
            Some(Err(_)) | None => Signal::Stop("signal pipe failed"),
        }
    }
}
