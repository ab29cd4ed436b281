//! A `capstan` running in the background: its stdout lines (stream-json
//! events) read as they come, signals sent to it, its exit awaited.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long an awaited event may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `capstan` whose stdout lines arrive on a channel.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Running {
    /// Starts `cmd` with no input, reading its output.
    pub fn spawn(mut cmd: std::process::Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn capstan");
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Waits for a stdout event of `type`; kills the process and fails if it
    /// does not come in time.
    pub fn wait_for_event(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Ok(event) = serde_json::from_str::<Value>(&line)
                        && event["type"] == kind
                    {
                        return event;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "no `{kind}` event within {RUN_TIMEOUT:?}; stdout so far:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Sends it signal `name` (`TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit; kills it and fails after `limit`.
    pub fn wait(mut self, limit: Duration) -> (std::process::ExitStatus, Vec<String>, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "capstan did not exit within {limit:?}; stdout so far:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.seen.extend(self.lines.iter());
        let err = self.stderr.join().unwrap();
        (status, self.seen, err)
    }
}
