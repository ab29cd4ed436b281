//! Where a transport takes the messages to send: one cloneable, thread-safe
//! handle whatever the transport (a stdio writer thread, an HTTP response's
//! event stream), so method handling never knows which it talks through.

use std::sync::Arc;

use super::jsonrpc::Message;

/// A place to send messages; see the [module documentation](self).
#[derive(Clone)]
pub struct Outbox(Arc<dyn Fn(Message) -> bool + Send + Sync>);

impl Outbox {
    /// Messages go to `send`, which says whether the transport took them.
    pub fn new(send: Arc<dyn Fn(Message) -> bool + Send + Sync>) -> Self {
        Self(send)
    }

    /// An outbox whose transport is gone: it takes nothing.
    pub fn closed() -> Self {
        Self(Arc::new(|_| false))
    }

    /// Sends `message`; false when the transport is gone.
    pub fn send(&self, message: Message) -> bool {
        (self.0)(message)
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outbox")
    }
}
