//! Markdown tables (`| a | b |` rows under a `|---|:-:|` delimiter row),
//! drawn with box-drawing lines when they fit the terminal's width.

use super::inline;
use super::wrap::{Look, Piece, paint, width_of};

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Center,
    Right,
}

/// A table: its header, alignments and body rows, each cell as pieces.
pub struct Table {
    header: Vec<Vec<Piece>>,
    aligns: Vec<Align>,
    rows: Vec<Vec<Vec<Piece>>>,
}

impl Table {
    /// The table these source lines make, if they are one: a header row,
    /// a delimiter row with as many cells, then body rows.
    pub fn parse(lines: &[String]) -> Option<Table> {
        let header = cells(lines.first()?);
        let aligns = cells(lines.get(1)?)
            .iter()
            .map(|cell| delimiter(cell))
            .collect::<Option<Vec<Align>>>()?;
        if aligns.len() != header.len() || header.is_empty() {
            return None;
        }
        let render = |cell: &str, look: Look| inline::render(cell, true, look).0;
        let bold = Look {
            bold: true,
            ..Look::default()
        };
        Some(Table {
            header: header.iter().map(|c| render(c, bold)).collect(),
            aligns,
            rows: lines[2..]
                .iter()
                .map(|line| {
                    let mut row: Vec<Vec<Piece>> = cells(line)
                        .iter()
                        .map(|c| render(c, Look::default()))
                        .collect();
                    row.resize(header.len(), Vec::new());
                    row
                })
                .collect(),
        })
    }

    /// The table drawn as rows no wider than `width`, or `None` when it
    /// does not fit.
    pub fn draw(&self, width: usize) -> Option<Vec<String>> {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|c| cell_width(c)).collect();
        for row in &self.rows {
            for (n, cell) in row.iter().enumerate().take(columns) {
                widths[n] = widths[n].max(cell_width(cell));
            }
        }
        let total: usize = widths.iter().sum::<usize>() + 3 * columns + 1;
        if total > width {
            return None;
        }
        let dim = |text: String| {
            paint(&[Piece::new(
                Look {
                    dim: true,
                    ..Look::default()
                },
                text,
            )])
        };
        let rule = |left: &str, middle: &str, right: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            dim(format!("{left}{}{right}", parts.join(middle)))
        };
        let line = |cells: &[Vec<Piece>]| {
            let mut text = dim("│".into());
            for (n, cell) in cells.iter().enumerate().take(columns) {
                let room = widths[n] - cell_width(cell);
                let (before, after) = match self.aligns[n] {
                    Align::Left => (0, room),
                    Align::Right => (room, 0),
                    Align::Center => (room / 2, room - room / 2),
                };
                text.push(' ');
                text.push_str(&" ".repeat(before));
                text.push_str(&paint(cell));
                text.push_str(&" ".repeat(after));
                text.push(' ');
                text.push_str(&dim("│".into()));
            }
            text
        };
        let mut out = vec![rule("┌", "┬", "┐"), line(&self.header), rule("├", "┼", "┤")];
        for row in &self.rows {
            out.push(line(row));
        }
        out.push(rule("└", "┴", "┘"));
        Some(out)
    }

    /// The table as records, for a terminal too narrow for its grid:
    /// each body row as `header: value` pairs.
    pub fn records(&self) -> Vec<Vec<(Vec<Piece>, Vec<Piece>)>> {
        self.rows
            .iter()
            .map(|row| {
                self.header
                    .iter()
                    .cloned()
                    .zip(row.iter().cloned())
                    .collect()
            })
            .collect()
    }
}

fn cell_width(cell: &[Piece]) -> usize {
    cell.iter().map(|p| width_of(&p.text)).sum()
}

/// Whether `line` may be a table's row: it starts with `|`.
pub fn is_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// A row's cells: split at `|` outside code spans and not escaped, the
/// outer pipes dropped, each cell trimmed.
fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let line = line.strip_prefix('|').unwrap_or(line);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('|') => cell.push('|'),
                Some(other) => {
                    cell.push('\\');
                    cell.push(other);
                }
                None => cell.push('\\'),
            },
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell).trim().to_string()),
            c => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell.trim().to_string());
    }
    cells
}

/// A delimiter row's cell: `---`, `:--`, `--:` or `:-:`.
fn delimiter(cell: &str) -> Option<Align> {
    let left = cell.starts_with(':');
    let right = cell.ends_with(':');
    let dashes = cell.trim_start_matches(':').trim_end_matches(':');
    if dashes.is_empty() || !dashes.chars().all(|c| c == '-') {
        return None;
    }
    Some(match (left, right) {
        (true, true) => Align::Center,
        (false, true) => Align::Right,
        _ => Align::Left,
    })
}

#[cfg(test)]
mod tests {
    use super::super::wrap::screen;
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn a_table_is_drawn_with_aligned_columns() {
        let table = Table::parse(&lines(
            "| name | size |\n|:-----|-----:|\n| a.rs | 12 |\n| `b|c` | 3 |",
        ))
        .unwrap();
        let drawn = table.draw(80).unwrap().join("\n");
        assert_eq!(
            screen::rows(&drawn),
            [
                "┌──────┬──────┐",
                "│ name │ size │",
                "├──────┼──────┤",
                "│ a.rs │   12 │",
                "│ b|c  │    3 │",
                "└──────┴──────┘",
            ]
        );
    }

    #[test]
    fn wide_characters_are_measured_by_their_columns() {
        let table = Table::parse(&lines("| 名前 | x |\n|---|---|\n| 日本語 | y |")).unwrap();
        let rows = screen::rows(&table.draw(80).unwrap().join("\n"));
        let widths: Vec<usize> = rows.iter().map(|r| width_of(r)).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "{rows:?}");
    }

    #[test]
    fn too_wide_or_not_a_table() {
        let table = Table::parse(&lines("| a | b |\n|---|---|\n| long cell | other |")).unwrap();
        assert!(table.draw(10).is_none());
        assert_eq!(table.records().len(), 1);
        assert!(Table::parse(&lines("| a | b |\n| c | d |")).is_none());
    }
}
