//! An incremental Server-Sent Events parser: bytes in as they arrive from
//! the network, complete events out.
//!
//! It follows the WHATWG event-stream rules that the model APIs rely on:
//! lines end in `\n` or `\r\n`; `event:` names the event, `data:` lines are
//! joined with `\n`, lines starting with `:` are comments, one space after
//! the colon is dropped, and a blank line delivers the event. An event whose
//! blank line never arrived is not delivered. Bytes are only decoded once a
//! whole line is in, so a UTF-8 character split across two chunks is fine.

/// The longest line accepted; a server that sends more without a newline is
/// broken, and buffering it forever would only eat memory.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One delivered event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, or `message` when none was given.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why a stream could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line was not valid UTF-8.
    #[error("the event stream has a line that is not valid UTF-8 (line {line})")]
    InvalidUtf8 {
        /// The line's number, counting from 1.
        line: usize,
    },
    /// A line grew past the limit without ending.
    #[error("the event stream has a line longer than {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
}

/// Parses an event stream fed to it in chunks of any size.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet ended.
    pending: Vec<u8>,
    /// The `event:` name of the event being built.
    event: Option<String>,
    /// The `data:` lines of the event being built, each followed by `\n`.
    data: String,
    /// Whether any `data:` line arrived for the event being built.
    has_data: bool,
    /// Lines seen so far, for error messages.
    lines_seen: usize,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next chunk of bytes and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&byte| byte == b'\n') {
            self.pending.extend_from_slice(&rest[..newline]);
            rest = &rest[newline + 1..];
            let mut line = std::mem::take(&mut self.pending);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.lines_seen += 1;
            let text = String::from_utf8(line).map_err(|_| SseError::InvalidUtf8 {
                line: self.lines_seen,
            })?;
            if let Some(event) = self.take_line(&text) {
                events.push(event);
            }
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(SseError::LineTooLong {
                limit: MAX_LINE_BYTES,
            });
        }
        Ok(events)
    }

    /// Applies one complete line; returns an event when the line was blank
    /// and an event with data was pending.
    fn take_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = self.event.take();
            if !self.has_data {
                self.data.clear();
                return None;
            }
            self.has_data = false;
            let mut data = std::mem::take(&mut self.data);
            data.pop(); // the `\n` after the last data line
            return Some(SseEvent {
                event: event.unwrap_or_else(|| "message".to_string()),
                data,
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            // `id` and `retry` matter to browsers reconnecting, not to us;
            // unknown fields are ignored as the standard says.
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(parser.feed(chunk)?);
        }
        Ok(events)
    }

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.to_string(),
            data: data.to_string(),
        }
    }

    #[test]
    fn named_events_with_lf_endings() {
        let events =
            parse_all(&[b"event: ping\ndata: {}\n\nevent: stop\ndata: {\"a\":1}\n\n"]).unwrap();
        assert_eq!(
            events,
            vec![event("ping", "{}"), event("stop", "{\"a\":1}")]
        );
    }

    #[test]
    fn crlf_endings_and_default_event_name() {
        let events = parse_all(&[b"data: hello\r\n\r\ndata: world\r\n\r\n"]).unwrap();
        assert_eq!(
            events,
            vec![event("message", "hello"), event("message", "world")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let events = parse_all(&[b"data: one\ndata:two\ndata:  three\n\n"]).unwrap();
        assert_eq!(events, vec![event("message", "one\ntwo\n three")]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events =
            parse_all(&[b": keep-alive\nid: 7\nretry: 100\nfoo: bar\ndata: x\n\n: bye\n\n"])
                .unwrap();
        assert_eq!(events, vec![event("message", "x")]);
    }

    #[test]
    fn event_split_across_arbitrary_chunks() {
        let whole = b"event: delta\r\ndata: {\"text\":\"hi\"}\r\n\r\n";
        for split in 0..whole.len() {
            let events = parse_all(&[&whole[..split], &whole[split..]]).unwrap();
            assert_eq!(
                events,
                vec![event("delta", "{\"text\":\"hi\"}")],
                "split at {split}"
            );
        }
    }

    #[test]
    fn utf8_character_split_across_chunks() {
        let whole = "data: caf\u{e9} \u{1f980}\n\n".as_bytes();
        let crab_start = whole.len() - 5;
        let events = parse_all(&[&whole[..crab_start + 2], &whole[crab_start + 2..]]).unwrap();
        assert_eq!(events, vec![event("message", "caf\u{e9} \u{1f980}")]);
    }

    #[test]
    fn final_event_without_blank_line_is_not_delivered() {
        let events = parse_all(&[b"data: first\n\ndata: second\n"]).unwrap();
        assert_eq!(events, vec![event("message", "first")]);
    }

    #[test]
    fn blank_line_without_data_delivers_nothing_and_resets_the_name() {
        let events = parse_all(&[b"event: lonely\n\ndata: x\n\n"]).unwrap();
        assert_eq!(events, vec![event("message", "x")]);
    }

    #[test]
    fn line_without_colon_is_a_field_with_empty_value() {
        let events = parse_all(&[b"data\n\n"]).unwrap();
        assert_eq!(events, vec![event("message", "")]);
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_the_line() {
        let error = parse_all(&[b"data: ok\n\ndata: \xff\xfe\n\n"]).unwrap_err();
        assert_eq!(error, SseError::InvalidUtf8 { line: 3 });
    }

    #[test]
    fn endless_line_is_an_error() {
        let mut parser = SseParser::new();
        let chunk = vec![b'a'; 1024 * 1024];
        let mut result = Ok(Vec::new());
        for _ in 0..17 {
            result = parser.feed(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(
            result.unwrap_err(),
            SseError::LineTooLong {
                limit: MAX_LINE_BYTES
            }
        );
    }
}
