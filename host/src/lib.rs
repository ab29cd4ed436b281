//! capstan: a terminal coding agent whose tools, hooks and skills are
//! WebAssembly components running in a wasmtime sandbox that can reach only
//! what the user granted.
//!
//! The library holds everything the `capstan` binary does, so it can be
//! tested and benchmarked without the command line:
//!
//! - [`sandbox`]: the engine, the compile cache, and one fresh, limited
//!   instance per call;
//! - [`exec`]: native commands in an OS sandbox (Landlock, seccomp,
//!   namespaces) built from the same grants;
//! - [`grants`]: what a call may touch, one module per capability;
//! - [`plugin`]: which plugins exist and where their components come from;
//! - [`model`]: the conversation types and the language-model providers;
//! - [`session`]: session transcripts and resuming them;
//! - [`agent`]: the agent loop; [`policy`]: permission decisions;
//!   [`config`]: the layered settings files (user, project, local); [`audit`]: the hash-chained audit log that the sandbox,
//!   grants, plugins, exec and the agent write;
//! - [`hooks`]: hook components and their decisions; [`skills`]: skills
//!   listed to the model and loaded on demand; [`front_matter`]: parsing
//!   `SKILL.md`, for skills and for the Claude Code plugin import alike;
//! - [`home`]: where data and caches live; [`progress`]: spinners for long
//!   steps on a terminal; [`quantity`]: sizes and durations, spelt one way
//!   everywhere; [`timestamp`]: RFC 3339 times; [`untrusted_folder`]: files capstan itself reads
//!   from folders others control (the workspace, a package), confined
//!   beneath them and capped; [`startup`]: how long each start-up phase
//!   took, for `-vv`;
//! - [`cli`]: the command line; [`fuzz`]: the bodies of the fuzz targets,
//!   one per parser of untrusted bytes.

pub mod agent;
pub mod audit;
pub mod cli;
pub mod config;
pub mod escape;
pub mod exec;
pub mod front_matter;
pub mod fuzz;
pub mod grants;
pub mod home;
pub mod hooks;
pub mod logging;
pub mod lsp;
pub mod mcp;
pub mod model;
pub mod plugin;
pub mod policy;
pub mod progress;
pub mod quantity;
pub mod sandbox;
pub mod scaffold;
pub mod session;
pub mod skills;
pub mod startup;
pub mod timestamp;
pub mod untrusted_folder;
