//! Trino's string functions (`string.md`) that DataFusion lacks or reads otherwise:
//! `luhn_check`, `title_case`, and `replace`, whose empty search string matches
//! between every two characters (and at both ends), as Java's does.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, TypeSignature, Volatility};

use super::simple::{fixed, function};

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
        function(
            "replace",
            Signature::one_of(vec![TypeSignature::String(2), TypeSignature::String(3)], Volatility::Immutable),
            |_| Ok(DataType::Utf8),
            replace,
        ),
    ]
}

/// `replace(s, search[, by])`: every `search` in `s` replaced by `by` (removed without
/// it); an empty `search` puts `by` between every two characters and at both ends.
fn replace(args: &[ArrayRef]) -> Result<ArrayRef> {
    let texts: Vec<ArrayRef> = args.iter().map(|a| cast(a, &DataType::Utf8)).collect::<Result<_, _>>()?;
    let (s, search) = (texts[0].as_string::<i32>(), texts[1].as_string::<i32>());
    let by = texts.get(2).map(|a| a.as_string::<i32>());
    let out: StringArray = (0..s.len())
        .map(|i| {
            let to = match by {
                Some(b) if b.is_null(i) => return None,
                Some(b) => b.value(i),
                None => "",
            };
            if s.is_null(i) || search.is_null(i) {
                return None;
            }
            let (text, from) = (s.value(i), search.value(i));
            if !from.is_empty() {
                return Some(text.replace(from, to));
            }
            let mut out = String::with_capacity(text.len() + (text.chars().count() + 1) * to.len());
            out.push_str(to);
            for c in text.chars() {
                out.push(c);
                out.push_str(to);
            }
            Some(out)
        })
        .collect();
    Ok(std::sync::Arc::new(out))
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
    fn replace_as_trino_and_java_read_it() {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        let column = |v: &[Option<&str>]| std::sync::Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let s = column(&[Some("abc"), Some("abcb"), Some("abcb"), None, Some("")]);
        let from = column(&[Some(""), Some("b"), Some("b"), Some("a"), Some("")]);
        let to = column(&[Some("x"), Some("yy"), None, Some("z"), Some("-")]);
        let out = super::replace(&[s.clone(), from.clone(), to]).unwrap();
        let out: Vec<Option<&str>> = out.as_any().downcast_ref::<StringArray>().unwrap().iter().collect();
        assert_eq!(out, [Some("xaxbxcx"), Some("ayycyy"), None, None, Some("-")]);
        let removed = super::replace(&[s, from]).unwrap();
        let removed: Vec<Option<&str>> = removed.as_any().downcast_ref::<StringArray>().unwrap().iter().collect();
        assert_eq!(removed, [Some("abc"), Some("ac"), Some("ac"), None, Some("")]);
    }

    #[test]
    fn title_case_as_documented() {
        assert_eq!(super::title_case("hello world"), "Hello World");
        assert_eq!(super::title_case("hELLO  wORLD"), "Hello  World");
    }
}
