//! The `capstan` command line.

mod exit;
mod tool;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use exit::Exit;

/// capstan: a coding agent whose tools run as sandboxed WebAssembly components.
///
/// Every tool call runs in a fresh WebAssembly sandbox that can reach only
/// what it was granted: by default the working folder, read-only.
#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version,
    about,
    long_about = None,
    arg_required_else_help = true,
    after_help = exit::exit_codes_help!(),
)]
pub struct Cli {
    /// Show plugin log lines, cache use and timings on stderr.
    #[arg(short, long, global = true)]
    verbose: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List and call tools.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
}

/// Runs the command line and returns the process's exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return match err.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    Exit::Success.into()
                }
                _ => Exit::Usage.into(),
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return Exit::Error.into();
        }
    };
    let exit = runtime.block_on(async {
        match cli.command {
            Command::Tool(command) => tool::run(command, cli.verbose).await,
        }
    });
    exit.into()
}
