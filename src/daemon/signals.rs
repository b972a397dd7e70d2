//! SIGHUP, SIGTERM and SIGINT, delivered to the executor through a channel.

/// What a signal asks of the daemon.
pub enum Signal {
    /// SIGHUP: load the configuration again.
    Reload,
    /// SIGTERM or SIGINT (named): stop.
    Stop(&'static str),
}

/// The signals, read on a thread of their own and handed over in order.
pub struct Signals(async_channel::Receiver<Signal>);

impl Signals {
    /// Installs the handlers; from now on these signals no longer kill the process.
    pub fn install() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGTERM, SIGINT])?;
        let (tx, rx) = async_channel::unbounded();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let s = match sig {
                        SIGHUP => Signal::Reload,
                        SIGTERM => Signal::Stop("SIGTERM"),
                        _ => Signal::Stop("SIGINT"),
                    };
                    if tx.send_blocking(s).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Signals(rx))
    }

    /// The next signal; a stop if the signal thread is gone.
    pub async fn next(&self) -> Signal {
        self.0
            .recv()
            .await
            .unwrap_or(Signal::Stop("signal thread ended"))
    }
}
