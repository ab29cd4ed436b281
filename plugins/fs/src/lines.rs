//! Showing lines of text to the model: numbers, long lines, the output cap.

/// Lines longer than this many characters are cut when shown.
pub const MAX_LINE_CHARS: usize = 2000;

/// The most a tool returns, in bytes; past it a tool stops and says how to
/// get the rest.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Iterates over the lines of `text` with their 1-based numbers. A line
/// comes without its `\n` or `\r\n`; the flag says whether it ended in `\r\n`.
pub fn numbered(text: &str) -> impl Iterator<Item = (usize, &str, bool)> {
    text.split_inclusive('\n').enumerate().map(|(index, raw)| {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        match line.strip_suffix('\r') {
            Some(bare) => (index + 1, bare, true),
            None => (index + 1, line, false),
        }
    })
}

/// Counts the lines of `text`: a last line without `\n` counts too.
pub fn count(text: &str) -> usize {
    let newlines = text.bytes().filter(|&byte| byte == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Appends `line`, cut after [`MAX_LINE_CHARS`] characters with a marker
/// saying how long it was.
pub fn push_clipped(out: &mut String, line: &str) {
    // A line of at most MAX_LINE_CHARS bytes has at most that many chars.
    if line.len() <= MAX_LINE_CHARS {
        out.push_str(line);
        return;
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => out.push_str(line),
        Some((cut_at, _)) => {
            out.push_str(&line[..cut_at]);
            out.push_str("… [line cut: ");
            push_number(out, line.chars().count());
            out.push_str(" characters, showing the first ");
            push_number(out, MAX_LINE_CHARS);
            out.push(']');
        }
    }
}

/// Appends `number` in decimal, padded on the left with spaces to `width`.
pub fn push_number_right_aligned(out: &mut String, number: usize, width: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = number;
    loop {
        start -= 1;
        // `rest % 10` is below 10, so the cast cannot truncate.
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let len = digits.len() - start;
    for _ in len..width {
        out.push(' ');
    }
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

/// Appends `number` in decimal.
pub fn push_number(out: &mut String, number: usize) {
    push_number_right_aligned(out, number, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_right_aligned() {
        let mut out = String::new();
        push_number_right_aligned(&mut out, 7, 6);
        out.push('|');
        push_number_right_aligned(&mut out, 1234567, 6);
        out.push('|');
        push_number(&mut out, 0);
        assert_eq!(out, "     7|1234567|0");
    }

    #[test]
    fn counting_lines_counts_a_last_line_without_newline() {
        assert_eq!(count(""), 0);
        assert_eq!(count("a"), 1);
        assert_eq!(count("a\n"), 1);
        assert_eq!(count("a\nb"), 2);
        assert_eq!(count("\n\n"), 2);
    }

    #[test]
    fn numbered_lines_drop_line_endings_and_report_crlf() {
        let lines: Vec<_> = numbered("a\r\nb\n\nc").collect();
        assert_eq!(
            lines,
            vec![
                (1, "a", true),
                (2, "b", false),
                (3, "", false),
                (4, "c", false)
            ]
        );
        assert_eq!(numbered("x\n").count(), count("x\n"));
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let line = "é".repeat(MAX_LINE_CHARS + 5);
        let mut out = String::new();
        push_clipped(&mut out, &line);
        assert!(out.starts_with(&"é".repeat(MAX_LINE_CHARS)));
        assert!(out.ends_with("… [line cut: 2005 characters, showing the first 2000]"));

        let mut short = String::new();
        push_clipped(&mut short, &"é".repeat(MAX_LINE_CHARS));
        assert_eq!(short.chars().count(), MAX_LINE_CHARS);
    }
}
