//! `RowPrinter`: the CLI's output, written as pages arrive instead of after the query.
//! `flotilla sql` and `flotilla local` feed it each page's rows; it owns the output
//! stream and what it must remember between pages (the header, the record count, and
//! for the aligned format a bounded window of rows that sizes the columns, as Trino's
//! CLI does). Memory stays flat on any result; a result that fits in one window
//! prints exactly as `format::format_rows` would.

use std::io::Write;

use serde_json::Value;

use crate::format::{
    aligned_footer, aligned_header, aligned_rows, aligned_widths, format_rows, markdown_header, markdown_rows,
    text_grid, vertical_records, Column, OutputFormat,
};

/// Rows the aligned format holds back to size its columns.
pub const ALIGNED_WINDOW: usize = 10_000;

pub struct RowPrinter<W: Write> {
    format: OutputFormat,
    out: W,
    columns: Vec<Column>,
    /// Aligned rows not printed yet.
    window: Vec<Vec<Value>>,
    /// Aligned column widths printed so far; later windows never shrink them.
    widths: Option<Vec<usize>>,
    printed: usize,
    header_done: bool,
}

impl<W: Write> RowPrinter<W> {
    pub fn new(format: OutputFormat, out: W) -> Self {
        RowPrinter {
            format,
            out,
            columns: Vec::new(),
            window: Vec::new(),
            widths: None,
            printed: 0,
            header_done: false,
        }
    }

    pub fn set_columns(&mut self, columns: Vec<Column>) {
        self.columns = columns;
    }

    /// Prints (or, for the aligned format, may hold back) a page of rows.
    pub fn rows(&mut self, rows: Vec<Vec<Value>>) -> std::io::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        if self.format == OutputFormat::Aligned {
            self.window.extend(rows);
            if self.window.len() >= ALIGNED_WINDOW {
                self.flush_window()?;
            }
            return Ok(());
        }
        let text = match self.format {
            OutputFormat::Vertical => {
                let mut s = String::new();
                vertical_records(&mut s, &self.columns, &rows, self.printed + 1);
                s
            }
            OutputFormat::CsvHeader if self.header_done => format_rows(&self.columns, &rows, OutputFormat::Csv),
            OutputFormat::Markdown => {
                let mut s = if self.header_done { String::new() } else { markdown_header(&self.columns) };
                s.push_str(&markdown_rows(&rows));
                s
            }
            other => format_rows(&self.columns, &rows, other),
        };
        self.header_done = true;
        self.printed += rows.len();
        self.out.write_all(text.as_bytes())
    }

    /// Prints rows a delimited format's text was already made of (see
    /// `StatementClient::with_rows_as_text`), after the header `csv_header` wants.
    pub fn rows_text(&mut self, text: &[u8], rows: usize) -> std::io::Result<()> {
        if self.format == OutputFormat::CsvHeader && !self.header_done {
            self.out.write_all(format_rows(&self.columns, &[], self.format).as_bytes())?;
        }
        self.header_done = true;
        self.printed += rows;
        self.out.write_all(text)
    }

    fn flush_window(&mut self) -> std::io::Result<()> {
        let rows = std::mem::take(&mut self.window);
        let grid = text_grid(&rows, "NULL");
        let widths = aligned_widths(&self.columns, &grid, self.widths.as_deref());
        let mut text = String::new();
        if !self.header_done {
            aligned_header(&mut text, &self.columns, &widths);
            self.header_done = true;
        }
        aligned_rows(&mut text, &self.columns, &grid, &widths);
        self.widths = Some(widths);
        self.printed += rows.len();
        self.out.write_all(text.as_bytes())
    }

    /// Prints what is held back and the format's ending (the aligned row count, a
    /// header for an empty result).
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.format {
            OutputFormat::Aligned => {
                if !self.window.is_empty() || !self.header_done {
                    self.flush_window()?;
                }
                let mut text = String::new();
                aligned_footer(&mut text, self.printed);
                self.out.write_all(text.as_bytes())?;
            }
            OutputFormat::Vertical if self.printed == 0 => self.out.write_all(b"(no rows)\n")?,
            OutputFormat::CsvHeader | OutputFormat::Markdown if !self.header_done => {
                self.out.write_all(format_rows(&self.columns, &[], self.format).as_bytes())?;
            }
            _ => {}
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn columns() -> Vec<Column> {
        vec![
            Column { name: "n".into(), type_name: "bigint".into() },
            Column { name: "s".into(), type_name: "varchar".into() },
        ]
    }

    fn rows(from: i64, to: i64) -> Vec<Vec<Value>> {
        (from..to).map(|i| vec![json!(i), json!(format!("v{i}"))]).collect()
    }

    fn print(format: OutputFormat, pages: &[Vec<Vec<Value>>]) -> String {
        let mut out = Vec::new();
        let mut p = RowPrinter::new(format, &mut out);
        p.set_columns(columns());
        for page in pages {
            p.rows(page.clone()).unwrap();
        }
        p.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn paged_output_equals_whole_output_for_every_format() {
        let formats = [
            OutputFormat::Aligned,
            OutputFormat::Vertical,
            OutputFormat::Csv,
            OutputFormat::CsvHeader,
            OutputFormat::Tsv,
            OutputFormat::Json,
            OutputFormat::Markdown,
        ];
        let pages = vec![rows(0, 3), vec![], rows(3, 7), rows(7, 8)];
        let all = rows(0, 8);
        for f in formats {
            assert_eq!(print(f, &pages), format_rows(&columns(), &all, f), "{f:?}");
            assert_eq!(print(f, &[]), format_rows(&columns(), &[], f), "{f:?} empty");
        }
    }

    #[test]
    fn aligned_output_prints_a_window_at_a_time_with_one_header_and_total() {
        let mut out = Vec::new();
        let mut p = RowPrinter::new(OutputFormat::Aligned, &mut out);
        p.set_columns(columns());
        p.rows(rows(0, ALIGNED_WINDOW as i64)).unwrap();
        // The first window is out before the query ends.
        assert!(p.window.is_empty() && p.printed == ALIGNED_WINDOW);
        p.rows(rows(ALIGNED_WINDOW as i64, ALIGNED_WINDOW as i64 + 5)).unwrap();
        p.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("-+-").count(), 1, "one header rule");
        assert!(text.ends_with(&format!("({} rows)\n", ALIGNED_WINDOW + 5)), "{}", &text[text.len() - 40..]);
        assert_eq!(text.lines().count(), 2 + ALIGNED_WINDOW + 5 + 1);
    }
}
