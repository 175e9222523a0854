//! Trino's URL functions (`url.md`): the `url_extract_*` family, reading a URL as
//! RFC 3986 does (a value that is not a URL gives NULL, as in Trino), and
//! `url_encode` / `url_decode`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use super::simple::fixed;

fn each_url(args: &[ArrayRef], part: fn(&url::Url) -> Option<String>) -> Result<ArrayRef> {
    let text = args[0].as_string::<i32>();
    let out: StringArray = (0..text.len())
        .map(|i| match text.is_null(i) {
            true => None,
            false => url::Url::parse(text.value(i)).ok().and_then(|u| part(&u)),
        })
        .collect();
    Ok(Arc::new(out))
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

macro_rules! extract {
    ($name:literal, $part:expr) => {
        fixed($name, vec![DataType::Utf8], DataType::Utf8, |args| each_url(args, $part))
    };
}

fn parameter(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, name) = (args[0].as_string::<i32>(), args[1].as_string::<i32>());
    let mut out = StringBuilder::new();
    for i in 0..text.len() {
        let url = (text.is_valid(i) && name.is_valid(i)).then(|| url::Url::parse(text.value(i)).ok()).flatten();
        let value = url.and_then(|u| u.query_pairs().find(|(k, _)| k == name.value(i)).map(|(_, v)| v.into_owned()));
        out.append_option(value);
    }
    Ok(Arc::new(out.finish()))
}

fn port(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = args[0].as_string::<i32>();
    let out: Int64Array = (0..text.len())
        .map(|i| text.is_valid(i).then(|| url::Url::parse(text.value(i)).ok()).flatten()?.port().map(i64::from))
        .collect();
    Ok(Arc::new(out))
}

fn encode(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = args[0].as_string::<i32>();
    let out: StringArray = text
        .iter()
        .map(|v| v.map(|s| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()))
        .collect();
    Ok(Arc::new(out))
}

fn decode(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = args[0].as_string::<i32>();
    let out: StringArray = text
        .iter()
        .map(|v| {
            v.map(|s| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            })
        })
        .collect();
    Ok(Arc::new(out))
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        extract!("url_extract_protocol", |u| non_empty(u.scheme())),
        extract!("url_extract_host", |u| u.host_str().map(str::to_string)),
        extract!("url_extract_path", |u| Some(u.path().to_string())),
        extract!("url_extract_query", |u| u.query().map(str::to_string)),
        extract!("url_extract_fragment", |u| u.fragment().map(str::to_string)),
        fixed("url_extract_parameter", vec![DataType::Utf8, DataType::Utf8], DataType::Utf8, parameter),
        fixed("url_extract_port", vec![DataType::Utf8], DataType::Int64, port),
        fixed("url_encode", vec![DataType::Utf8], DataType::Utf8, encode),
        fixed("url_decode", vec![DataType::Utf8], DataType::Utf8, decode),
    ]
}
