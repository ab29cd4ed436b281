//! MCP, the Model Context Protocol: capstan serves its tools to other
//! agents (`capstan mcp serve`).
//!
//! The pieces are kept apart so that a client can reuse the lower ones:
//! [`jsonrpc`] (messages, knowing no method), [`outbox`] (where a
//! transport takes messages to send), [`stdio`] (line framing over any
//! byte streams) and [`protocol`] (the revisions
//! and how one is agreed on) are shared; [`server`] (the methods),
//! [`tools`] (the tools offered) and [`http`] (Streamable HTTP) are the
//! server's; [`client`] uses other people's servers inside capstan's
//! grants (`[mcp.servers]`, `.mcp.json`, `capstan mcp add`).
//!
//! The JSON-RPC framing and the methods are written here rather than taken
//! from the `rmcp` crate: rmcp 3.11 speaks all three revisions, but brings
//! some 130 crates (schemars, darling, chrono, its own HTTP stack) to a
//! build that already has hyper, and a call's path would cross its task
//! and channel layers on the way to a handler whose future is not `Send`
//! (its `local` feature changes that for every user of the crate). What
//! the server needs is a few hundred lines on the hyper and tokio already
//! built, and the latency budget of a call (150 µs including the sandbox)
//! leaves little room for more.

pub mod client;
pub mod http;
pub mod jsonrpc;
pub mod outbox;
pub mod protocol;
pub mod server;
pub mod stdio;
pub mod tools;

use std::io::BufReader;
use std::rc::Rc;
use std::time::Duration;

use jsonrpc::{Message, RpcError, code};
use server::Server;
use stdio::{Frame, LineWriter};

/// Serves `server` over stdin and stdout until stdin ends; calls still
/// running then are finished and answered first.
pub async fn serve_stdio(server: Rc<Server>) -> Result<(), String> {
    let writer = LineWriter::new(std::io::stdout());
    let reply = writer.outbox();
    let session = server.open_session(Some(reply.clone()));
    let mut frames = stdio::read_lines(BufReader::new(std::io::stdin()));
    while let Some(frame) = frames.recv().await {
        match frame {
            Frame::Line(line) => match Message::parse(&line) {
                Ok(message) => server.handle(&session, message, &reply, None),
                Err(unreadable) => {
                    reply.send(Message::error(unreadable.id, unreadable.error));
                }
            },
            Frame::TooLong => {
                reply.send(Message::error(
                    serde_json::Value::Null,
                    RpcError::new(
                        code::INVALID_REQUEST,
                        format!(
                            "a message longer than {} bytes was skipped",
                            stdio::MAX_LINE
                        ),
                    ),
                ));
            }
            Frame::Failed(e) => {
                eprintln!("capstan mcp: cannot read stdin: {e}");
                break;
            }
        }
    }
    while session.calls_running() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(session);
    writer.finish();
    Ok(())
}
