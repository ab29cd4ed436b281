//! A command's combined output, kept within a cap: its head and its tail,
//! with a note saying how much of the middle was left out.

use std::collections::VecDeque;

/// Bytes kept from the start of the output.
pub const HEAD_BYTES: usize = 10 * 1024;

/// Bytes kept from the end of the output.
pub const TAIL_BYTES: usize = 20 * 1024;

/// Output collected so far: the first [`HEAD_BYTES`] and the last
/// [`TAIL_BYTES`] bytes; memory stays bounded however much arrives.
#[derive(Debug, Clone, Default)]
pub struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl CappedOutput {
    /// Adds a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < HEAD_BYTES {
            let take = chunk.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - TAIL_BYTES..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// How many bytes arrived in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The output as text (invalid UTF-8 replaced), with a note where the
    /// middle was left out.
    pub fn text(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let omitted = self.total - kept;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if omitted > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[… {omitted} bytes of output left out: {} in all; showing the first {} and the last {} …]\n",
                self.total,
                self.head.len(),
                self.tail.len()
            ));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }

    /// How many bytes were left out.
    pub fn omitted(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }
}

/// Turns output arriving in chunks into text, keeping a character split
/// between two chunks whole (invalid UTF-8 is replaced).
#[derive(Debug, Default)]
pub struct TextStream {
    pending: Vec<u8>,
}

impl TextStream {
    /// The text `chunk` completes; an unfinished character at its end
    /// waits for the next chunk.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let keep = unfinished_tail(&self.pending);
        let done = self.pending.len() - keep;
        let text = String::from_utf8_lossy(&self.pending[..done]).into_owned();
        self.pending.drain(..done);
        text
    }

    /// What is left at the end of the output (an unfinished character,
    /// replaced).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// How many bytes at the end of `bytes` begin a UTF-8 character that is
/// not complete yet.
fn unfinished_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xc0 == 0x80 {
            continue;
        }
        let len = match byte {
            0xf0..=0xf7 => 4,
            0xe0..=0xef => 3,
            0xc0..=0xdf => 2,
            _ => 1,
        };
        return if len > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_split_inside_a_character_stays_whole() {
        let bytes = "aé→😀z".as_bytes();
        for split in 0..=bytes.len() {
            let mut stream = TextStream::default();
            let mut text = stream.push(&bytes[..split]);
            text.push_str(&stream.push(&bytes[split..]));
            text.push_str(&stream.finish());
            assert_eq!(text, "aé→😀z", "split at {split}");
        }
        let mut stream = TextStream::default();
        assert_eq!(stream.push(b"\xffok"), "\u{fffd}ok");
        assert_eq!(stream.push(&[0xe2, 0x86]), "");
        assert_eq!(stream.finish(), "\u{fffd}");
    }

    #[test]
    fn small_output_is_kept_whole() {
        let mut out = CappedOutput::default();
        out.push(b"hello ");
        out.push(b"world\n");
        assert_eq!(out.text(), "hello world\n");
        assert_eq!(out.omitted(), 0);
    }

    #[test]
    fn a_flood_keeps_head_and_tail_with_a_note() {
        let mut out = CappedOutput::default();
        out.push(b"FIRST\n");
        for _ in 0..10_000 {
            out.push(&[b'x'; 1000]);
        }
        out.push(b"\nLAST\n");
        let text = out.text();
        assert!(text.starts_with("FIRST\n"));
        assert!(text.ends_with("\nLAST\n"));
        assert!(text.contains("bytes of output left out"));
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 200);
        assert_eq!(out.total(), 6 + 10_000_000 + 6);
    }
}
