//! This client's own channel (see the module docs of `waiting`): what a notice there
//! is handed to, and its subscription.

use fred::clients::SubscriberClient;

/// What a message on a client's own channel is handed to: the message's bytes.
pub(crate) type NoticeHandler = Box<dyn Fn(&[u8]) + Send + Sync>;

/// A client's own channel and its handler.
pub(super) struct Notices {
    channel: String,
    handler: NoticeHandler,
}

impl Notices {
    /// Notices on `channel`, each handed to `handler`.
    pub(super) fn new(channel: String, handler: NoticeHandler) -> Self {
        Self { channel, handler }
    }

    /// The client's own channel.
    pub(super) fn channel(&self) -> &str {
        &self.channel
    }

    /// Hands the notice `message` to the handler.
    pub(super) fn hand_on(&self, message: &[u8]) {
        (self.handler)(message);
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// Subscribes `subscriber` to the channel of `notices` (if the client listens), once
/// the returned future runs. A subscription that fails is logged, and notices are
/// missed until the next reconnection subscribes again (a holder then hears at its next
/// renewal, as without them).
pub(super) fn subscribe(
    subscriber: SubscriberClient,
    notices: Option<&Notices>,
) -> impl Future<Output = ()> + Send + 'static {
    let channel = notices.map(|notices| notices.channel.clone());
    async move {
        let Some(channel) = channel else {
            return;
        };
        if let Err(error) = super::shards::subscribe_plain(&subscriber, &channel).await {
            tracing::debug!(%error, %channel, "could not subscribe the client's own channel");
        }
    }
}
