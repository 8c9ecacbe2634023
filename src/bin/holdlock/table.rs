//! Plain-text tables for the command line, and text that is safe to print on a terminal.

use std::borrow::Cow;
use std::fmt::Write;

/// Left-aligned columns separated by two spaces; the last column is not padded. Every
/// cell is [`escape`]d first, so that no cell (a lock name, an owner id) can break its
/// row or colour the terminal.
pub(crate) fn render_columns(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| escape(cell)).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(column, cell)| {
                if column + 1 == row.len() {
                    cell.to_string()
                } else {
                    format!("{cell:<width$}", width = widths[column])
                }
            })
            .collect();
        out.push_str(&cells.join("  "));
        out.push('\n');
    }
    out
}

/// `text` as it may be shown on a terminal: like Rust's `escape_debug`, without quotes.
/// Control characters become `\n`, `\r`, `\t`, `\0`, `\x1b` (`\u{85}` beyond ASCII);
/// the line and paragraph separators, bidirectional controls and zero-width characters
/// (which could reorder or hide text) become `\u{202e}`; and a backslash becomes `\\`,
/// so that the escaped form is unambiguous.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, true)
}

/// Like [`escape`], but leaves backslashes alone: for messages that already show names
/// `Debug`-quoted (`"a\nb"`), whose backslashes must not be doubled.
pub(crate) fn sanitize(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

fn escape_with(text: &str, backslash: bool) -> Cow<'_, str> {
    let needs = |c: char| unsafe_on_a_terminal(c) || (backslash && c == '\\');
    if !text.contains(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            '\t' => out.write_str("\\t"),
            '\0' => out.write_str("\\0"),
            '\\' => out.write_str("\\\\"),
            c if c.is_ascii() => write!(out, "\\x{:02x}", u32::from(c)),
            c => write!(out, "\\u{{{:x}}}", u32::from(c)),
        };
    }
    Cow::Owned(out)
}

/// Whether printing `c` raw could change how the rest of a terminal line is shown.
fn unsafe_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["A".to_owned(), "BB".to_owned(), "C".to_owned()],
            vec!["long".to_owned(), "x".to_owned(), "y".to_owned()],
        ];
        assert_eq!(render_columns(&rows), "A     BB  C\nlong  x   y\n");
    }

    #[test]
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(escape("job:42"), "job:42");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nb\tc\r\0"), "a\\nb\\tc\\r\\0");
        assert_eq!(escape("\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(escape("\u{7f}\u{85}"), "\\x7f\\u{85}");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("zero\u{200b}width"), "zero\\u{200b}width");
        assert_eq!(escape(r"C:\dir"), r"C:\\dir");
        assert_eq!(escape("ünïcödé ✓"), "ünïcödé ✓");
        assert_eq!(sanitize(r#"lock "a\nb": x"#), r#"lock "a\nb": x"#);
        assert_eq!(sanitize("a\nb"), "a\\nb");
    }

    #[test]
    fn a_cell_cannot_break_its_row() {
        let rows = vec![
            vec!["NAME".to_owned(), "OWNER".to_owned()],
            vec!["a\nb   fake-owner".to_owned(), "me".to_owned()],
        ];
        let table = render_columns(&rows);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("a\\nb   fake-owner  me"), "{table}");
    }
}
