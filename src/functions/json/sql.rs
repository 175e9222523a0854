//! The SQL/JSON functions: `json_exists`, `json_query`, `json_value`, `json_array`
//! and `json_object`. Their clauses (`WITH ARRAY WRAPPER`, `NULL ON EMPTY`,
//! `ABSENT ON NULL`, `RETURNING VARBINARY`, ...) are Trino syntax that the dialect
//! (`coordinator::dialect::json_clauses`) turns into one options string argument,
//! read here; `DEFAULT x ON EMPTY/ERROR` values come as arguments of their own.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray, StringArray};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, TypeSignature, Volatility};
use serde_json::{Map, Value};

use super::path::{self, Path, PathError};
use super::value::{canonical, to_json_values};
use super::{any, function, string_at, text, Returns};
use crate::functions::invalid_argument;

pub fn functions() -> Vec<ScalarUDF> {
    let variadic =
        || Signature::one_of(vec![TypeSignature::VariadicAny, TypeSignature::Nullary], Volatility::Immutable);
    vec![
        any("json_exists", 3, Returns::Fixed(|| DataType::Boolean), json_exists),
        any("json_query", 3, Returns::Json, json_query),
        any("json_value", 5, Returns::Fixed(|| DataType::Utf8), json_value),
        function("json_array", variadic(), Returns::Options(0), json_array),
        function("json_object", variadic(), Returns::Options(0), json_object),
    ]
}

/// What a `RETURNING` clause asks of `json_array` and `json_object`.
pub enum Returning {
    Json,
    Varbinary(String),
}

impl Returning {
    pub fn from_options(options: &str) -> Returning {
        let words: Vec<&str> = options.split_whitespace().collect();
        match words.iter().position(|w| *w == "RETURNING") {
            Some(at) if words.get(at + 1).is_some_and(|t| t.starts_with("VARBINARY")) => {
                let encoding = words.iter().position(|w| *w == "ENCODING").and_then(|e| words.get(e + 1));
                Returning::Varbinary(encoding.unwrap_or(&"UTF8").to_string())
            }
            _ => Returning::Json,
        }
    }
}

/// The behaviour a `... ON EMPTY` or `... ON ERROR` clause names.
#[derive(Clone, Copy, PartialEq, Debug)]
enum OnCase {
    Null,
    Error,
    EmptyArray,
    EmptyObject,
    Default,
    True,
    False,
    Unknown,
}

/// The words before `ON <case>` in `options`, if the clause is there.
fn on_clause(options: &str, case: &str) -> Option<OnCase> {
    let words: Vec<&str> = options.split_whitespace().collect();
    let at = (0..words.len().saturating_sub(1)).find(|&i| words[i] == "ON" && words[i + 1] == case)?;
    let before = &words[..at];
    Some(match before {
        [.., "EMPTY", "ARRAY"] => OnCase::EmptyArray,
        [.., "EMPTY", "OBJECT"] => OnCase::EmptyObject,
        [.., "NULL"] => OnCase::Null,
        [.., "ERROR"] => OnCase::Error,
        [.., "DEFAULT"] => OnCase::Default,
        [.., "TRUE"] => OnCase::True,
        [.., "FALSE"] => OnCase::False,
        [.., "UNKNOWN"] => OnCase::Unknown,
        _ => return None,
    })
}

fn has(options: &str, phrase: &str) -> bool {
    format!(" {options} ").contains(&format!(" {phrase} "))
}

/// A row's input and path: the parsed document and the items the path selects.
/// An input that is not JSON, or a path that does not apply, is a row error.
struct Rows {
    inputs: StringArray,
    paths: StringArray,
    compiled: Option<(String, Path)>,
}

impl Rows {
    fn new(args: &[ArrayRef]) -> Result<Rows> {
        Ok(Rows { inputs: text(&args[0])?, paths: text(&args[1])?, compiled: None })
    }

    /// `None` for a NULL input; otherwise the items, or the row's error.
    fn items(&mut self, row: usize) -> Result<Option<Result<Vec<Value>, PathError>>> {
        let (Some(input), Some(p)) = (string_at(&self.inputs, row), string_at(&self.paths, row)) else {
            return Ok(None);
        };
        if self.compiled.as_ref().is_none_or(|(t, _)| t != p) {
            let parsed = path::parse(p).map_err(|e| invalid_argument(format!("Invalid JSON path: '{p}': {e}")))?;
            self.compiled = Some((p.to_string(), parsed));
        }
        let path = &self.compiled.as_ref().expect("compiled above").1;
        Ok(Some(match serde_json::from_str::<Value>(input) {
            Ok(document) => path.evaluate(&document),
            Err(e) => Err(PathError(format!("input is not JSON: {e}"))),
        }))
    }
}

fn options_at(args: &[ArrayRef], at: usize, row: usize) -> Result<String> {
    Ok(match args.get(at) {
        Some(a) => string_at(&text(a)?, row).unwrap_or("").to_string(),
        None => String::new(),
    })
}

fn json_exists(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let mut rows = Rows::new(args)?;
    let mut out = Vec::with_capacity(args[0].len());
    for row in 0..args[0].len() {
        let options = options_at(args, 2, row)?;
        out.push(match rows.items(row)? {
            None => None,
            Some(Ok(items)) => Some(!items.is_empty()),
            Some(Err(e)) => match on_clause(&options, "ERROR").unwrap_or(OnCase::False) {
                OnCase::True => Some(true),
                OnCase::Unknown => None,
                OnCase::Error => return Err(invalid_argument(format!("JSON path error: {}", e.0))),
                _ => Some(false),
            },
        });
    }
    Ok(Arc::new(BooleanArray::from(out)))
}

/// What `json_query` answers for a row's items (before `ON EMPTY`/`ON ERROR`).
fn query_result(items: Vec<Value>, options: &str) -> Result<Option<String>, PathError> {
    let wrap = match has(options, "WITH") {
        false => false,
        true if has(options, "CONDITIONAL") => !(items.len() == 1 && (items[0].is_array() || items[0].is_object())),
        true => true,
    };
    if wrap {
        return Ok(Some(canonical(&Value::Array(items))));
    }
    match items.as_slice() {
        [] => Ok(None),
        [Value::String(s)] if has(options, "OMIT QUOTES") => Ok(Some(s.clone())),
        [one] => Ok(Some(canonical(one))),
        _ => Err(PathError("the path selected more than one item; use WITH ARRAY WRAPPER".into())),
    }
}

fn json_query(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let mut rows = Rows::new(args)?;
    let mut out = Vec::with_capacity(args[0].len());
    for row in 0..args[0].len() {
        let options = options_at(args, 2, row)?;
        let on = |case: &str, message: String| -> Result<Option<String>> {
            match on_clause(&options, case).unwrap_or(OnCase::Null) {
                OnCase::EmptyArray => Ok(Some("[]".into())),
                OnCase::EmptyObject => Ok(Some("{}".into())),
                OnCase::Error => Err(invalid_argument(message)),
                _ => Ok(None),
            }
        };
        out.push(match rows.items(row)? {
            None => None,
            Some(Err(e)) => on("ERROR", format!("JSON path error: {}", e.0))?,
            Some(Ok(items)) if items.is_empty() => on("EMPTY", "the path selected nothing".into())?,
            Some(Ok(items)) => match query_result(items, &options) {
                Ok(v) => v,
                Err(e) => on("ERROR", e.0)?,
            },
        });
    }
    Ok(Arc::new(StringArray::from(out)))
}

fn json_value(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let mut rows = Rows::new(args)?;
    let defaults = [text(&args[3])?, text(&args[4])?];
    let mut out = Vec::with_capacity(args[0].len());
    for row in 0..args[0].len() {
        let options = options_at(args, 2, row)?;
        let on = |case: &str, message: String| -> Result<Option<String>> {
            match on_clause(&options, case).unwrap_or(OnCase::Null) {
                OnCase::Default => {
                    let which = if case == "EMPTY" { 0 } else { 1 };
                    Ok(string_at(&defaults[which], row).map(str::to_string))
                }
                OnCase::Error => Err(invalid_argument(message)),
                _ => Ok(None),
            }
        };
        out.push(match rows.items(row)? {
            None => None,
            Some(Err(e)) => on("ERROR", format!("JSON path error: {}", e.0))?,
            Some(Ok(items)) => match items.as_slice() {
                [] => on("EMPTY", "the path selected nothing".into())?,
                [Value::Null] => None,
                [Value::String(s)] => Some(s.clone()),
                [v @ (Value::Number(_) | Value::Bool(_))] => Some(canonical(v)),
                [_] => on("ERROR", "the path selected a non-scalar item".into())?,
                _ => on("ERROR", "the path selected more than one item".into())?,
            },
        });
    }
    Ok(Arc::new(StringArray::from(out)))
}

/// Each argument's values as JSON; arguments typed `json` are embedded, not quoted.
fn argument_values(args: &[ArrayRef], fields: &[FieldRef]) -> Result<Vec<Vec<Option<Value>>>> {
    args.iter().zip(fields).map(|(a, f)| to_json_values(a, f)).collect()
}

/// The result of a row as `RETURNING` asks: JSON text, or its bytes in an encoding.
fn encode(results: Vec<Option<String>>, options: &str) -> Result<ArrayRef> {
    Ok(match Returning::from_options(options) {
        Returning::Json => Arc::new(StringArray::from(results)),
        Returning::Varbinary(encoding) => {
            let bytes: Vec<Option<Vec<u8>>> = results
                .iter()
                .map(|r| {
                    r.as_ref().map(|t| match encoding.as_str() {
                        "UTF16" => t.encode_utf16().flat_map(u16::to_le_bytes).collect(),
                        "UTF32" => t.chars().flat_map(|c| (c as u32).to_le_bytes()).collect(),
                        _ => t.as_bytes().to_vec(),
                    })
                })
                .collect();
            Arc::new(BinaryArray::from_iter(bytes))
        }
    })
}

/// Rows of a call whose arguments are all constant may come as one-row arrays.
fn row_count(args: &[ArrayRef]) -> usize {
    args.iter().map(|a| a.len()).max().unwrap_or(1)
}

fn json_array(args: &[ArrayRef], fields: &[FieldRef]) -> Result<ArrayRef> {
    let options = if args.is_empty() { String::new() } else { options_at(args, 0, 0)? };
    let absent = !has(&options, "NULL ON NULL");
    let values = argument_values(args.get(1..).unwrap_or(&[]), fields.get(1..).unwrap_or(&[]))?;
    let results = (0..row_count(args))
        .map(|row| {
            let items = values
                .iter()
                .filter_map(|column| match &column[row] {
                    None if absent => None,
                    None => Some(Value::Null),
                    Some(v) => Some(v.clone()),
                })
                .collect();
            Some(canonical(&Value::Array(items)))
        })
        .collect();
    encode(results, &options)
}

fn json_object(args: &[ArrayRef], fields: &[FieldRef]) -> Result<ArrayRef> {
    let options = if args.is_empty() { String::new() } else { options_at(args, 0, 0)? };
    let absent = has(&options, "ABSENT ON NULL");
    let unique = has(&options, "WITH UNIQUE KEYS") || has(&options, "WITH UNIQUE");
    let pairs = args.get(1..).unwrap_or(&[]);
    if pairs.len() % 2 != 0 {
        return Err(invalid_argument("json_object takes keys and values in pairs"));
    }
    let keys: Vec<StringArray> = pairs.iter().step_by(2).map(text).collect::<Result<_>>()?;
    let values = argument_values(
        &pairs.iter().skip(1).step_by(2).cloned().collect::<Vec<_>>(),
        &fields.get(1..).unwrap_or(&[]).iter().skip(1).step_by(2).cloned().collect::<Vec<_>>(),
    )?;
    let mut results = Vec::new();
    for row in 0..row_count(args) {
        let mut object = Map::new();
        for (k, v) in keys.iter().zip(&values) {
            let Some(key) = string_at(k, row.min(k.len() - 1)) else {
                return Err(invalid_argument("null value passed for JSON object key to JSON_OBJECT function"));
            };
            let value = match &v[row.min(v.len() - 1)] {
                None if absent => continue,
                None => Value::Null,
                Some(v) => v.clone(),
            };
            if object.insert(key.to_string(), value).is_some() && unique {
                return Err(invalid_argument("duplicate key passed to JSON_OBJECT function"));
            }
        }
        results.push(Some(canonical(&Value::Object(object))));
    }
    encode(results, &options)
}

#[cfg(test)]
pub(super) fn query_for_tests(items: Vec<Value>, options: &str) -> Result<Option<String>, PathError> {
    query_result(items, options)
}
