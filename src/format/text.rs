//! The CLI's text output formats, named like the Trino CLI's `--output-format` values:
//! `flotilla sql` and `flotilla local` print the rows the client collected with
//! [`format_rows`].

use serde_json::{json, Value};

use super::Column;

/// Output formats of the CLI, named like the Trino CLI's `--output-format` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum OutputFormat {
    Aligned,
    Vertical,
    Csv,
    #[value(name = "csv_header")]
    CsvHeader,
    Tsv,
    Json,
    Markdown,
}

/// Text of one value for the text formats: strings bare, `null` as the format's null text.
fn cell_text(v: &Value, null: &str) -> String {
    match v {
        Value::Null => null.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_numeric(type_name: &str) -> bool {
    let base = type_name.split('(').next().unwrap_or("").trim();
    matches!(base, "bigint" | "integer" | "smallint" | "tinyint" | "double" | "real" | "decimal")
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize, right_align: bool) -> String {
    let fill = " ".repeat(w.saturating_sub(width(s)));
    if right_align {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

/// Renders rows in one of the CLI output formats; every line, the last included, ends in `\n`.
pub fn format_rows(columns: &[Column], rows: &[Vec<Value>], format: OutputFormat) -> String {
    match format {
        OutputFormat::Aligned => aligned(columns, rows),
        OutputFormat::Vertical => vertical(columns, rows),
        OutputFormat::Csv => delimited(columns, rows, false, ",", csv_field),
        OutputFormat::CsvHeader => delimited(columns, rows, true, ",", csv_field),
        OutputFormat::Tsv => delimited(columns, rows, false, "\t", tsv_field),
        OutputFormat::Json => json_lines(columns, rows),
        OutputFormat::Markdown => markdown(columns, rows),
    }
}

pub(crate) fn text_grid(rows: &[Vec<Value>], null: &str) -> Vec<Vec<String>> {
    rows.iter().map(|r| r.iter().map(|v| cell_text(v, null)).collect()).collect()
}

fn push_line(out: &mut String, cells: impl IntoIterator<Item = String>, sep: &str) {
    out.push_str(&cells.into_iter().collect::<Vec<_>>().join(sep));
    out.push('\n');
}

/// Mirrors the Trino CLI's aligned table: centered header, `-`/`+` rule, numbers right-aligned.
fn aligned(columns: &[Column], rows: &[Vec<Value>]) -> String {
    let grid = text_grid(rows, "NULL");
    let widths = aligned_widths(columns, &grid, None);
    let mut out = String::new();
    aligned_header(&mut out, columns, &widths);
    aligned_rows(&mut out, columns, &grid, &widths);
    aligned_footer(&mut out, rows.len());
    out
}

/// Column widths of an aligned table: the names', the cells', and at least `floor`.
pub(crate) fn aligned_widths(columns: &[Column], grid: &[Vec<String>], floor: Option<&[usize]>) -> Vec<usize> {
    let mut widths: Vec<usize> = columns.iter().map(|c| width(&c.name)).collect();
    if let Some(floor) = floor {
        for (w, f) in widths.iter_mut().zip(floor) {
            *w = (*w).max(*f);
        }
    }
    for row in grid {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    widths
}

pub(crate) fn aligned_header(out: &mut String, columns: &[Column], widths: &[usize]) {
    let header = columns.iter().zip(widths).map(|(c, &w)| {
        let left = (w - width(&c.name)) / 2;
        format!(" {}{} ", " ".repeat(left), pad(&c.name, w - left, false))
    });
    push_line(out, header, "|");
    push_line(out, widths.iter().map(|w| "-".repeat(w + 2)), "+");
}

pub(crate) fn aligned_rows(out: &mut String, columns: &[Column], grid: &[Vec<String>], widths: &[usize]) {
    for row in grid {
        let cells = row
            .iter()
            .zip(columns.iter().zip(widths))
            .map(|(cell, (c, &w))| format!(" {} ", pad(cell, w, is_numeric(&c.type_name))));
        push_line(out, cells, "|");
    }
}

pub(crate) fn aligned_footer(out: &mut String, rows: usize) {
    let noun = if rows == 1 { "row" } else { "rows" };
    out.push_str(&format!("({rows} {noun})\n"));
}

fn vertical(columns: &[Column], rows: &[Vec<Value>]) -> String {
    if rows.is_empty() {
        return "(no rows)\n".into();
    }
    let mut out = String::new();
    vertical_records(&mut out, columns, rows, 1);
    out
}

/// Vertical records numbered from `first`.
pub(crate) fn vertical_records(out: &mut String, columns: &[Column], rows: &[Vec<Value>], first: usize) {
    let grid = text_grid(rows, "NULL");
    let name_w = columns.iter().map(|c| width(&c.name)).max().unwrap_or(0);
    let value_w = grid.iter().flatten().map(|v| width(v)).max().unwrap_or(0);
    for (n, row) in grid.iter().enumerate() {
        let title = format!("-[ RECORD {} ]", n + first);
        let total = (name_w + 3 + value_w).max(width(&title) + 1);
        out.push_str(&format!("{title}{}\n", "-".repeat(total - width(&title))));
        for (c, cell) in columns.iter().zip(row) {
            out.push_str(&format!("{} | {cell}\n", pad(&c.name, name_w, false)));
        }
    }
}

/// RFC 4180 quoting, applied only to fields that need it.
fn csv_field(out: &mut String, s: &str) {
    // Bytes, not chars: the check runs on every cell of a large result.
    if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n')) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// Backslash goes first so the escapes added afterwards are not doubled.
fn tsv_field(out: &mut String, s: &str) {
    if s.contains(['\\', '\t', '\n', '\r']) {
        out.push_str(&s.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n").replace('\r', "\\r"));
    } else {
        out.push_str(s);
    }
}

/// One value as a delimited cell: strings bare (quoted or escaped by `field`), numbers
/// and booleans as their JSON, nested values as their JSON through `field`, null as
/// nothing. The coordinator's text pages write `Value`s the same way.
fn delimited_value(out: &mut String, v: &Value, field: fn(&mut String, &str)) {
    use std::fmt::Write;
    match v {
        Value::Null => {}
        Value::String(s) => field(out, s),
        Value::Number(_) | Value::Bool(_) => {
            let _ = write!(out, "{v}");
        }
        nested => field(out, &nested.to_string()),
    }
}

/// Written straight into one buffer: this is the CLI's hot path for large results.
fn delimited(columns: &[Column], rows: &[Vec<Value>], header: bool, sep: &str, field: fn(&mut String, &str)) -> String {
    let mut out = String::new();
    if header {
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            field(&mut out, &c.name);
        }
        out.push('\n');
    }
    for row in rows {
        for (i, v) in row.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            delimited_value(&mut out, v, field);
        }
        out.push('\n');
    }
    out
}

/// Written by hand rather than through a `serde_json::Map` so that keys keep column order and
/// duplicate column names are not collapsed.
fn json_lines(columns: &[Column], rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    for row in rows {
        let fields = columns.iter().zip(row).map(|(c, v)| format!("{}:{v}", json!(c.name)));
        out.push('{');
        out.push_str(&fields.collect::<Vec<_>>().join(","));
        out.push_str("}\n");
    }
    out
}

fn markdown(columns: &[Column], rows: &[Vec<Value>]) -> String {
    let mut out = markdown_header(columns);
    out.push_str(&markdown_rows(rows));
    out
}

fn markdown_cell(s: &str) -> String {
    s.replace('|', "\\|").replace("\r\n", "<br>").replace('\n', "<br>")
}

fn markdown_line(cells: Vec<String>) -> String {
    format!("| {} |\n", cells.join(" | "))
}

pub(crate) fn markdown_header(columns: &[Column]) -> String {
    let mut out = markdown_line(columns.iter().map(|c| markdown_cell(c.name.as_str())).collect());
    let rule = columns.iter().map(|c| if is_numeric(&c.type_name) { "---:" } else { "---" });
    out.push_str(&markdown_line(rule.map(String::from).collect()));
    out
}

pub(crate) fn markdown_rows(rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    for row in text_grid(rows, "NULL") {
        out.push_str(&markdown_line(row.iter().map(|c| markdown_cell(c.as_str())).collect()));
    }
    out
}

/// How a delimited format (csv, tsv) writes its cells, for rows turned into text
/// straight from their JSON ([`super::rows_to_text`]).
#[derive(Clone, Copy, Debug)]
pub struct Delimited {
    sep: char,
    field: fn(&mut String, &str),
}

impl Delimited {
    /// `None` for the formats that are not one line per row of delimited cells.
    pub fn for_format(format: OutputFormat) -> Option<Self> {
        match format {
            OutputFormat::Csv | OutputFormat::CsvHeader => Some(Delimited { sep: ',', field: csv_field }),
            OutputFormat::Tsv => Some(Delimited { sep: '\t', field: tsv_field }),
            _ => None,
        }
    }

    /// The format's name, as a client asks the coordinator for it (`csv`, `tsv`).
    pub fn name(&self) -> &'static str {
        if self.sep == ',' {
            "csv"
        } else {
            "tsv"
        }
    }

    /// The style a client named with [`Delimited::name`].
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "csv" => Self::for_format(OutputFormat::Csv),
            "tsv" => Self::for_format(OutputFormat::Tsv),
            _ => None,
        }
    }

    pub(crate) fn sep(&self) -> char {
        self.sep
    }

    /// Writes one text cell, quoted or escaped as the format needs.
    pub(crate) fn field(&self, out: &mut String, s: &str) {
        (self.field)(out, s)
    }

    /// Writes one value as a cell, as the CLI prints it.
    pub(crate) fn value(&self, out: &mut String, v: &Value) {
        delimited_value(out, v, self.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cols(spec: &[(&str, &str)]) -> Vec<Column> {
        let col = |(name, ty): &(&str, &str)| Column { name: name.to_string(), type_name: ty.to_string() };
        spec.iter().map(col).collect()
    }

    #[test]
    fn delimited_formats_quote_and_escape() {
        let cols = cols(&[("a", "varchar"), ("b", "bigint")]);
        let rows = vec![vec![json!("x,y"), json!(1)], vec![json!("say \"hi\""), Value::Null]];
        let csv = format_rows(&cols, &rows, OutputFormat::Csv);
        assert_eq!(csv, "\"x,y\",1\n\"say \"\"hi\"\"\",\n");
        let csv = format_rows(&cols, &rows, OutputFormat::CsvHeader);
        assert!(csv.starts_with("a,b\n"));
        let rows = [vec![json!("t\tn\n\\"), json!(3)]];
        assert_eq!(format_rows(&cols, &rows, OutputFormat::Tsv), "t\\tn\\n\\\\\t3\n");
    }

    #[test]
    fn aligned_right_aligns_numbers() {
        let cols = cols(&[("name", "varchar"), ("amount", "bigint")]);
        let rows = vec![vec![json!("alice"), json!(7)], vec![json!("b"), Value::Null]];
        let text = format_rows(&cols, &rows, OutputFormat::Aligned);
        let want = " name  | amount \n-------+--------\n alice |      7 \n b     |   NULL \n(2 rows)\n";
        assert_eq!(text, want);
        let one = format_rows(&cols, &rows[..1], OutputFormat::Aligned);
        assert!(one.ends_with("(1 row)\n"));
    }

    #[test]
    fn json_markdown_and_vertical() {
        let cols = cols(&[("a", "varchar"), ("n", "double")]);
        let rows = vec![vec![json!("x|y"), json!(1.5)]];
        let json = format_rows(&cols, &rows, OutputFormat::Json);
        assert_eq!(json, "{\"a\":\"x|y\",\"n\":1.5}\n");
        let md = format_rows(&cols, &rows, OutputFormat::Markdown);
        assert_eq!(md, "| a | n |\n| --- | ---: |\n| x\\|y | 1.5 |\n");
        let vertical = format_rows(&cols, &rows, OutputFormat::Vertical);
        assert_eq!(vertical, "-[ RECORD 1 ]-\na | x|y\nn | 1.5\n");
    }
}
