//! LSP's base protocol: each message is a header (`Content-Length: N`,
//! lines ending in `\r\n`, then an empty line) and N bytes of JSON.
//!
//! What a server writes is untrusted: headers and messages are capped, a
//! body that is not JSON is skipped and reported, and a header that cannot
//! be read ends the stream.

use std::io::{BufRead, Read};

use serde_json::Value;

/// The largest message read from a server.
pub const MAX_MESSAGE: usize = 16 << 20;

/// The longest header line, and the most lines a header may have.
const MAX_HEADER_LINE: usize = 1024;
const MAX_HEADER_LINES: usize = 32;

/// What one read from a server's stdout gave.
#[derive(Debug)]
pub enum Frame {
    /// A message.
    Message(Value),
    /// A message whose body was not JSON, skipped.
    Skipped(String),
    /// The stream cannot be followed any more, and why.
    Broken(String),
    /// The stream ended.
    End,
}

/// Reads the next message of `input`.
pub fn read_frame(input: &mut impl BufRead) -> Frame {
    let mut length: Option<usize> = None;
    let mut lines = 0;
    loop {
        let mut line = Vec::new();
        match input
            .by_ref()
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) if lines == 0 => return Frame::End,
            Ok(0) | Err(_) => return Frame::End,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            return Frame::Broken(format!(
                "a header line longer than {MAX_HEADER_LINE} bytes (not the LSP base protocol; logs belong on stderr)"
            ));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if lines == 0 {
                continue;
            }
            break;
        }
        lines += 1;
        if lines > MAX_HEADER_LINES {
            return Frame::Broken(format!(
                "a header of more than {MAX_HEADER_LINES} lines (not the LSP base protocol; logs belong on stderr)"
            ));
        }
        let Some((name, value)) = text.split_once(':') else {
            return Frame::Broken(format!(
                "a header line that is not `Name: value`: {} (not the LSP base protocol; logs belong on stderr)",
                crate::escape::line(&text.chars().take(80).collect::<String>())
            ));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            match value.trim().parse::<usize>() {
                Ok(n) => length = Some(n),
                Err(_) => {
                    return Frame::Broken(format!(
                        "a Content-Length that is not a number: {}",
                        crate::escape::line(value.trim())
                    ));
                }
            }
        }
    }
    let Some(length) = length else {
        return Frame::Broken("a message header without Content-Length".to_string());
    };
    if length > MAX_MESSAGE {
        return Frame::Broken(format!(
            "a message of {length} bytes, over the {} MiB a message may have",
            MAX_MESSAGE >> 20
        ));
    }
    let mut body = vec![0u8; length];
    if input.read_exact(&mut body).is_err() {
        return Frame::End;
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(value) if value.is_object() => Frame::Message(value),
        _ => Frame::Skipped(format!(
            "a message of {length} bytes that is not a JSON object"
        )),
    }
}

/// `message` framed for a server's stdin.
pub fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_round_trip_and_extra_headers_are_ignored() {
        let mut bytes = frame(&json!({"jsonrpc": "2.0", "id": 1, "result": "é"}));
        bytes.extend_from_slice(
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}",
        );
        let mut input = std::io::Cursor::new(bytes);
        match read_frame(&mut input) {
            Frame::Message(v) => assert_eq!(v["result"], "é"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(read_frame(&mut input), Frame::Message(_)));
        assert!(matches!(read_frame(&mut input), Frame::End));
    }

    #[test]
    fn garbage_and_giant_messages_break_the_stream() {
        let mut input = std::io::Cursor::new(b"hello world\n".to_vec());
        assert!(matches!(read_frame(&mut input), Frame::Broken(_)));
        let mut input = std::io::Cursor::new(b"Content-Length: 999999999999\r\n\r\n".to_vec());
        match read_frame(&mut input) {
            Frame::Broken(why) => assert!(why.contains("over the 16 MiB"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut input = std::io::Cursor::new(vec![b'x'; 5000]);
        assert!(matches!(read_frame(&mut input), Frame::Broken(_)));
        let mut input = std::io::Cursor::new(b"Content-Length: 3\r\n\r\nabc".to_vec());
        assert!(matches!(read_frame(&mut input), Frame::Skipped(_)));
    }
}
