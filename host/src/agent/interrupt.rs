//! The user's request to stop (Ctrl-C), shared between whoever notices it
//! and the turn that has to wind down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A flag the front end raises and the running turn waits on.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    raised: AtomicBool,
    notify: Notify,
}

impl Interrupt {
    /// A flag not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag and wakes everyone waiting on it.
    pub fn raise(&self) {
        self.inner.raised.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether the flag is raised.
    pub fn is_raised(&self) -> bool {
        self.inner.raised.load(Ordering::SeqCst)
    }

    /// Lowers the flag, before a new turn starts.
    pub fn clear(&self) {
        self.inner.raised.store(false, Ordering::SeqCst);
    }

    /// Resolves once the flag is raised (at once if it already is).
    pub async fn raised(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_ends_when_raised_even_if_raised_before() {
        let interrupt = Interrupt::new();
        let waiter = {
            let interrupt = interrupt.clone();
            tokio::spawn(async move { interrupt.raised().await })
        };
        tokio::task::yield_now().await;
        interrupt.raise();
        waiter.await.unwrap();
        interrupt.raised().await;
        interrupt.clear();
        assert!(!interrupt.is_raised());
    }
}
