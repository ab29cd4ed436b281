//! The `capstan:plugin/exec` interface: a component runs a program its
//! `exec` grant allows. What is allowed is decided in
//! [`crate::grants::exec`]; the program runs in the OS sandbox of
//! [`crate::exec`].

use std::time::{Duration, Instant};

use super::bindings::capstan::plugin::exec;
use super::state::CallState;
use crate::grants::exec::{SpawnContext, SpawnError, SpawnRequest};

impl exec::Host for CallState {
    async fn run(&mut self, command: exec::Command) -> Result<exec::Outcome, exec::ExecError> {
        self.touch();
        let request = SpawnRequest {
            program: command.program,
            args: command.args,
            cwd: command.cwd,
            stdin: command.stdin,
            timeout: command.timeout_ms.map(Duration::from_millis),
        };
        let context = SpawnContext {
            grants: &self.grants,
            audit: self.audit.as_ref(),
            call_id: self.audit.as_ref().map_or("exec", |a| a.call_id.as_str()),
            remaining: self.deadline.saturating_duration_since(Instant::now()),
        };
        let (exec_request, exec_grants) =
            crate::grants::exec::plan(&request, &context).map_err(to_wit)?;
        let outcome = crate::grants::exec::run(exec_request, exec_grants)
            .await
            .map_err(to_wit)?;
        Ok(exec::Outcome {
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            omitted: outcome.omitted,
        })
    }
}

fn to_wit(error: SpawnError) -> exec::ExecError {
    match error {
        SpawnError::NotGranted(m) => exec::ExecError::NotGranted(m),
        SpawnError::BadFolder(m) => exec::ExecError::BadFolder(m),
        SpawnError::Failed(m) => exec::ExecError::Failed(m),
    }
}
