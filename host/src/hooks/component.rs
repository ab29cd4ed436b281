//! A hook component, run in the sandbox: its subscriptions read once, each
//! event handled in a fresh instance with a short deadline and a memory cap.
