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

#[cfg(test)]
mod tests {
    use super::*;

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
