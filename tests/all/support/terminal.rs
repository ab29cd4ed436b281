//! The real binary in a pseudo-terminal: keys sent as a user types them,
//! everything the terminal shows collected for assertions.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::pty::{OpenptyResult, Winsize, openpty};

/// How long [`Terminal::expect`] waits by default.
pub const WAIT: Duration = Duration::from_secs(30);

/// A program running in a pseudo-terminal that is its controlling
/// terminal, so the terminal's keys and signals behave as for a user.
pub struct Terminal {
    child: Child,
    /// The terminal's path (`/dev/pts/N`).
    path: std::path::PathBuf,
    keyboard: std::fs::File,
    screen: Arc<Mutex<String>>,
    /// How much of the screen [`Terminal::expect`] has consumed.
    seen: usize,
}

impl Terminal {
    /// Starts `command` (its program and arguments; the environment and
    /// working folder are kept) in a new 120x40 terminal.
    pub fn spawn(command: Command) -> Self {
        let size = Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let OpenptyResult { master, slave } = openpty(Some(&size), None).expect("open a pty");
        let path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd()))
            .expect("the pty's path");
        // `setsid --ctty` makes the new session's controlling terminal the
        // pty, as a login shell's would be.
        let mut wrapped = Command::new("setsid");
        wrapped.arg("--ctty").arg(command.get_program());
        wrapped.args(command.get_args());
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        wrapped.env("TERM", "xterm-256color");
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
        wrapped
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        let child = wrapped.spawn().expect("start the program in the pty");
        drop(slave);
        let keyboard = std::fs::File::from(master.try_clone().expect("dup the pty"));
        let screen = Arc::new(Mutex::new(String::new()));
        {
            let screen = screen.clone();
            let mut output = std::fs::File::from(master);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = output.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buffer[..n]);
                    screen.lock().unwrap().push_str(&text);
                }
            });
        }
        Self {
            child,
            path,
            keyboard,
            screen,
            seen: 0,
        }
    }

    /// Types `text` (bytes as a terminal sends them: `\r` for Enter,
    /// `\x03` for Ctrl-C, `\x1b` for Esc).
    pub fn send(&mut self, text: &str) {
        self.keyboard.write_all(text.as_bytes()).unwrap();
        self.keyboard.flush().unwrap();
    }

    /// Types `text` one key at a time, a little apart, as a person does.
    pub fn type_slowly(&mut self, text: &str) {
        for c in text.chars() {
            self.send(&c.to_string());
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    /// The terminal's path, `/dev/pts/N`: what a process that may reach
    /// the host's terminals would open to write on it or read its keys.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Everything shown so far.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until `needle` appears after what earlier expectations
    /// consumed, and consumes up to its end; panics with the screen after
    /// [`WAIT`].
    pub fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if let Some(at) = screen[self.seen..].find(needle) {
                let end = self.seen + at + needle.len();
                let passed = screen[self.seen..end].to_string();
                self.seen = end;
                return passed;
            }
            if Instant::now() > deadline {
                panic!(
                    "{needle:?} did not appear within {WAIT:?}; the terminal shows:\n{}",
                    self.screen()
                );
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                let screen = self.screen();
                if screen[self.seen..].contains(needle) {
                    continue;
                }
                panic!("the program ended ({status}) before {needle:?} appeared:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the program to end; panics with the screen after [`WAIT`].
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "the program did not end; the terminal shows:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the program is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
