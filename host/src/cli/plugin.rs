//! `capstan plugin ...`: install, inspect, update, grant, revoke and remove
//! plugins.

use super::Exit;

/// The plugin commands.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {}

/// Runs a plugin command.
pub async fn run(command: PluginCommand, _verbose: bool) -> Exit {
    match command {}
}
