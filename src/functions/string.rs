//! Trino's string functions (`string.md`) that DataFusion lacks: `luhn_check` and
//! `title_case`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, BooleanArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::ScalarUDF;

use super::simple::fixed;

/// Whether the digits pass the Luhn check; `None` (NULL) for text that is not
/// digits.
fn luhn(text: &str) -> Option<bool> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sum: u32 = text
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = (b - b'0') as u32;
            match i % 2 {
                1 if d * 2 > 9 => d * 2 - 9,
                1 => d * 2,
                _ => d,
            }
        })
        .sum();
    Some(sum.is_multiple_of(10))
}

/// Each word's first letter upper case, the others lower case; a word starts after
/// white space.
fn title_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start = true;
    for c in text.chars() {
        match start {
            true => out.extend(c.to_uppercase()),
            false => out.extend(c.to_lowercase()),
        }
        start = c.is_whitespace();
    }
    out
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        fixed("luhn_check", vec![DataType::Utf8], DataType::Boolean, |args| {
            let out: BooleanArray = args[0].as_string::<i32>().iter().map(|v| v.and_then(luhn)).collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        fixed("title_case", vec![DataType::Utf8], DataType::Utf8, |args| {
            let out: StringArray = args[0].as_string::<i32>().iter().map(|v| v.map(title_case)).collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn luhn_as_documented() {
        assert_eq!(super::luhn("79927398713"), Some(true));
        assert_eq!(super::luhn("79927398714"), Some(false));
        assert_eq!(super::luhn("12a"), None);
    }

    #[test]
    fn title_case_as_documented() {
        assert_eq!(super::title_case("hello world"), "Hello World");
        assert_eq!(super::title_case("hELLO  wORLD"), "Hello  World");
    }
}
