//! [`Runtime`]: the private tokio runtime of a blocking client, and the one place where
//! the blocking API waits for a future.

use std::future::Future;
use std::time::Duration;

use crate::error::{LockError, Result};
use crate::owner::{as_thread, current_thread_owner};

/// How long a closing runtime waits for its worker thread to stop.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// A multi-thread tokio runtime with one worker thread (`holdlock-blocking`): it runs
/// the client's connections, watchdogs and background releases while the calling
/// threads block.
#[derive(Debug)]
pub(crate) struct Runtime {
    /// `None` only once dropped.
    tokio: Option<tokio::runtime::Runtime>,
}

impl Runtime {
    /// Starts the worker thread.
    pub(crate) fn start() -> Result<Self> {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("holdlock-blocking")
            .enable_all()
            .build()
            // Only the OS refusing a thread or a timer fails here: an I/O error, which
            // is what fred reports for connections it cannot open either.
            .map_err(|error| LockError::Redis(error.into()))?;
        Ok(Self { tokio: Some(tokio) })
    }

    /// Runs `future` to its end, blocking the calling thread, as the calling thread's
    /// owner (`<client-uuid>:thread-<n>`): the only function of the blocking API that
    /// waits for a future. The future is polled on the calling thread; what it spawns
    /// (a release in the background, a watchdog) runs on the worker.
    ///
    /// # Errors
    /// [`LockError::BlockingInRuntime`] where a tokio runtime is current: waiting there
    /// would stall that runtime (and tokio forbids it).
    pub(crate) fn block<F: Future>(&self, future: F) -> Result<F::Output> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(LockError::BlockingInRuntime);
        }
        let tokio = self.tokio.as_ref().ok_or(LockError::Shutdown)?;
        let thread = current_thread_owner();
        Ok(tokio.handle().block_on(as_thread(thread, future)))
    }
}

impl Runtime {
    /// Shuts `client` down (its releases in flight are given up to the connect timeout
    /// to land) and then stops the runtime: the end of a blocking client, once its last
    /// clone and guard are gone. Where a tokio runtime is current, and waiting is not
    /// allowed, a thread of its own does it.
    pub(crate) fn close(&mut self, client: crate::LockClient) {
        let Some(tokio) = self.tokio.take() else {
            return;
        };
        let runtime = Runtime { tokio: Some(tokio) };
        let closing = move || {
            let _ = runtime.block(client.shutdown());
            drop(runtime);
        };
        if tokio::runtime::Handle::try_current().is_err() {
            closing();
        } else {
            // If the thread cannot start, the closure is dropped: the runtime stops
            // without waiting, and what is still held expires within its lease.
            let _ = std::thread::Builder::new()
                .name("holdlock-closing".into())
                .spawn(closing);
        }
    }
}

impl Drop for Runtime {
    /// Stops the worker thread; inside another runtime (where waiting is forbidden)
    /// without waiting for it.
    fn drop(&mut self) {
        let Some(tokio) = self.tokio.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio.shutdown_background();
        } else {
            tokio.shutdown_timeout(STOP_WAIT);
        }
    }
}
