//! The pages of the statement protocol as the client reads them: the `QueryResults`
//! document, its rows as JSON values, text lines or Arrow batches, and the errors an
//! answer can carry. `StatementClient` (the parent module) receives them.

use bytes::Bytes;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use datafusion::arrow::record_batch::RecordBatch;

use super::{ClientError, QueryError, QueryOutcome};
use crate::exchange::page::{unframe_pages, Page};
use crate::format::{self, Column};
use crate::protocol::RowsAs;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryResultsPage {
    pub id: String,
    pub info_uri: Option<String>,
    pub partial_cancel_uri: Option<String>,
    pub next_uri: Option<String>,
    pub columns: Option<Vec<ColumnInfo>>,
    pub data: Option<Vec<Vec<Value>>>,
    pub stats: Value,
    pub error: Option<QueryError>,
    pub warnings: Option<Vec<Value>>,
    pub update_type: Option<String>,
    pub update_count: Option<i64>,
    /// With [`StatementClient::with_rows_as_text`]: the page's rows as the lines of a
    /// delimited format, in place of `data`.
    #[serde(skip)]
    pub rows_text: Option<RowsText>,
    /// How many rows follow a text page's document.
    pub text_rows: Option<usize>,
    /// With [`StatementClient::with_rows_as_arrow`]: the page's rows as Arrow batches,
    /// in place of `data`.
    #[serde(skip)]
    pub batches: Option<Vec<RecordBatch>>,
    /// How many rows follow an Arrow page's document.
    pub arrow_rows: Option<usize>,
}

/// A page's rows already printed as delimited text.
#[derive(Debug, Clone)]
pub struct RowsText {
    pub text: Bytes,
    pub rows: usize,
}

impl QueryResultsPage {
    /// The query state from `stats.state`, e.g. `QUEUED`, `RUNNING`, `FINISHED`, `FAILED`.
    pub fn state(&self) -> Option<&str> {
        self.stats.get("state")?.as_str()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ColumnInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub type_signature: Option<Value>,
}

impl From<ColumnInfo> for Column {
    fn from(c: ColumnInfo) -> Self {
        Column { name: c.name, type_name: c.type_name }
    }
}

/// The flotilla HTTP error shape, `{"error": {"code": ..., "message": ...}}`.
#[derive(Deserialize)]
struct HttpErrorBody {
    error: HttpErrorDetail,
}

#[derive(Deserialize)]
struct HttpErrorDetail {
    // Required: a Trino `QueryResults` error has no `code`, which is how the two shapes differ.
    code: String,
    #[serde(default)]
    message: String,
}

/// A page as it came: its document parsed, its JSON or Arrow rows still the bytes
/// they came in, so that the next page can be asked for before they are decoded.
#[derive(Debug)]
pub(super) struct Received {
    pub(super) page: QueryResultsPage,
    pub(super) rows: Option<Rows>,
}

#[derive(Debug)]
pub(super) enum Rows {
    /// The body and where `data` is in it.
    Json(Bytes, std::ops::Range<usize>),
    /// The framed Arrow pages after the document.
    Arrow(Bytes),
}

impl Received {
    /// A JSON page: the document is parsed without its `data` member, wherever that is.
    pub(super) fn from_json(body: Bytes) -> Result<Received, ClientError> {
        let bad = |e: serde_json::Error| {
            ClientError::Protocol(format!("{e} in {}", excerpt(&String::from_utf8_lossy(&body))))
        };
        let doc =
            std::str::from_utf8(&body).map_err(|e| ClientError::Protocol(format!("results are not UTF-8: {e}")))?;
        let bad_rows = |e: String| ClientError::Protocol(format!("{e} in {}", excerpt(doc)));
        let data = format::find_member(doc, "data").map_err(bad_rows)?;
        let Some(data) = data.filter(|d| &doc[d.clone()] != "null") else {
            return Ok(Received { page: serde_json::from_str(doc).map_err(bad)?, rows: None });
        };
        // The document without its rows: a copy of the few hundred bytes around them.
        let rest = [&doc[..data.start], "null", &doc[data.end..]].concat();
        let page = serde_json::from_str(&rest).map_err(bad)?;
        Ok(Received { page, rows: Some(Rows::Json(body, data)) })
    }

    /// An Arrow page: the document up to the first newline, the framed batches after it.
    pub(super) fn from_arrow(body: Bytes) -> Result<Received, ClientError> {
        let bad = |what: String| ClientError::Protocol(format!("{what} in an Arrow results page"));
        let split = body.iter().position(|b| *b == b'\n').ok_or_else(|| bad("no document".into()))?;
        let page: QueryResultsPage = serde_json::from_slice(&body[..split]).map_err(|e| bad(e.to_string()))?;
        if page.arrow_rows.is_none() {
            return Err(bad("no arrowRows".into()));
        }
        Ok(Received { page, rows: Some(Rows::Arrow(body.slice(split + 1..))) })
    }

    pub(super) fn has_rows(&self) -> bool {
        let json = match &self.rows {
            Some(Rows::Json(body, data)) => {
                body[data.clone()].iter().any(|b| !matches!(b, b'[' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
            }
            Some(Rows::Arrow(_)) => self.page.arrow_rows.is_some_and(|n| n > 0),
            None => false,
        };
        // The statement's first answer comes parsed (its rows in `data`).
        let parsed = self.page.data.as_ref().is_some_and(|d| !d.is_empty())
            || self.page.batches.as_ref().is_some_and(|b| b.iter().any(|b| b.num_rows() > 0));
        json || parsed || self.page.rows_text.is_some()
    }

    /// The page with its rows decoded: Arrow ones into batches, JSON ones as `Value`s,
    /// or as `rows_as`'s text lines.
    pub(super) fn finish(self, rows_as: Option<RowsAs>) -> Result<QueryResultsPage, ClientError> {
        let Received { mut page, rows } = self;
        let (body, data) = match rows {
            None => return Ok(page),
            Some(Rows::Arrow(framed)) => {
                page.batches = Some(decode_arrow_rows(&framed, page.arrow_rows.unwrap_or(0))?);
                return Ok(page);
            }
            Some(Rows::Json(body, data)) => (body, data),
        };
        let rows = &body[data.clone()];
        let bad = |e: String| ClientError::Protocol(format!("{e} in {}", excerpt(&String::from_utf8_lossy(rows))));
        match rows_as {
            // The body was checked as UTF-8 when received; JSON parsing reads bytes.
            None | Some(RowsAs::Arrow) => {
                page.data = Some(serde_json::from_slice(rows).map_err(|e| bad(e.to_string()))?)
            }
            Some(RowsAs::Text(style)) => {
                // The scanner takes text: only the rows are checked again, not the body.
                let rows = std::str::from_utf8(rows).map_err(|e| bad(e.to_string()))?;
                // The text is shorter than the JSON it comes from: one allocation.
                let mut text = String::with_capacity(data.len());
                let count = format::rows_to_text(rows, style, &mut text).map_err(bad)?;
                if count > 0 {
                    page.rows_text = Some(RowsText { text: Bytes::from(text.into_bytes()), rows: count });
                }
            }
        }
        Ok(page)
    }
}

/// The batches of an Arrow page, decoded and checked as the exchange decodes pages
/// (bytes from the network are not trusted); they must hold the `rows` the document
/// announced.
fn decode_arrow_rows(framed: &[u8], rows: usize) -> Result<Vec<RecordBatch>, ClientError> {
    let bad = |what: String| ClientError::Protocol(format!("{what} in an Arrow results page"));
    let mut batches = Vec::new();
    for page in unframe_pages(framed).map_err(bad)? {
        batches.extend(Page::decode(&page).map_err(|e| bad(e.to_string()))?);
    }
    let got: usize = batches.iter().map(|b| b.num_rows()).sum();
    if got != rows {
        return Err(bad(format!("{got} rows where the document announced {rows}")));
    }
    Ok(batches)
}

/// A page whose rows the coordinator sent as text (`protocol::TEXT_RESULTS_CONTENT_TYPE`):
/// the document up to the first newline, the rows after it, kept as they came.
pub(super) fn text_results(body: Bytes) -> Result<QueryResultsPage, ClientError> {
    let bad = |what: String| ClientError::Protocol(format!("{what} in {}", excerpt(&String::from_utf8_lossy(&body))));
    let split = body.iter().position(|b| *b == b'\n').ok_or_else(|| bad("a text page without its document".into()))?;
    let mut page: QueryResultsPage = serde_json::from_slice(&body[..split]).map_err(|e| bad(e.to_string()))?;
    let rows = page.text_rows.take().ok_or_else(|| bad("a text page without textRows".into()))?;
    page.rows_text = Some(RowsText { text: body.slice(split + 1..), rows });
    Ok(page)
}

/// Prefers the flotilla error shape; a Trino `QueryResults` carrying an error is honoured too, and
/// anything else is reported by status with the start of the body.
pub(super) fn http_error(status: StatusCode, body: &str) -> ClientError {
    if let Ok(parsed) = serde_json::from_str::<HttpErrorBody>(body) {
        return ClientError::Http { status: status.as_u16(), code: parsed.error.code, message: parsed.error.message };
    }
    if let Ok(QueryResultsPage { error: Some(error), .. }) = serde_json::from_str::<QueryResultsPage>(body) {
        return ClientError::Query(error);
    }
    let message = match body.trim() {
        "" => status.canonical_reason().unwrap_or("no message").to_string(),
        text => excerpt(text),
    };
    ClientError::Http { status: status.as_u16(), code: String::new(), message }
}

pub(super) fn check_row_widths(outcome: &QueryOutcome) -> Result<(), ClientError> {
    let width = outcome.columns.len();
    match outcome.rows.iter().find(|row| row.len() != width) {
        Some(row) if width > 0 => {
            Err(ClientError::Protocol(format!("a row has {} values but the query has {width} columns", row.len())))
        }
        _ => Ok(()),
    }
}

/// Keeps error messages readable when a proxy answers with a whole HTML page.
pub(super) fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
