//! Result rows written by the coordinator straight as csv or tsv lines, for a client
//! that asks for them (`flotilla sql --output-format csv|tsv` does, through
//! `StatementClient::with_rows_as_text`). `statement::get_results` calls
//! [`write_delimited_rows`]; the lines equal what the client would make of the same
//! rows sent as JSON (a unit test holds them to [`super::rows_to_text`]).
//!
//! Why: printing a large result spent more CPU in the client, turning JSON back into
//! text, than in the coordinator writing it. Written from the Arrow arrays once, the
//! text only has to be copied to the client's output.

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use datafusion::arrow;
use serde_json::Value;

use super::text::Delimited;
use super::{column_to_json, date_digits, float_json, push_decimal, CellWriter, Cells};

/// Appends a batch's rows to `out` as `style` lines, each ending in `\n`; a null is an
/// empty cell, as the client prints one.
pub fn write_delimited_rows(batch: &RecordBatch, style: Delimited, out: &mut String) -> Result<(), ArrowError> {
    let cells = batch.columns().iter().map(|c| CellWriter::new(c.as_ref())).collect::<Result<Vec<_>, _>>()?;
    let mut digits = Vec::with_capacity(48);
    for row in 0..batch.num_rows() {
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                out.push(style.sep());
            }
            if cell.nulls.is_some_and(|n| n.is_null(row)) {
                continue;
            }
            match &cell.values {
                Cells::Values(v) => style.value(out, &v[row]),
                Cells::Int64(a) => out.push_str(itoa::Buffer::new().format(a.value(row))),
                Cells::Int32(a) => out.push_str(itoa::Buffer::new().format(a.value(row))),
                Cells::Float64(a) => style.value(out, &float_json(a.value(row))),
                Cells::Decimal128(a, s) => {
                    digits.clear();
                    push_decimal(itoa::Buffer::new().format(a.value(row)), *s, &mut digits);
                    out.push_str(ascii(&digits));
                }
                Cells::Utf8(a) => style.field(out, a.value(row)),
                Cells::LargeUtf8(a) => style.field(out, a.value(row)),
                Cells::Utf8View(a) => style.field(out, a.value(row)),
                Cells::Date32(a) => match date_digits(a.value(row) as i64) {
                    Some(text) => out.push_str(ascii(&text)),
                    None => {
                        let v = column_to_json(&a.slice(row, 1))?.pop().unwrap_or(Value::Null);
                        style.value(out, &v)
                    }
                },
                Cells::Boolean(a) => out.push_str(if a.value(row) { "true" } else { "false" }),
            }
        }
        out.push('\n');
    }
    Ok(())
}

/// Digits, signs, points and dashes are ASCII.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{rows_to_text, write_json_rows, OutputFormat};
    use arrow::array::*;
    use arrow::datatypes::Int32Type;
    use std::sync::Arc;

    /// Rows written as text by the coordinator equal the text the client makes of
    /// the same rows written as JSON, for every kind of column either path handles.
    #[test]
    fn delimited_rows_equal_the_clients_text_of_json_rows() {
        let dec = Decimal128Array::from(vec![Some(1234), None, Some(-5), Some(7)]).with_precision_and_scale(15, 2);
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
            Some(vec![]),
            Some(vec![Some(3)]),
        ]);
        let ts = TimestampMicrosecondArray::from(vec![Some(0), None, Some(-1), Some(1_700_000_000_123_456)]);
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("i", Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(7), Some(0)]))),
            ("f", Arc::new(Float64Array::from(vec![Some(0.1), Some(f64::NAN), None, Some(-1e300)]))),
            ("inf", Arc::new(Float64Array::from(vec![f64::INFINITY, 5.0, -0.0, 1e21]))),
            ("r", Arc::new(Float32Array::from(vec![Some(0.1), None, Some(f32::NEG_INFINITY), Some(3.0)]))),
            ("d", Arc::new(dec.unwrap())),
            ("s", Arc::new(StringArray::from(vec![Some("a\"b\\c\n\u{1}"), None, Some("é,x"), Some("t\tab\r")]))),
            (
                "v",
                Arc::new(StringViewArray::from(vec![
                    Some("a string longer than twelve, bytes"),
                    None,
                    Some(""),
                    Some("\""),
                ])),
            ),
            ("ls", Arc::new(LargeStringArray::from(vec![Some("plain"), Some("x\\y"), None, Some("")]))),
            ("dt", Arc::new(Date32Array::from(vec![Some(-1), None, Some(3_000_000), Some(-800_000)]))),
            ("b", Arc::new(BooleanArray::from(vec![Some(true), Some(false), None, Some(true)]))),
            ("n", Arc::new(Int32Array::from(vec![None, Some(-3), Some(4), Some(i32::MAX)]))),
            ("u", Arc::new(UInt64Array::from(vec![Some(u64::MAX), None, Some(0), Some(1)]))),
            ("l", Arc::new(list)),
            ("ts", Arc::new(ts)),
            ("bin", Arc::new(BinaryArray::from(vec![Some(&b"\x00\xff"[..]), None, Some(b""), Some(b"a,b")]))),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        for format in [OutputFormat::Csv, OutputFormat::Tsv] {
            let style = Delimited::for_format(format).unwrap();
            let mut written = String::new();
            write_delimited_rows(&batch, style, &mut written).unwrap();
            write_delimited_rows(&batch.slice(1, 3), style, &mut written).unwrap();
            let mut json = Vec::new();
            write_json_rows(&batch, &mut json).unwrap();
            write_json_rows(&batch.slice(1, 3), &mut json).unwrap();
            let mut want = String::new();
            let rows = rows_to_text(&format!("[{}]", String::from_utf8(json).unwrap()), style, &mut want).unwrap();
            assert_eq!(rows, 7);
            assert_eq!(written, want, "{format:?}");
        }
    }

    #[test]
    fn an_empty_batch_writes_nothing() {
        let batch =
            RecordBatch::try_from_iter(vec![("i", Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef)]).unwrap();
        let mut out = String::new();
        write_delimited_rows(&batch, Delimited::for_format(OutputFormat::Csv).unwrap(), &mut out).unwrap();
        assert_eq!(out, "");
    }
}
