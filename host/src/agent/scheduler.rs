//! How one answer's tool calls are grouped and what their results may hold.
//!
//! Consecutive calls that change nothing form one batch and run
//! concurrently; a call that can change something is a batch of its own, so
//! it sees everything before it done and nothing after it started. Results
//! always go back in the order the model asked for them.

use std::ops::Range;

/// Splits calls into batches, given whether each call only reads.
pub fn batches(read_only: &[bool]) -> Vec<Range<usize>> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < read_only.len() {
        let mut end = start + 1;
        if read_only[start] {
            while end < read_only.len() && read_only[end] {
                end += 1;
            }
        }
        batches.push(start..end);
        start = end;
    }
    batches
}

/// Cuts a tool result longer than `cap` bytes (at a character boundary)
/// and says how much was left out and what to do.
pub fn cap_result(text: String, cap: usize) -> String {
    if text.len() <= cap {
        return text;
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let omitted = text.len() - end;
    let mut capped = text;
    capped.truncate(end);
    capped.push_str(&format!(
        "\n[output truncated: {omitted} more bytes not shown; ask for less, e.g. a narrower pattern or an offset and limit]"
    ));
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_group_and_writes_stand_alone() {
        assert_eq!(batches(&[]), Vec::<Range<usize>>::new());
        assert_eq!(batches(&[true, true, true]), vec![0..3]);
        assert_eq!(
            batches(&[true, true, false, true, false, false, true]),
            vec![0..2, 2..3, 3..4, 4..5, 5..6, 6..7]
        );
        assert_eq!(batches(&[false, true, true]), vec![0..1, 1..3]);
    }

    #[test]
    fn long_results_are_cut_at_a_character_boundary_with_a_note() {
        assert_eq!(cap_result("short".into(), 10), "short");
        let capped = cap_result("ééééé".into(), 5);
        assert!(capped.starts_with("éé\n[output truncated: 6 more bytes"));
    }
}
