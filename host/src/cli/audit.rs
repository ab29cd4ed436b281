//! `capstan audit ...`: what plugins touched, and whether the log is intact.

use super::Exit;

/// The audit commands.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {}

/// Runs an audit command.
pub fn run(command: AuditCommand) -> Exit {
    match command {}
}
