//! The end-to-end tests, as one test binary: each former test file is a
//! module here, all sharing `support` (a temporary home and workspace per
//! test, the real `capstan` binary, fixture plugins, a mock model server).
//! One binary links wasmtime and the capstan library once instead of once
//! per file.
//!
//! The tests run on several threads of one process, so none of them may
//! change what the process shares: no `std::env::set_var`, no
//! `set_current_dir`, no fixed ports, a folder of its own for everything it
//! writes. What must run with the host's keys in its environment runs in a
//! child process (`net_escapes::env_dump_child`). Run one file's tests with
//! `cargo test --test all MODULE::` (docs/testing.md).

mod support;

mod agent_sdk;
mod agent_sdk_flags;
mod agent_sdk_hooks;
mod agent_sdk_mcp;
mod agent_sdk_system_prompt;
mod agent_session;
mod audit;
mod claude_agent_hooks;
mod claude_agents;
mod claude_hook_kinds;
mod claude_hook_secrets;
mod claude_hook_trust;
mod claude_plugins;
mod claude_remote;
mod claude_skills;
mod cli;
mod consent_drift;
mod conversation_rules;
mod doctor;
mod escapes;
mod exec_credentials;
mod exec_grants;
mod exec_protected;
mod exec_proxy;
mod exec_sandbox;
mod exec_syscalls;
mod exec_temp_area;
mod exec_terminals;
mod exec_tools;
mod fs_tools;
mod full_disk;
mod headless;
mod headless_driver;
mod headless_flags;
mod headless_shapes;
mod hooks;
mod host_edges;
mod interactive;
mod languages;
mod logging;
mod lsp;
mod mcp;
mod mcp_client;
mod mcp_session;
mod misbehaving;
mod model_providers;
mod net_escapes;
mod output_styles;
mod plugin_install;
mod rendering;
mod rewind;
mod rewind_safety;
mod sandbox_edges;
mod session_audit;
mod session_habits;
mod skills;
mod web;
