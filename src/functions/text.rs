//! Trino's string functions (`string.md`) beyond `string`'s: `codepoint`,
//! `hamming_distance`, `soundex`, `split`, `split_to_map`, `split_to_multimap`,
//! `from_utf8` (invalid sequences become U+FFFD, as in Trino).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListBuilder, MapBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, TypeSignature, Volatility};

use super::invalid_argument;
use super::simple::function;

use super::simple::utf8 as text;

fn list_of_strings() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

fn map_type(value: DataType) -> DataType {
    let kv = Fields::from(vec![Field::new("keys", DataType::Utf8, false), Field::new("values", value, true)]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(kv), false)), false)
}

pub fn functions() -> Vec<ScalarUDF> {
    let n = |k| Signature::any(k, Volatility::Immutable);
    let two_or_three = Signature::one_of(vec![TypeSignature::Any(2), TypeSignature::Any(3)], Volatility::Immutable);
    vec![
        function("codepoint", n(1), |_| Ok(DataType::Int64), codepoint),
        function("hamming_distance", n(2), |_| Ok(DataType::Int64), hamming_distance),
        function("soundex", n(1), |_| Ok(DataType::Utf8), soundex),
        function("from_utf8", n(1), |_| Ok(DataType::Utf8), from_utf8),
        function("split", two_or_three, |_| Ok(list_of_strings()), split),
        function("split_to_map", n(3), |_| Ok(map_type(DataType::Utf8)), split_to_map),
        function("split_to_multimap", n(3), |_| Ok(map_type(list_of_strings())), split_to_multimap),
    ]
}

fn from_utf8(args: &[ArrayRef]) -> Result<ArrayRef> {
    let bytes = cast(&args[0], &DataType::Binary)?;
    let out: StringArray =
        bytes.as_binary::<i32>().iter().map(|b| b.map(|b| String::from_utf8_lossy(b).into_owned())).collect();
    Ok(Arc::new(out))
}

fn codepoint(args: &[ArrayRef]) -> Result<ArrayRef> {
    let out: Int64Array = text(&args[0])?
        .iter()
        .map(|s| {
            s.map(|s| {
                let mut chars = s.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Ok(c as i64),
                    _ => Err(invalid_argument("Input string must be a single character string")),
                }
            })
            .transpose()
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

fn hamming_distance(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (a, b) = (text(&args[0])?, text(&args[1])?);
    let out: Int64Array = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => {
                let (x, y): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
                if x.len() != y.len() {
                    return Err(invalid_argument(
                        "The input strings to hamming_distance function must have the same length",
                    ));
                }
                Ok(Some(x.iter().zip(&y).filter(|(p, q)| p != q).count() as i64))
            }
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// American Soundex: the first letter, then up to three digits of the following
/// consonants' groups, adjacent repeats (also across `h` and `w`) once.
fn soundex_of(s: &str) -> String {
    let code = |c: char| match c.to_ascii_lowercase() {
        'b' | 'f' | 'p' | 'v' => Some('1'),
        'c' | 'g' | 'j' | 'k' | 'q' | 's' | 'x' | 'z' => Some('2'),
        'd' | 't' => Some('3'),
        'l' => Some('4'),
        'm' | 'n' => Some('5'),
        'r' => Some('6'),
        _ => None,
    };
    let letters: Vec<char> = s.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    let Some(&first) = letters.first() else { return String::new() };
    let mut out = first.to_ascii_uppercase().to_string();
    let mut last = code(first);
    for &c in &letters[1..] {
        let lower = c.to_ascii_lowercase();
        if lower == 'h' || lower == 'w' {
            continue;
        }
        let digit = code(c);
        if digit.is_some() && digit != last {
            out.push(digit.unwrap_or('0'));
            if out.len() == 4 {
                break;
            }
        }
        last = digit;
    }
    while out.len() < 4 {
        out.push('0');
    }
    out
}

fn soundex(args: &[ArrayRef]) -> Result<ArrayRef> {
    let out: StringArray = text(&args[0])?.iter().map(|s| s.map(soundex_of)).collect();
    Ok(Arc::new(out))
}

fn split(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (s, d) = (text(&args[0])?, text(&args[1])?);
    let limits = args.get(2).map(|l| cast(l, &DataType::Int64)).transpose()?;
    let limits = limits.as_ref().map(|l| l.as_primitive::<Int64Type>());
    let mut out = ListBuilder::new(StringBuilder::new());
    for i in 0..s.len() {
        if s.is_null(i) || d.is_null(i) || limits.is_some_and(|l| l.is_null(i)) {
            out.append(false);
            continue;
        }
        let (value, delimiter) = (s.value(i), d.value(i));
        if delimiter.is_empty() {
            return Err(invalid_argument("The delimiter may not be the empty string"));
        }
        match limits.map(|l| l.value(i)) {
            Some(limit) if limit <= 0 => return Err(invalid_argument("Limit must be positive")),
            Some(limit) => value.splitn(limit as usize, delimiter).for_each(|p| out.values().append_value(p)),
            None => value.split(delimiter).for_each(|p| out.values().append_value(p)),
        }
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
}

/// Each row's `key<kv>value` pairs between entry delimiters.
fn entries<'a>(value: &'a str, entry: &str, kv: &str) -> Result<Vec<(&'a str, &'a str)>> {
    if entry.is_empty() || kv.is_empty() || entry == kv {
        return Err(invalid_argument("the entry and key-value delimiters must be distinct and not empty"));
    }
    value
        .split(entry)
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.split_once(kv).ok_or_else(|| {
                invalid_argument(format!(
                    "Key-value delimiter must appear exactly once in each entry. Bad input: '{e}'"
                ))
            })
        })
        .collect()
}

fn split_to_map(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (s, e, kv) = (text(&args[0])?, text(&args[1])?, text(&args[2])?);
    let mut out = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for i in 0..s.len() {
        if s.is_null(i) || e.is_null(i) || kv.is_null(i) {
            out.append(false)?;
            continue;
        }
        let pairs = entries(s.value(i), e.value(i), kv.value(i))?;
        let mut seen = std::collections::HashSet::new();
        for (k, v) in pairs {
            if !seen.insert(k) {
                return Err(invalid_argument(format!("Duplicate keys ({k}) are not allowed")));
            }
            out.keys().append_value(k);
            out.values().append_value(v);
        }
        out.append(true)?;
    }
    Ok(Arc::new(out.finish()))
}

fn split_to_multimap(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (s, e, kv) = (text(&args[0])?, text(&args[1])?, text(&args[2])?);
    let mut out = MapBuilder::new(None, StringBuilder::new(), ListBuilder::new(StringBuilder::new()));
    for i in 0..s.len() {
        if s.is_null(i) || e.is_null(i) || kv.is_null(i) {
            out.append(false)?;
            continue;
        }
        let mut grouped: Vec<(&str, Vec<&str>)> = Vec::new();
        for (k, v) in entries(s.value(i), e.value(i), kv.value(i))? {
            match grouped.iter_mut().find(|(g, _)| *g == k) {
                Some((_, vs)) => vs.push(v),
                None => grouped.push((k, vec![v])),
            }
        }
        for (k, vs) in grouped {
            out.keys().append_value(k);
            vs.iter().for_each(|v| out.values().values().append_value(v));
            out.values().append(true);
        }
        out.append(true)?;
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn soundex_as_american_soundex() {
        for (word, code) in [
            ("Robert", "R163"),
            ("Rupert", "R163"),
            ("Tymczak", "T522"),
            ("Pfister", "P236"),
            ("Honeyman", "H555"),
            ("CHINA", "C500"),
        ] {
            assert_eq!(super::soundex_of(word), code, "{word}");
        }
    }
}
