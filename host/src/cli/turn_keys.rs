//! The keyboard while a turn runs.
//!
//! Between prompts the line editor owns the terminal. While a turn runs
//! (the model thinking or streaming, tools running, a compaction), a reader
//! thread owns it instead, with echo and the terminal's own signal keys
//! off, so that:
//!
//! - **Ctrl-C** and **Esc** interrupt the turn (a second Ctrl-C while the
//!   turn winds down quits with code 130), in every state, without a signal
//!   handler racing the line editor's;
//! - what the user types is kept, unechoed and unmangled, as *type-ahead*
//!   for the next prompt instead of being printed into the model's output;
//! - a permission question takes only the keys pressed after it is shown:
//!   anything typed before stays type-ahead.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, LocalFlags, SetArg, Termios};

use super::Exit;
use crate::agent::Interrupt;

/// How long the reader waits for input before looking at its flags again.
const POLL_INTERVAL: u16 = 25;

/// How long an ESC may wait for the rest of an escape sequence (an arrow
/// key, say) before it counts as the Esc key itself. Terminals send a
/// sequence's bytes together, so this only delays a lone Esc.
const ESCAPE_SEQUENCE_WAIT: u16 = 40;

/// One key, as the session cares about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Enter.
    Enter,
    /// Backspace (or Delete, as terminals send it).
    Backspace,
    /// Ctrl-C.
    CtrlC,
    /// A lone Esc.
    Esc,
}

/// Turns the bytes a terminal sends into [`Key`]s: UTF-8 characters,
/// control keys, and escape sequences (arrow and function keys, which are
/// dropped whole so none of their bytes ends up as text).
#[derive(Debug, Default)]
pub struct KeyDecoder {
    pending: Vec<u8>,
}

impl KeyDecoder {
    /// Decodes `bytes`, appending keys to `keys`. `more_may_follow` says
    /// whether the caller will look for more input right away: an ESC at
    /// the very end is held back until then (it may start a sequence), and
    /// becomes the Esc key when called with nothing more.
    pub fn feed(&mut self, bytes: &[u8], more_may_follow: bool, keys: &mut Vec<Key>) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        let data = std::mem::take(&mut self.pending);
        while at < data.len() {
            let byte = data[at];
            match byte {
                0x1b => match escape_sequence_len(&data[at..]) {
                    Some(len) => at += len,
                    None if more_may_follow => {
                        self.pending = data[at..].to_vec();
                        return;
                    }
                    None => {
                        // A lone Esc (or an unfinished sequence, whose bytes
                        // are dropped with it).
                        keys.push(Key::Esc);
                        at = data.len();
                    }
                },
                0x03 => {
                    keys.push(Key::CtrlC);
                    at += 1;
                }
                b'\r' | b'\n' => {
                    keys.push(Key::Enter);
                    // A CR LF pair is one Enter.
                    at += if byte == b'\r' && data.get(at + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                }
                0x7f | 0x08 => {
                    keys.push(Key::Backspace);
                    at += 1;
                }
                b'\t' => {
                    keys.push(Key::Char('\t'));
                    at += 1;
                }
                0x00..=0x1f => at += 1,
                _ => {
                    let len = utf8_len(byte);
                    if at + len > data.len() {
                        if more_may_follow {
                            self.pending = data[at..].to_vec();
                            return;
                        }
                        at = data.len();
                        continue;
                    }
                    if let Ok(text) = std::str::from_utf8(&data[at..at + len]) {
                        keys.extend(text.chars().map(Key::Char));
                    }
                    at += len;
                }
            }
        }
    }
}

impl KeyDecoder {
    /// Whether bytes are held back, waiting for the rest of a sequence.
    pub fn is_holding(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// The length of the escape sequence at the start of `data` (which starts
/// with ESC), or `None` when `data` holds only a lone or unfinished one.
fn escape_sequence_len(data: &[u8]) -> Option<usize> {
    match data.get(1)? {
        // CSI: parameters and intermediates, then a final byte 0x40..=0x7e.
        b'[' => data[2..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map(|end| end + 3),
        // SS3 (F1-F4, application-mode arrows): one more byte.
        b'O' => data.get(2).map(|_| 3),
        // Alt+key: ESC then the key.
        byte => Some(1 + utf8_len(*byte).min(data.len() - 1)),
    }
}

/// How many bytes the UTF-8 sequence starting with `lead` takes.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xf0..=0xf7 => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

/// What the reader thread shares with the session.
struct Shared {
    stop: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Text typed during the turn, for the next prompt.
    typeahead: String,
    /// Whether a permission question is waiting for keys.
    questioning: bool,
    /// Set by [`TurnKeys::question`]: take what is already typed as
    /// type-ahead, then start answering the question.
    question_requested: bool,
    /// Keys pressed since the question was shown.
    answers: std::collections::VecDeque<Key>,
    /// The reader stopped (the terminal closed or failed).
    ended: bool,
}

/// The terminal in turn mode: a reader thread that interrupts on Ctrl-C or
/// Esc and keeps type-ahead. Dropping it (or [`TurnKeys::finish`]) gives the
/// terminal back as it was.
pub struct TurnKeys {
    shared: Arc<Shared>,
    saved: Termios,
    reader: Option<JoinHandle<()>>,
}

impl TurnKeys {
    /// Takes the terminal on stdin for a turn; `None` when stdin is not a
    /// terminal (the caller then relies on SIGINT, as in print mode).
    pub fn start(interrupt: Interrupt) -> Option<Self> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut quiet = saved.clone();
        quiet.local_flags &= !(LocalFlags::ICANON
            | LocalFlags::ECHO
            | LocalFlags::ECHONL
            | LocalFlags::ISIG
            | LocalFlags::IEXTEN);
        quiet.control_chars[nix::libc::VMIN] = 1;
        quiet.control_chars[nix::libc::VTIME] = 0;
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &quiet).ok()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let reader = {
            let shared = shared.clone();
            let saved = saved.clone();
            std::thread::Builder::new()
                .name("capstan-keys".into())
                .spawn(move || read_keys(&shared, &interrupt, &saved))
                .ok()
        };
        let Some(reader) = reader else {
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &saved);
            return None;
        };
        Some(Self {
            shared,
            saved,
            reader: Some(reader),
        })
    }

    /// Starts a permission question: what was typed before it stays
    /// type-ahead, and [`TurnKeys::next_answer_key`] returns only keys
    /// pressed from now on.
    pub fn question(&self) {
        let mut state = lock(&self.shared);
        state.question_requested = true;
        state.answers.clear();
        while state.question_requested && !state.ended {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// The next key pressed for the question; `None` if the terminal is
    /// gone.
    pub fn next_answer_key(&self) -> Option<Key> {
        let mut state = lock(&self.shared);
        loop {
            if let Some(key) = state.answers.pop_front() {
                return Some(key);
            }
            if state.ended {
                return None;
            }
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Ends the question: keys pressed from now on are type-ahead again.
    pub fn end_question(&self) {
        let mut state = lock(&self.shared);
        state.questioning = false;
        state.answers.clear();
    }

    /// Gives the terminal back and returns what was typed during the turn.
    pub fn finish(mut self) -> String {
        self.stop();
        std::mem::take(&mut lock(&self.shared).typeahead)
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

impl Drop for TurnKeys {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared
        .state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The reader thread: reads keys until told to stop.
fn read_keys(shared: &Shared, interrupt: &Interrupt, saved: &Termios) {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut decoder = KeyDecoder::default();
    let mut keys = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        let requested = lock(shared).question_requested;
        if requested {
            // Everything already typed is type-ahead, not an answer.
            while let Some(bytes) = read_ready(fd, 0) {
                decoder.feed(&bytes, false, &mut keys);
                dispatch(shared, interrupt, saved, &mut keys);
            }
            decoder.feed(&[], false, &mut keys);
            dispatch(shared, interrupt, saved, &mut keys);
            let mut state = lock(shared);
            state.question_requested = false;
            state.questioning = true;
            shared.changed.notify_all();
            continue;
        }
        match read_ready(fd, POLL_INTERVAL) {
            Some(bytes) if bytes.is_empty() => break,
            Some(bytes) => {
                decoder.feed(&bytes, true, &mut keys);
                // An escape or a character held back: wait briefly for the
                // rest of it.
                while decoder.is_holding() {
                    match read_ready(fd, ESCAPE_SEQUENCE_WAIT) {
                        Some(bytes) if !bytes.is_empty() => decoder.feed(&bytes, true, &mut keys),
                        _ => break,
                    }
                }
                decoder.feed(&[], false, &mut keys);
                dispatch(shared, interrupt, saved, &mut keys);
            }
            None => {}
        }
    }
    let mut state = lock(shared);
    state.ended = true;
    shared.changed.notify_all();
}

/// Reads what stdin has within `timeout_ms`: `None` if nothing came, an
/// empty vector at end of input or on an error.
fn read_ready(fd: BorrowedFd<'_>, timeout_ms: u16) -> Option<Vec<u8>> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(timeout_ms)) {
        Ok(0) => None,
        Ok(_) => {
            let mut buffer = [0u8; 256];
            match nix::unistd::read(fd, &mut buffer) {
                Ok(n) => Some(buffer[..n].to_vec()),
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => None,
                Err(_) => Some(Vec::new()),
            }
        }
        Err(nix::errno::Errno::EINTR) => None,
        Err(_) => Some(Vec::new()),
    }
}

/// Sends decoded keys where they belong: to a question being answered, or
/// to the turn (interrupt keys) and the type-ahead.
fn dispatch(shared: &Shared, interrupt: &Interrupt, saved: &Termios, keys: &mut Vec<Key>) {
    if keys.is_empty() {
        return;
    }
    let mut state = lock(shared);
    for key in keys.drain(..) {
        if state.questioning {
            state.answers.push_back(key);
            shared.changed.notify_all();
            continue;
        }
        match key {
            Key::CtrlC | Key::Esc => {
                if key == Key::CtrlC && interrupt.is_raised() {
                    let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, saved);
                    super::live::notice("capstan: stopped");
                    super::termination::exit_now(i32::from(Exit::Interrupted as u8));
                }
                if !interrupt.is_raised() {
                    // Above the spinner and a command's output, if drawn.
                    super::live::notice("capstan: interrupting… (Ctrl-C again to quit)");
                    interrupt.raise();
                }
            }
            Key::Char(c) => state.typeahead.push(c),
            Key::Enter => state.typeahead.push('\n'),
            Key::Backspace => {
                if !state.typeahead.ends_with('\n') {
                    state.typeahead.pop();
                }
            }
        }
    }
}

/// Splits type-ahead into the lines finished with Enter (to run as prompts,
/// in order) and the unfinished rest (to start the next prompt's line with).
pub fn split_typeahead(typeahead: &str) -> (Vec<String>, String) {
    let mut lines: Vec<String> = typeahead.split('\n').map(str::to_string).collect();
    let rest = lines.pop().unwrap_or_default();
    lines.retain(|line| !line.trim().is_empty());
    (lines, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<Key> {
        let mut decoder = KeyDecoder::default();
        let mut keys = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, true, &mut keys);
        }
        decoder.feed(&[], false, &mut keys);
        keys
    }

    #[test]
    fn text_and_control_keys_are_told_apart() {
        assert_eq!(
            decode(&[b"fn \x7fx\r\x03"]),
            vec![
                Key::Char('f'),
                Key::Char('n'),
                Key::Char(' '),
                Key::Backspace,
                Key::Char('x'),
                Key::Enter,
                Key::CtrlC
            ]
        );
    }

    #[test]
    fn a_lone_escape_is_esc_but_arrow_keys_are_dropped_whole() {
        assert_eq!(decode(&[b"\x1b"]), vec![Key::Esc]);
        assert_eq!(
            decode(&[b"a\x1b[A\x1b[1;5Cb"]),
            vec![Key::Char('a'), Key::Char('b')]
        );
        assert_eq!(decode(&[b"\x1bOP"]), Vec::<Key>::new());
        // A sequence split across reads is still one sequence.
        assert_eq!(decode(&[b"\x1b", b"[B", b"z"]), vec![Key::Char('z')]);
    }

    #[test]
    fn utf8_split_across_reads_stays_whole() {
        let word = "héllo→".as_bytes();
        let keys = decode(&[&word[..2], &word[2..6], &word[6..]]);
        let text: String = keys
            .iter()
            .filter_map(|k| match k {
                Key::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        assert_eq!(text, "héllo→");
    }

    #[test]
    fn typeahead_splits_into_finished_lines_and_the_rest() {
        assert_eq!(
            split_typeahead("/exit\n\nfix it\nand th"),
            (
                vec!["/exit".to_string(), "fix it".to_string()],
                "and th".to_string()
            )
        );
        assert_eq!(split_typeahead(""), (vec![], String::new()));
    }
}
