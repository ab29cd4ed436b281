//! The stdio transport: one JSON-RPC message per line, read and written by
//! a thread each, so a blocking pipe never holds the async runtime. The
//! reader hands lines to the runtime through a channel; the writer takes
//! messages from any thread and flushes once it has nothing more queued.
//! Both work on any byte streams: the server's own stdin and stdout, or a
//! child process's pipes.

use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;

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

/// The writer thread of a line transport.
pub struct LineWriter {
    outbox: Outbox,
    stop: std_mpsc::Sender<Option<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

impl LineWriter {
    /// Writes messages to `output`, one per line, on a thread of its own.
    pub fn spawn(output: impl Write + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::channel::<Option<Vec<u8>>>();
        let thread = std::thread::Builder::new()
            .name("mcp-write".into())
            .spawn(move || write_loop(output, &rx))?;
        let stop = tx.clone();
        let tx = std::sync::Mutex::new(tx);
        let outbox = Outbox::new(Arc::new(move |message: Message| {
            tx.lock()
                .map(|tx| tx.send(Some(message.to_line())).is_ok())
                .unwrap_or(false)
        }));
        Ok(Self {
            outbox,
            stop,
            thread: Some(thread),
        })
    }

    /// Where messages to write go.
    pub fn outbox(&self) -> Outbox {
        self.outbox.clone()
    }

    /// Waits until everything sent so far is written, then stops the
    /// thread; what is sent later is dropped.
    pub fn finish(mut self) {
        let _ = self.stop.send(None);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn write_loop(mut output: impl Write, rx: &std_mpsc::Receiver<Option<Vec<u8>>>) {
    while let Ok(Some(line)) = rx.recv() {
        if output.write_all(&line).is_err() {
            return;
        }
        // Write what else is queued before flushing once.
        let mut stop = false;
        while let Ok(next) = rx.try_recv() {
            let Some(line) = next else {
                stop = true;
                break;
            };
            if output.write_all(&line).is_err() {
                return;
            }
        }
        if output.flush().is_err() || stop {
            return;
        }
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
        let writer = LineWriter::spawn(out.clone()).unwrap();
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
