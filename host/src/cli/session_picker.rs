//! The session picker of `--resume` without an id and `/resume`: the
//! workspace's sessions, newest first, each with its title (the first
//! prompt), age and message count. Up and Down (or Ctrl-P, Ctrl-N) move,
//! typing filters (by title, id, or the row's number), Enter resumes, Esc
//! or Ctrl-C cancels.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::SystemTime;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, LocalFlags, SetArg, Termios};

use crate::escape;
use crate::session::{SessionSummary, Sessions};

/// How many rows the picker shows at once.
const VISIBLE_ROWS: usize = 10;

/// How long an ESC waits for the rest of an arrow key's sequence.
const ESCAPE_WAIT_MS: u16 = 40;

/// A key the picker cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PickerKey {
    Up,
    Down,
    Enter,
    Cancel,
    Backspace,
    Char(char),
}

/// Lets the user pick one of the workspace's sessions other than
/// `current` and those where nothing was said. `Ok(None)` when they
/// cancel; an error when there is nothing to pick or no terminal to pick
/// on.
pub fn pick(sessions: &Sessions, current: Option<&str>) -> Result<Option<String>, String> {
    let listing = sessions.list().map_err(|e| e.to_string())?;
    for problem in &listing.unreadable {
        eprintln!("warning: {problem}");
    }
    let rows: Vec<SessionSummary> = listing
        .sessions
        .into_iter()
        .filter(|s| Some(s.id.as_str()) != current && s.message_count > 0)
        .collect();
    if rows.is_empty() {
        return Err(format!(
            "no other saved session of {} has a conversation to resume",
            sessions.workspace().display()
        ));
    }
    let raw = RawKeys::start().ok_or_else(|| {
        "the session picker needs a terminal; give the session's id (capstan session list shows them)"
            .to_string()
    })?;
    let mut picker = Picker::new(rows);
    let mut drawn = 0;
    let chosen = loop {
        drawn = picker.draw(drawn);
        let Some(keys) = raw.read() else {
            break None;
        };
        let mut done = None;
        for key in keys {
            match key {
                PickerKey::Up => picker.select_by(-1),
                PickerKey::Down => picker.select_by(1),
                PickerKey::Backspace => {
                    picker.filter.pop();
                    picker.refilter();
                }
                PickerKey::Char(c) => {
                    picker.filter.push(c);
                    picker.refilter();
                }
                PickerKey::Cancel => done = Some(None),
                PickerKey::Enter => {
                    if let Some(row) = picker.selected_row() {
                        done = Some(Some(row.id.clone()));
                    }
                }
            }
            if done.is_some() {
                break;
            }
        }
        if let Some(chosen) = done {
            break chosen;
        }
    };
    clear(drawn);
    drop(raw);
    Ok(chosen)
}

/// The picker's state.
struct Picker {
    rows: Vec<SessionSummary>,
    filter: String,
    /// Indexes into `rows` of the rows that match the filter, best first.
    shown: Vec<usize>,
    selected: usize,
    now: SystemTime,
}

impl Picker {
    fn new(rows: Vec<SessionSummary>) -> Self {
        let mut picker = Self {
            shown: (0..rows.len()).collect(),
            rows,
            filter: String::new(),
            selected: 0,
            now: SystemTime::now(),
        };
        picker.refilter();
        picker
    }

    /// Recomputes the rows shown for the filter: a row whose number is
    /// the filter first, then the rows whose title or id contain it.
    fn refilter(&mut self) {
        let filter = self.filter.to_lowercase();
        let mut exact = Vec::new();
        let mut others = Vec::new();
        for (index, row) in self.rows.iter().enumerate() {
            if filter == (index + 1).to_string() {
                exact.push(index);
            } else if filter.is_empty()
                || row.id.contains(&filter)
                || row
                    .first_prompt
                    .as_deref()
                    .is_some_and(|p| p.to_lowercase().contains(&filter))
            {
                others.push(index);
            }
        }
        exact.extend(others);
        self.shown = exact;
        self.selected = 0;
    }

    fn select_by(&mut self, step: isize) {
        if self.shown.is_empty() {
            return;
        }
        let last = self.shown.len() - 1;
        self.selected = self.selected.saturating_add_signed(step).min(last);
    }

    fn selected_row(&self) -> Option<&SessionSummary> {
        self.shown.get(self.selected).map(|&i| &self.rows[i])
    }

    /// The picker's lines.
    fn lines(&self, width: usize) -> Vec<String> {
        let mut lines = vec![
            "Resume a session: ↑/↓ to move, type to filter (or a number), Enter to resume, Esc to cancel".to_string(),
            format!("filter: {}", escape::line(&self.filter)),
        ];
        if self.shown.is_empty() {
            lines.push("  (no session matches)".to_string());
        }
        let start = self
            .selected
            .saturating_sub(VISIBLE_ROWS - 1)
            .min(self.shown.len().saturating_sub(VISIBLE_ROWS));
        for (at, &index) in self.shown.iter().enumerate().skip(start).take(VISIBLE_ROWS) {
            let row = &self.rows[index];
            let mark = if at == self.selected { '›' } else { ' ' };
            let age = self
                .now
                .duration_since(row.updated)
                .map(|d| age(d.as_secs()))
                .unwrap_or_else(|_| "just now".to_string());
            let head = format!(
                "{mark} {:>2}. {age:>10}  {:>4} msgs  {}  ",
                index + 1,
                row.message_count,
                &row.id[..row.id.len().min(8)]
            );
            let room = width.saturating_sub(head.chars().count()).max(10);
            let title = row.first_prompt.as_deref().unwrap_or("(no prompt)");
            let title: String = escape::line(title).chars().take(room).collect();
            lines.push(format!("{head}{title}"));
        }
        if self.shown.len() > VISIBLE_ROWS {
            lines.push(format!("  ({} sessions match)", self.shown.len()));
        }
        lines
    }

    /// Draws the picker over the `drawn` lines drawn before; returns how
    /// many it drew.
    fn draw(&self, drawn: usize) -> usize {
        let width = terminal_size::terminal_size_of(std::io::stderr())
            .map_or(100, |(w, _)| usize::from(w.0))
            .saturating_sub(1);
        let lines = self.lines(width);
        let mut out = String::new();
        if drawn > 0 {
            out.push_str(&format!("\r\x1b[{drawn}A"));
        }
        out.push_str("\r\x1b[J");
        for line in &lines {
            out.push_str(line);
            out.push_str("\r\n");
        }
        let mut stderr = std::io::stderr();
        let _ = stderr.write_all(out.as_bytes());
        let _ = stderr.flush();
        lines.len()
    }
}

/// Erases the `drawn` lines of the picker.
fn clear(drawn: usize) {
    if drawn > 0 {
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "\r\x1b[{drawn}A\x1b[J");
        let _ = stderr.flush();
    }
}

/// "just now", "5 min ago", "3 h ago", "2 d ago".
fn age(seconds: u64) -> String {
    match seconds {
        0..60 => "just now".to_string(),
        60..3600 => format!("{} min ago", seconds / 60),
        3600..86400 => format!("{} h ago", seconds / 3600),
        _ => format!("{} d ago", seconds / 86400),
    }
}

/// The terminal on stdin in raw mode for the picker, restored on drop.
struct RawKeys {
    saved: Termios,
}

impl RawKeys {
    fn start() -> Option<Self> {
        let stdin = std::io::stdin();
        if !std::io::IsTerminal::is_terminal(&stdin) {
            return None;
        }
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        raw.local_flags &= !(LocalFlags::ICANON
            | LocalFlags::ECHO
            | LocalFlags::ECHONL
            | LocalFlags::ISIG
            | LocalFlags::IEXTEN);
        raw.control_chars[nix::libc::VMIN] = 1;
        raw.control_chars[nix::libc::VTIME] = 0;
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(Self { saved })
    }

    /// The next keys pressed; `None` when the terminal is gone.
    fn read(&self) -> Option<Vec<PickerKey>> {
        let mut stdin = std::io::stdin();
        let mut buffer = [0u8; 64];
        let n = loop {
            match stdin.read(&mut buffer) {
                Ok(n) if n > 0 => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => return None,
            }
        };
        let mut bytes = buffer[..n].to_vec();
        // A lone ESC may be the start of an arrow key's sequence.
        if bytes.last() == Some(&0x1b) || bytes.ends_with(b"\x1b[") || bytes.ends_with(b"\x1bO") {
            let ready = {
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
                poll(&mut fds, PollTimeout::from(ESCAPE_WAIT_MS)).unwrap_or(0)
            };
            if ready > 0
                && let Ok(more) = stdin.read(&mut buffer)
            {
                bytes.extend_from_slice(&buffer[..more]);
            }
        }
        Some(decode(&bytes))
    }
}

impl Drop for RawKeys {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// The keys in `bytes`.
fn decode(bytes: &[u8]) -> Vec<PickerKey> {
    let mut keys = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.peek() {
                Some('[' | 'O') => {
                    chars.next();
                    // Parameters, then the final byte.
                    let mut last = None;
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() || c == '~' {
                            last = Some(c);
                            break;
                        }
                    }
                    match last {
                        Some('A') => keys.push(PickerKey::Up),
                        Some('B') => keys.push(PickerKey::Down),
                        _ => {}
                    }
                }
                _ => keys.push(PickerKey::Cancel),
            },
            '\r' | '\n' => keys.push(PickerKey::Enter),
            '\x03' | '\x04' => keys.push(PickerKey::Cancel),
            '\x10' => keys.push(PickerKey::Up),
            '\x0e' => keys.push(PickerKey::Down),
            '\x7f' | '\x08' => keys.push(PickerKey::Backspace),
            c if !c.is_control() => keys.push(PickerKey::Char(c)),
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(id: &str, prompt: &str, minutes_ago: u64) -> SessionSummary {
        let updated = SystemTime::now() - Duration::from_secs(minutes_ago * 60);
        SessionSummary {
            id: id.to_string(),
            path: std::path::PathBuf::from(format!("{id}.jsonl")),
            started: updated,
            updated,
            first_prompt: Some(prompt.to_string()),
            message_count: 4,
        }
    }

    #[test]
    fn keys_are_decoded_whole() {
        assert_eq!(
            decode(b"\x1b[A\x1b[B\x1bOAab\x7f\r"),
            [
                PickerKey::Up,
                PickerKey::Down,
                PickerKey::Up,
                PickerKey::Char('a'),
                PickerKey::Char('b'),
                PickerKey::Backspace,
                PickerKey::Enter
            ]
        );
        assert_eq!(decode(b"\x1b"), [PickerKey::Cancel]);
        assert_eq!(decode(b"\x03"), [PickerKey::Cancel]);
    }

    #[test]
    fn typing_filters_and_numbers_pick_rows() {
        let mut picker = Picker::new(vec![
            row("aaaa1111", "fix the parser", 5),
            row("bbbb2222", "write the docs", 120),
            row("cccc3333", "Parser tests", 3000),
        ]);
        assert_eq!(picker.selected_row().unwrap().id, "aaaa1111");
        picker.select_by(1);
        picker.select_by(5);
        assert_eq!(picker.selected_row().unwrap().id, "cccc3333");
        picker.filter = "parser".into();
        picker.refilter();
        assert_eq!(picker.shown, [0, 2]);
        picker.filter = "2".into();
        picker.refilter();
        // Row 2 first, then the ids holding a 2.
        assert_eq!(picker.selected_row().unwrap().id, "bbbb2222");
        picker.filter = "zzz".into();
        picker.refilter();
        assert!(picker.selected_row().is_none());
        let lines = picker.lines(80).join("\n");
        assert!(lines.contains("no session matches"), "{lines}");
        picker.filter.clear();
        picker.refilter();
        let lines = picker.lines(80).join("\n");
        assert!(lines.contains("5 min ago"), "{lines}");
        assert!(lines.contains("2 h ago"), "{lines}");
        assert!(lines.contains("2 d ago"), "{lines}");
        assert!(lines.contains("write the docs"), "{lines}");
    }
}
