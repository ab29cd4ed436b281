//! A local server: a process in the OS sandbox of `exec.run`
//! ([`crate::exec`]), JSON-RPC one message per line on its stdin and
//! stdout.
//!
//! The process is started and waited for on a thread of its own (the
//! sandbox ties a command's life to the thread that starts it), and dies
//! with every process it started when it is stopped or capstan exits.
//! Its stdout is read on another thread: lines that are not JSON-RPC are
//! counted and reported a few at a time, and past [`MAX_NOISE`] of them
//! the server is stopped as broken. Its stderr is drained all the time (a
//! flood never blocks the server or capstan), keeping only the last
//! [`ERROR_TAIL`](crate::exec::service::ERROR_TAIL) bytes for reports
//! ([`crate::exec::service`]). Messages to it are written by a
//! writer thread, so a server that stops reading holds up nobody.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::connection::{Incoming, Link};
use crate::exec::{
    Cancel, CommandLine, ExecGrants, ExecRequest, ServiceSpec, TailReport, start_service,
};
use crate::mcp::jsonrpc::Message;
use crate::mcp::outbox::Outbox;

/// The most lines of stdout that are not JSON-RPC before the server is
/// stopped.
pub const MAX_NOISE: u64 = 200;

/// The longest line read from stdout.
pub const MAX_LINE: usize = crate::mcp::stdio::MAX_LINE;

/// The end of a server's standard error, and how much it wrote in all.
pub use crate::exec::ErrorTail;

/// How the end of a server's standard error is told: its last five lines
/// and its size.
const STDERR_REPORT: TailReport = TailReport {
    lines: 5,
    max_len: 800,
    with_size: true,
};

/// Starts `argv` with `env` under `grants`, the workspace writable with
/// `write` (the caller checked that the
/// whole sandbox is there) and links it.
pub fn start(
    name: &str,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    write: bool,
    grants: ExecGrants,
) -> Result<Link, String> {
    let (incoming_tx, incoming) = mpsc::unbounded_channel();
    let cancel = Cancel::new();
    let mut request = ExecRequest::new(CommandLine::Argv(argv));
    request.call_id = format!("mcp__{name}");
    request.write = write;
    request.timeout = None;
    let closed_tx = incoming_tx.clone();
    let spec = ServiceSpec {
        request,
        grants,
        env,
        thread: format!("mcp-{name}"),
        noun: "the server",
        tail: STDERR_REPORT,
    };
    let pipes = start_service(spec, &cancel, move |how, _| {
        let _ = closed_tx.send(Incoming::Closed(how));
    })
    .map_err(|e| e.to_string())?;
    let stderr = pipes.stderr;

    let reader_cancel = cancel.clone();
    let output = pipes.stdout;
    let _ = std::thread::Builder::new()
        .name(format!("mcp-{name}-stdout"))
        .spawn(move || read_messages(BufReader::new(output), &incoming_tx, &reader_cancel));

    let (line_tx, line_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut input = pipes.stdin;
    let _ = std::thread::Builder::new()
        .name(format!("mcp-{name}-stdin"))
        .spawn(move || {
            while let Ok(line) = line_rx.recv() {
                if input.write_all(&line).and_then(|()| input.flush()).is_err() {
                    break;
                }
            }
        });
    let outbox = Outbox::new(Arc::new(move |message: Message| {
        line_tx.send(message.to_line()).is_ok()
    }));
    let stop_cancel = cancel;
    Ok(Link {
        outbox,
        incoming,
        stop: Arc::new(move || stop_cancel.cancel()),
        stderr: Some(stderr),
    })
}

/// Reads messages from a server's stdout until it ends; lines that are
/// not messages are reported (the first few, then every hundredth) and
/// past [`MAX_NOISE`] stop the server.
fn read_messages(
    mut output: impl BufRead,
    incoming: &mpsc::UnboundedSender<Incoming>,
    cancel: &Cancel,
) {
    let mut line = Vec::new();
    let mut noise = 0u64;
    loop {
        line.clear();
        let read = output
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let complete = line.ends_with(b"\n");
        if !complete && line.len() > MAX_LINE {
            // Skip the rest of the long line.
            let mut rest = Vec::new();
            while !rest.ends_with(b"\n") {
                rest.clear();
                match output.by_ref().take(1 << 20).read_until(b'\n', &mut rest) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
            noise += 1;
            let _ = incoming.send(Incoming::Noise(format!(
                "a line over {MAX_LINE} bytes on stdout was skipped"
            )));
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match Message::parse(text) {
            Ok(message) => {
                if incoming.send(Incoming::Message(message)).is_err() {
                    return;
                }
            }
            Err(_) => {
                noise += 1;
                if noise <= 3 || noise.is_multiple_of(100) {
                    let shown: String = String::from_utf8_lossy(text).chars().take(120).collect();
                    let _ = incoming.send(Incoming::Noise(format!(
                        "stdout line {noise} is not JSON-RPC: {}",
                        crate::escape::line(&shown)
                    )));
                }
                if noise > MAX_NOISE {
                    let _ = incoming.send(Incoming::Closed(format!(
                        "the server wrote more than {MAX_NOISE} lines on stdout that are not JSON-RPC (logs belong on stderr), so it was stopped"
                    )));
                    cancel.cancel();
                    return;
                }
            }
        }
    }
}
