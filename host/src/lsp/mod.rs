//! Language servers from Claude Code plugins, as a code-intelligence tool.
//!
//! - [`config`]: a server's definition (`.lsp.json`, `lspServers`);
//! - [`framing`]: LSP's `Content-Length` framing, capped;
//! - [`connection`]: one server in the OS sandbox of `exec.run` — the
//!   workspace read-only, its plugin's folder readable, no network — with
//!   requests, the server's own requests answered, its diagnostics kept;
//! - [`servers`]: a session's servers, each started when a file it serves
//!   is first touched, documents kept in step, restarts with backoff,
//!   shutdown at the end;
//! - [`render`]: answers as compact text for the model.
//!
//! The `lsp` tool the model calls is `agent/lsp_tool.rs`; the import of a
//! plugin's servers at install is `plugin/claude_lsp.rs`.

pub mod config;
pub mod connection;
pub mod framing;
pub mod render;
pub mod servers;

pub use config::LspServerSpec;
pub use servers::LspServers;
