//! The stdio transport: one JSON-RPC message per line. Lines are read on a
//! thread of their own, so a blocking pipe never holds the async runtime,
//! and handed to the runtime through a channel; messages are written by
//! whichever thread sends them. Both work on any byte streams: the
//! server's own stdin and stdout, or a child process's pipes.

use std::io::{BufRead, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::jsonrpc::Message;
use super::outbox::Outbox;

/// The longest line read; a longer one is skipped and reported.
pub const MAX_LINE: usize = 16 << 20;

/// What the reader thread passes on.
#[derive(Debug)]
pub enum Frame {
    /// One line, without its newline.
    Line(Vec<u8>),
    /// A line longer than [`MAX_LINE`] was skipped.
    TooLong,
    /// Reading failed; nothing more will come.
    Failed(String),
}

/// Reads lines from `input` on a thread of its own; the channel closes at
/// the end of the input. Blank lines are skipped.
pub fn read_lines(input: impl BufRead + Send + 'static) -> mpsc::UnboundedReceiver<Frame> {
    let (tx, rx) = mpsc::unbounded_channel();
    let spawned = std::thread::Builder::new()
        .name("mcp-read".into())
        .spawn(move || read_loop(input, &tx));
    if let Err(e) = spawned {
        // The receiver sees the failure and then the end.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(Frame::Failed(format!(
            "cannot start the reader thread: {e}"
        )));
        return rx;
    }
    rx
}

fn read_loop(mut input: impl BufRead, tx: &mpsc::UnboundedSender<Frame>) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = input
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                let _ = tx.send(Frame::Failed(e.to_string()));
                return;
            }
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of the over-long line.
            loop {
                let mut rest = Vec::new();
                match input.by_ref().take(1 << 20).read_until(b'\n', &mut rest) {
                    Ok(0) => return,
                    Ok(_) if rest.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Frame::Failed(e.to_string()));
                        return;
                    }
                }
            }
            if tx.send(Frame::TooLong).is_err() {
                return;
            }
            continue;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if tx.send(Frame::Line(std::mem::take(&mut line))).is_err() {
            return;
        }
    }
}

/// The writing side of a line transport: each message is written and
/// flushed by the thread that sends it, under a lock, so a response leaves
/// as soon as it is made (a writer thread would add a hand-over to every
/// message). A client that stops reading holds up only the senders.
pub struct LineWriter {
    outbox: Outbox,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl LineWriter {
    /// Writes messages to `output`, one per line.
    pub fn new(output: impl Write + Send + 'static) -> Self {
        let output = Mutex::new(output);
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let is_closed = closed.clone();
        let outbox = Outbox::new(Arc::new(move |message: Message| {
            if is_closed.load(Ordering::Acquire) {
                return false;
            }
            let line = message.to_line();
            let Ok(mut output) = output.lock() else {
                return false;
            };
            let written = output.write_all(&line).and_then(|()| output.flush());
            if written.is_err() {
                is_closed.store(true, Ordering::Release);
            }
            written.is_ok()
        }));
        Self { outbox, closed }
    }

    /// Where messages to write go.
    pub fn outbox(&self) -> Outbox {
        self.outbox.clone()
    }

    /// Stops writing: what is sent from now on is dropped.
    pub fn finish(self) {
        self.closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_lines_skipping_blank_and_over_long_ones() {
        let mut input = b"{\"a\":1}\r\n\n   \n".to_vec();
        input.extend(vec![b'x'; MAX_LINE + 10]);
        input.extend(b"\n{\"b\":2}");
        let mut rx = read_lines(std::io::Cursor::new(input));
        let mut frames = Vec::new();
        while let Some(frame) = rx.recv().await {
            frames.push(frame);
        }
        assert!(matches!(&frames[0], Frame::Line(l) if l == b"{\"a\":1}"));
        assert!(matches!(&frames[1], Frame::TooLong));
        assert!(matches!(&frames[2], Frame::Line(l) if l == b"{\"b\":2}"));
        assert_eq!(frames.len(), 3);
    }

    #[test]
    fn writes_every_message_before_finishing() {
        #[derive(Clone, Default)]
        struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Shared::default();
        let writer = LineWriter::new(out.clone());
        let outbox = writer.outbox();
        for n in 0..100 {
            assert!(outbox.send(Message::notification("n", serde_json::json!({ "n": n }))));
        }
        writer.finish();
        assert!(!outbox.send(Message::notification("late", serde_json::json!({}))));
        let written = out.0.lock().unwrap().clone();
        assert_eq!(written.iter().filter(|b| **b == b'\n').count(), 100);
    }
}
