//! Closing fred connections without waiting on one that is gone.

use fred::interfaces::ClientLike;

/// Who closes a connection: holdlock, which opened it, or the application, which lent
/// it (see `LockClientBuilder::fred_clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Opened by holdlock: closed at shutdown.
    Opened,
    /// The application's: left open at shutdown.
    Lent,
}

/// Closes `client` (see [`close`]) if holdlock opened it.
pub(crate) async fn close_if_opened(client: &impl ClientLike, ownership: Ownership) {
    if ownership == Ownership::Opened {
        close(client).await;
    }
}

/// Closes one of the client's connections with `QUIT`, waiting for the reply only while
/// the client is connected. A client that is not (Redis went away and fred is
/// reconnecting) has nobody to say goodbye to, and its `QUIT` may never be answered:
/// fred holds it until a reconnection succeeds, or leaves it in the channel of a router
/// that the same `QUIT` has just stopped; either way `quit()` would wait out the whole
/// command timeout (the connect timeout). So it is only sent: the first poll of `quit()`
/// marks the client as closing, stops its reconnection loop and sends the command,
/// before it waits for anything.
pub(crate) async fn close(client: &impl ClientLike) {
    let quit = client.quit();
    if client.is_connected() {
        let _ = quit.await;
    } else {
        let _ = futures::FutureExt::now_or_never(quit);
    }
}
