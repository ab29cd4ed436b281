//! The `capstan` binary.

fn main() -> std::process::ExitCode {
    capstan::cli::main()
}
