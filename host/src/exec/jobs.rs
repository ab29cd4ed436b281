//! Commands left running in the background (servers, watchers): started,
//! read and killed by id; every one still running is killed, with all its
//! processes, when the table is dropped (the session ends).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::{
    Cancel, CappedOutput, ExecError, ExecGrants, ExecOutcome, ExecRequest, RunningCommand,
};

/// A background job's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

/// What a job printed since it was last read, and how it ended if it did.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// The command.
    pub command: String,
    /// Output since the last read (capped: head and tail).
    pub new_output: CappedOutput,
    /// How it ended, once it has.
    pub outcome: Option<ExecOutcome>,
}

/// No job has that id.
#[derive(Debug, thiserror::Error)]
#[error("there is no background job {0}; the jobs are: {1}")]
pub struct UnknownJob(pub JobId, pub String);

/// A job's shared state.
#[derive(Default)]
struct JobState {
    unread: CappedOutput,
    outcome: Option<ExecOutcome>,
}

struct Job {
    command: String,
    state: Arc<Mutex<JobState>>,
    cancel: Cancel,
    thread: Option<JoinHandle<()>>,
}

/// The background jobs of a session.
#[derive(Default)]
pub struct JobTable {
    jobs: Mutex<BTreeMap<JobId, Job>>,
    next: Mutex<u64>,
}

impl JobTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `request` under `grants` in the background. Its timeout, if
    /// any, applies; without one it runs until killed.
    pub fn start(&self, request: ExecRequest, grants: ExecGrants) -> Result<JobId, ExecError> {
        let state = Arc::new(Mutex::new(JobState::default()));
        let cancel = Cancel::new();
        let (started, start_result) = mpsc::channel();
        let command = request.command.describe();
        let thread = {
            let state = state.clone();
            let cancel = cancel.clone();
            // The job's own thread starts the command and waits for it: the
            // sandbox ties the command's life to the thread that started it.
            std::thread::Builder::new()
                .name("capstan-exec-job".into())
                .spawn(move || match RunningCommand::start(&request, &grants) {
                    Err(error) => {
                        let _ = started.send(Err(error));
                    }
                    Ok(running) => {
                        let _ = started.send(Ok(()));
                        let outcome = running.wait(&cancel, &mut |chunk| {
                            if let Ok(mut state) = state.lock() {
                                state.unread.push(chunk);
                            }
                        });
                        if let Ok(mut state) = state.lock() {
                            state.outcome = Some(outcome);
                        }
                    }
                })
                .map_err(|source| ExecError::Setup {
                    step: "starting the job's thread",
                    source,
                })?
        };
        match start_result.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                let _ = thread.join();
                return Err(error);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(ExecError::Setup {
                    step: "starting the job",
                    source: std::io::Error::other("the job's thread ended early"),
                });
            }
        }
        let id = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            JobId(*next)
        };
        let job = Job {
            command,
            state,
            cancel,
            thread: Some(thread),
        };
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, job);
        Ok(id)
    }

    /// What job `id` printed since the last read, and its outcome once it
    /// has ended (an ended job is then forgotten).
    pub fn output(&self, id: JobId) -> Result<JobOutput, UnknownJob> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(job) = jobs.get(&id) else {
            return Err(self.unknown(id, &jobs));
        };
        let output = take(job);
        if output.outcome.is_some()
            && let Some(mut job) = jobs.remove(&id)
            && let Some(thread) = job.thread.take()
        {
            let _ = thread.join();
        }
        Ok(output)
    }

    /// Kills job `id` with every process it started, and returns its last
    /// output and outcome.
    pub fn kill(&self, id: JobId) -> Result<JobOutput, UnknownJob> {
        let mut job = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            match jobs.remove(&id) {
                Some(job) => job,
                None => return Err(self.unknown(id, &jobs)),
            }
        };
        job.cancel.cancel();
        if let Some(thread) = job.thread.take() {
            let _ = thread.join();
        }
        Ok(take(&job))
    }

    /// The jobs, with their commands.
    pub fn list(&self) -> Vec<(JobId, String)> {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, job)| (*id, job.command.clone()))
            .collect()
    }

    /// Kills every job.
    pub fn kill_all(&self) {
        let jobs = std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()));
        for job in jobs.values() {
            job.cancel.cancel();
        }
        for (_, mut job) in jobs {
            if let Some(thread) = job.thread.take() {
                let _ = thread.join();
            }
        }
    }

    fn unknown(&self, id: JobId, jobs: &BTreeMap<JobId, Job>) -> UnknownJob {
        let known: Vec<String> = jobs.keys().map(ToString::to_string).collect();
        UnknownJob(
            id,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
        )
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Takes a job's unread output (and its outcome, if it ended).
fn take(job: &Job) -> JobOutput {
    let mut state = job.state.lock().unwrap_or_else(|e| e.into_inner());
    JobOutput {
        command: job.command.clone(),
        new_output: std::mem::take(&mut state.unread),
        outcome: state.outcome.clone(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::exec::{CommandLine, Ending, ExecSettings};
    use crate::grants::fs::OwnFolders;

    fn grants(ws: &std::path::Path) -> ExecGrants {
        ExecGrants::resolve(&ExecSettings::default(), ws, None, &OwnFolders::default()).unwrap()
    }

    fn shell(text: &str) -> ExecRequest {
        ExecRequest::new(CommandLine::Shell(text.into()))
    }

    /// Whether a process whose command line holds `needle` runs here.
    fn running(needle: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
    }

    fn wait_gone(needle: &str) -> bool {
        for _ in 0..100 {
            if !running(needle) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn jobs_run_in_the_background_and_die_when_killed_or_dropped() {
        let ws = tempfile::tempdir().unwrap();
        let table = JobTable::new();
        let a = table
            .start(shell("echo ready; exec sleep 1247.5"), grants(ws.path()))
            .unwrap();
        let b = table
            .start(shell("setsid sleep 1248.5 & wait"), grants(ws.path()))
            .unwrap();
        assert_eq!(table.list().len(), 2);
        let mut seen = String::new();
        for _ in 0..100 {
            seen.push_str(&table.output(a).unwrap().new_output.text());
            if seen.contains("ready") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(seen, "ready\n");
        let killed = table.kill(a).unwrap();
        assert_eq!(killed.outcome.unwrap().ending, Ending::Cancelled);
        assert!(wait_gone("1247.5"));
        assert!(table.output(a).is_err());
        let left: Vec<JobId> = table.list().into_iter().map(|(id, _)| id).collect();
        assert_eq!(left, [b]);
        assert!(running("1248.5"));
        drop(table);
        assert!(wait_gone("1248.5"));
    }

    #[test]
    fn a_job_that_cannot_start_is_an_error_not_a_job() {
        let ws = tempfile::tempdir().unwrap();
        let table = JobTable::new();
        let request = ExecRequest::new(CommandLine::Argv(vec!["/no/such/program".into()]));
        assert!(table.start(request, grants(ws.path())).is_err());
        assert!(table.list().is_empty());
    }
}
