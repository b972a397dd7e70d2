//! Stopping long-lived tasks: each waits on its own work OR shutdown, shutdown first.

use futures_lite::future;

/// Closed (every sender dropped) when the daemon shuts down; each task holds a clone.
pub type Shutdown = async_channel::Receiver<()>;

/// Runs `work` unless shutdown comes first; `None` means: stop now.
pub async fn unless_shutdown<T>(shutdown: &Shutdown, work: impl Future<Output = T>) -> Option<T> {
    future::or(
        async {
            let _ = shutdown.recv().await;
            None
        },
        async { Some(work.await) },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_until_shutdown_then_stops() {
        let (tx, shutdown) = async_channel::bounded::<()>(1);
        assert_eq!(
            smol::block_on(unless_shutdown(&shutdown, async { 7 })),
            Some(7)
        );
        drop(tx);
        assert_eq!(
            smol::block_on(unless_shutdown(&shutdown, future::pending::<u8>())),
            None
        );
    }
}
