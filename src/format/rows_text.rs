//! A results page's `data` turned straight into csv or tsv lines, by a scanner written
//! for it. `StatementClient::with_rows_as_text` calls [`rows_to_text`] on each page; the
//! lines equal what [`super::format_rows`] prints for the same rows parsed as `Value`s
//! (a unit test holds them to it).
//!
//! Why by hand: on a large result the client, not the cluster, set the pace. A generic
//! parser validates every string's UTF-8 again, copies strings that need no unescaping
//! and parses numbers only to print them back; here the page is checked as UTF-8 once,
//! strings without escapes are written from the body, and integers are copied as they
//! are (anything with a fraction or exponent goes through `serde_json`, as before, so
//! that its spelling does not change).

use std::ops::Range;

use serde_json::Value;

use super::text::Delimited;

/// The byte range of the value of a top-level member of the JSON object `doc`.
pub fn find_member(doc: &str, name: &str) -> Result<Option<Range<usize>>, String> {
    let b = doc.as_bytes();
    let mut i = expect(b, ws(b, 0), b'{')?;
    i = ws(b, i);
    if b.get(i) == Some(&b'}') {
        return Ok(None);
    }
    loop {
        let key_end = string_end(b, i)?;
        let is_name = &doc[i + 1..key_end - 1] == name;
        let start = ws(b, expect(b, ws(b, key_end), b':')?);
        let end = value_end(b, start)?;
        if is_name {
            return Ok(Some(start..end));
        }
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Ok(None),
            _ => return Err(format!("expected ',' or '}}' at byte {i}")),
        }
    }
}

/// Writes the rows of `data` (an array of arrays, or `null`) as `style` lines into
/// `out`; returns how many rows there were.
pub fn rows_to_text(data: &str, style: Delimited, out: &mut String) -> Result<usize, String> {
    let b = data.as_bytes();
    let mut i = ws(b, 0);
    if b[i..].starts_with(b"null") {
        return Ok(0);
    }
    i = ws(b, expect(b, i, b'[')?);
    let mut rows = 0;
    if b.get(i) == Some(&b']') {
        return Ok(0);
    }
    let mut scratch = String::new();
    loop {
        i = ws(b, expect(b, i, b'[')?);
        let mut first = true;
        while b.get(i) != Some(&b']') {
            if !first {
                i = ws(b, expect(b, i, b',')?);
                out.push(style.sep());
            }
            first = false;
            i = ws(b, cell(data, i, style, out, &mut scratch)?);
        }
        out.push('\n');
        rows += 1;
        i = ws(b, i + 1);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b']') => return Ok(rows),
            _ => return Err(format!("expected ',' or ']' after a row at byte {i}")),
        }
    }
}

/// Writes the value at `i` as a cell; returns where it ends.
fn cell(data: &str, i: usize, style: Delimited, out: &mut String, scratch: &mut String) -> Result<usize, String> {
    let b = data.as_bytes();
    match b.get(i) {
        Some(b'"') => {
            let JsonString { end, escaped, comma } = scan_string(b, i)?;
            let inner = &data[i + 1..end - 1];
            if escaped {
                scratch.clear();
                unescape(inner, scratch)?;
                style.field(out, scratch);
            } else if comma && style.sep() == ',' {
                style.field(out, inner);
            } else {
                out.push_str(inner);
            }
            Ok(end)
        }
        Some(b'[' | b'{') => {
            let end = value_end(b, i)?;
            let nested: Value = serde_json::from_str(&data[i..end]).map_err(|e| e.to_string())?;
            style.field(out, &nested.to_string());
            Ok(end)
        }
        Some(_) => {
            let end = value_end(b, i)?;
            let token = &data[i..end];
            match token {
                "null" => {}
                "true" | "false" => out.push_str(token),
                _ if is_plain_integer(token) => out.push_str(token),
                _ => {
                    let v: Value = serde_json::from_str(token).map_err(|e| format!("bad value '{token}': {e}"))?;
                    if !v.is_number() {
                        return Err(format!("bad value '{token}'"));
                    }
                    out.push_str(&v.to_string());
                }
            }
            Ok(end)
        }
        None => Err("the rows end early".into()),
    }
}

/// An integer a generic parser would print back unchanged: digits, an optional minus,
/// no leading zero, and short enough for an i64.
fn is_plain_integer(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|c| c.is_ascii_digit())
        && (digits == "0" && t == "0" || !digits.starts_with('0'))
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

fn expect(b: &[u8], i: usize, want: u8) -> Result<usize, String> {
    match b.get(i) {
        Some(&c) if c == want => Ok(i + 1),
        Some(&c) => Err(format!("expected '{}' at byte {i}, found '{}'", want as char, c as char)),
        None => Err(format!("expected '{}' at byte {i}, found the end", want as char)),
    }
}

/// A JSON string as [`scan_string`] found it.
struct JsonString {
    /// The index after the closing quote.
    end: usize,
    /// It holds escapes, to be undone before it is written.
    escaped: bool,
    /// It holds a comma, which a csv field must quote.
    comma: bool,
}

/// `i` is at an opening quote. One pass finds the end, escapes and commas: unescaped
/// JSON string content holds no quote, backslash, tab or line break, so only a comma
/// can make a csv field need quoting, and nothing a tsv field escaping.
fn scan_string(b: &[u8], i: usize) -> Result<JsonString, String> {
    if b.get(i) != Some(&b'"') {
        return Err(format!("expected a string at byte {i}"));
    }
    let (mut j, mut escaped, mut comma) = (i + 1, false, false);
    loop {
        match b.get(j) {
            Some(b'"') => return Ok(JsonString { end: j + 1, escaped, comma }),
            Some(b'\\') => {
                escaped = true;
                j += 2;
                continue;
            }
            Some(b',') => comma = true,
            Some(&c) if c < 0x20 => return Err(format!("a control character in a string at byte {j}")),
            Some(_) => {}
            None => return Err(format!("unterminated string at byte {i}")),
        }
        j += 1;
    }
}

fn string_end(b: &[u8], i: usize) -> Result<usize, String> {
    scan_string(b, i).map(|s| s.end)
}

/// The index after the value at `i`: a string, a nested array or object, or a scalar.
fn value_end(b: &[u8], i: usize) -> Result<usize, String> {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'[' | b'{') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Err(format!("unterminated value at byte {i}"))
        }
        Some(_) => {
            let len = b[i..].iter().position(|c| matches!(c, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t'));
            match len {
                Some(0) => Err(format!("expected a value at byte {i}")),
                Some(n) => Ok(i + n),
                None => Ok(b.len()),
            }
        }
        None => Err("expected a value, found the end".into()),
    }
}

/// JSON string escapes, `\uXXXX` surrogate pairs included.
fn unescape(s: &str, out: &mut String) -> Result<(), String> {
    let mut rest = s;
    while let Some(k) = rest.find('\\') {
        out.push_str(&rest[..k]);
        let esc = rest.as_bytes().get(k + 1).copied().ok_or("a string ends in a backslash")?;
        rest = &rest[k + 2..];
        let c = match esc {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = hex4(rest)?;
                rest = &rest[4..];
                if (0xD800..0xDC00).contains(&unit) {
                    let low = rest.strip_prefix("\\u").map(hex4).transpose()?.ok_or("a lone surrogate in a string")?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err("a lone surrogate in a string".into());
                    }
                    rest = &rest[6..];
                    char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)).ok_or("a bad surrogate pair")?
                } else {
                    char::from_u32(unit).ok_or("a lone surrogate in a string")?
                }
            }
            other => return Err(format!("a bad escape '\\{}' in a string", other as char)),
        };
        out.push(c);
    }
    out.push_str(rest);
    Ok(())
}

fn hex4(s: &str) -> Result<u32, String> {
    s.get(..4).and_then(|h| u32::from_str_radix(h, 16).ok()).ok_or_else(|| "a bad \\u escape in a string".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{format_rows, Column, OutputFormat};

    /// Rows turned into text by the scanner print exactly as their `Value`s do.
    #[test]
    fn rows_as_text_equal_rows_printed_from_values() {
        let json = r#"[["x,y",1,-2.5e-7,null,true,"say \"hi\"\n","t\tn\\",[1,"a"],{"k":null},"\u00e9\ud83d\ude00\/"],
                       ["",18446744073709551615,0.1,false,"é",null,"",[],{}, 1.50],
                       [ -0 , 0 , -17 , 1e3 , 12345678901234567890 , 007 , "" , [ ] , { "a" : [1, "]"] } , "\\u"]]"#;
        let json = json.replace("007", "7");
        let values: Vec<Vec<Value>> = serde_json::from_str(&json).unwrap();
        let cols: Vec<Column> =
            (0..10).map(|i| Column { name: format!("c{i}"), type_name: "varchar".into() }).collect();
        for format in [OutputFormat::Csv, OutputFormat::Tsv] {
            let mut text = String::new();
            let rows = rows_to_text(&json, Delimited::for_format(format).unwrap(), &mut text).unwrap();
            assert_eq!(rows, 3);
            assert_eq!(text, format_rows(&cols, &values, format), "{format:?}");
        }
        assert!(Delimited::for_format(OutputFormat::Aligned).is_none());
    }

    #[test]
    fn no_rows_and_bad_rows() {
        let csv = Delimited::for_format(OutputFormat::Csv).unwrap();
        let mut out = String::new();
        assert_eq!(rows_to_text("null", csv, &mut out), Ok(0));
        assert_eq!(rows_to_text(" [ ] ", csv, &mut out), Ok(0));
        assert_eq!(rows_to_text("[[]]", csv, &mut out), Ok(1));
        for bad in [
            "[[1,]]",
            "[[\"open]]",
            "[[1]",
            "[[nul]]",
            "[[1 2]]",
            "[[\"\\x\"]]",
            "[[\"\\ud800\"]]",
            "[[\"a\tb\"]]",
            "{}",
        ] {
            assert!(rows_to_text(bad, csv, &mut String::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn members_are_found_at_the_top_level_only() {
        let doc = r#"{"id":"q","stats":{"data":1},"columns":[{"name":"data"}],"data":[[1,"}"]],"x":2}"#;
        let r = find_member(doc, "data").unwrap().unwrap();
        assert_eq!(&doc[r], r#"[[1,"}"]]"#);
        assert_eq!(find_member(r#"{"id":"q"}"#, "data").unwrap(), None);
        assert_eq!(find_member("{ }", "data").unwrap(), None);
        assert!(find_member(r#"{"id" "q"}"#, "data").is_err());
    }
}
