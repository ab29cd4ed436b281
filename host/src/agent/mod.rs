//! The agent loop.

pub mod context;
pub mod cost;
