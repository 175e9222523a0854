use super::*;
use crate::exchange::page::Page;
use bytes::Bytes;
use reqwest::StatusCode;

/// Rows are parsed after the document, wherever `data` stands in it (Trino puts
/// `stats` after it, flotilla puts it last), as values or as text lines.
#[test]
fn rows_are_parsed_apart_from_their_document() {
    let trino = r#"{"id":"q1","nextUri":"http://c/v1/statement/q1/2","data":[[1,"a]}"],[null,"b"]],"stats":{"state":"RUNNING"}}"#;
    // A page already parsed (the answer to the POST) counts its rows too.
    let posted = Received { page: serde_json::from_str(trino).unwrap(), rows: None };
    assert!(posted.has_rows());
    let received = Received::from_json(Bytes::from_static(trino.as_bytes())).unwrap();
    assert!(received.has_rows());
    assert_eq!(received.page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
    assert_eq!(received.page.stats["state"], "RUNNING");
    assert!(received.page.data.is_none(), "rows wait for finish");
    let page = received.finish(None).unwrap();
    let whole: QueryResultsPage = serde_json::from_str(trino).unwrap();
    assert_eq!(page.data, whole.data);
    let text = Received::from_json(Bytes::from_static(trino.as_bytes()))
        .unwrap()
        .finish(Some(RowsAs::Text(Delimited::for_format(crate::format::OutputFormat::Csv).unwrap())))
        .unwrap();
    assert_eq!(text.rows_text.as_ref().map(|t| t.rows), Some(2));
    assert!(text.data.is_none());
    for empty in [r#"{"id":"q1","data":[],"stats":{}}"#, r#"{"id":"q1","data":null}"#, r#"{"id":"q1"}"#] {
        let received = Received::from_json(Bytes::from_static(empty.as_bytes())).unwrap();
        assert!(!received.has_rows(), "{empty}");
        let page = received.finish(None).unwrap();
        assert!(page.data.as_ref().is_none_or(|d| d.is_empty()), "{empty}");
    }
    let broken = Received::from_json(Bytes::from_static(br#"{"id":"q1","data":[[1,2],"stats":{}}"#));
    assert!(matches!(broken, Err(ClientError::Protocol(_))), "{broken:?}");
}

/// An Arrow page: the document, a newline, the batches framed as the exchange
/// frames them. Its batches come back equal, its row count is checked against the
/// document, and damaged bytes are an error, not a panic.
#[test]
fn arrow_pages_decode_into_the_batches_sent() {
    use datafusion::arrow::array::{Decimal128Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("price", DataType::Decimal128(15, 2), true),
    ]));
    let batch = |from: i64, n: i64| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(from..from + n)),
                Arc::new(StringArray::from_iter((from..from + n).map(|i| (i % 3 != 0).then(|| format!("r{i}"))))),
                Arc::new(
                    Decimal128Array::from_iter((from..from + n).map(|i| (i % 5 != 0).then_some(i128::from(i) * 101)))
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
            ],
        )
        .unwrap()
    };
    let sent = vec![batch(0, 1000), batch(1000, 7)];
    let body = |rows: usize, batches: &[RecordBatch]| {
        let pages: Vec<Page> = batches.iter().cloned().map(Page::new).collect();
        let mut body =
            format!(r#"{{"id":"q1","nextUri":"http://c/v1/statement/q1/2","arrowRows":{rows}}}"#).into_bytes();
        body.push(b'\n');
        body.extend_from_slice(&crate::exchange::page::frame_pages(&pages).unwrap());
        Bytes::from(body)
    };
    let received = Received::from_arrow(body(1007, &sent)).unwrap();
    assert!(received.has_rows());
    assert_eq!(received.page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
    let page = received.finish(Some(RowsAs::Arrow)).unwrap();
    assert_eq!(page.batches.as_deref(), Some(sent.as_slice()));
    assert!(page.data.is_none());
    // A result without rows: one empty batch, for its schema; not a page with rows.
    let empty = Received::from_arrow(body(0, &[RecordBatch::new_empty(schema.clone())])).unwrap();
    assert!(!empty.has_rows());
    let page = empty.finish(Some(RowsAs::Arrow)).unwrap();
    assert_eq!(page.batches.as_ref().map(|b| b[0].schema()), Some(schema.clone()));
    // Fewer rows than announced, a cut body, no document, no count: errors.
    let short = Received::from_arrow(body(1008, &sent)).unwrap().finish(Some(RowsAs::Arrow));
    assert!(matches!(short, Err(ClientError::Protocol(ref m)) if m.contains("1007 rows")), "{short:?}");
    let whole = body(1007, &sent);
    for cut in [whole.len() - 1, whole.len() - 300, whole.len() / 2] {
        let cut = Received::from_arrow(whole.slice(..cut)).and_then(|r| r.finish(Some(RowsAs::Arrow)));
        assert!(matches!(cut, Err(ClientError::Protocol(_))), "{cut:?}");
    }
    let mut garbled = whole.to_vec();
    let at = garbled.len() - 200;
    garbled[at..at + 50].fill(0xff);
    // Bytes garbled among the values may decode to other values; they must not panic.
    let _ = Received::from_arrow(Bytes::from(garbled)).and_then(|r| r.finish(Some(RowsAs::Arrow)));
    for broken in [&b"no newline"[..], b"{\"id\":\"q1\"}\n"] {
        let got = Received::from_arrow(Bytes::from_static(broken));
        assert!(matches!(got, Err(ClientError::Protocol(_))), "{got:?}");
    }
}

#[test]
fn pages_parse_sparse_and_full() {
    let sparse: QueryResultsPage = serde_json::from_str(r#"{"id":"q1","stats":{"state":"QUEUED"}}"#).unwrap();
    assert_eq!(sparse.state(), Some("QUEUED"));
    assert!(sparse.next_uri.is_none() && sparse.columns.is_none());
    let full = r#"{"id":"q1","infoUri":"http://c/ui/q1","nextUri":"http://c/v1/statement/q1/2",
        "columns":[{"name":"n","type":"bigint","typeSignature":{"rawType":"bigint","arguments":[]}}],
        "data":[[1],[2]],"stats":{"state":"RUNNING"},"warnings":null}"#;
    let page: QueryResultsPage = serde_json::from_str(full).unwrap();
    assert_eq!(page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
    assert_eq!(page.columns.unwrap()[0].type_name, "bigint");
    assert_eq!(page.data.unwrap().len(), 2);
}

#[test]
fn http_errors_use_the_flotilla_shape() {
    let body = r#"{"error":{"code":"NOT_FOUND","message":"no such query"}}"#;
    match http_error(StatusCode::NOT_FOUND, body) {
        ClientError::Http { status, code, message } => {
            assert_eq!((status, code.as_str(), message.as_str()), (404, "NOT_FOUND", "no such query"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let body = r#"{"id":"q","error":{"message":"line 1:1: boom","errorCode":1,"errorName":"SYNTAX_ERROR"}}"#;
    let err = http_error(StatusCode::BAD_REQUEST, body);
    assert!(matches!(err, ClientError::Query(crate::client::QueryError { error_code: 1, .. })));
    assert_eq!(err.to_string(), "line 1:1: boom");
    let err = http_error(StatusCode::BAD_GATEWAY, "");
    assert_eq!(err.to_string(), "server error 502: Bad Gateway");
}

#[test]
fn servers_and_uris_are_normalised() {
    let client = StatementClient::new("localhost:8080/");
    assert_eq!(client.server(), "http://localhost:8080");
    assert_eq!(client.resolve("/v1/statement/q/1"), "http://localhost:8080/v1/statement/q/1");
    assert_eq!(client.resolve("http://other:1/x"), "http://other:1/x");
    let client = client.with_session("a", "1").with_session("a", "2");
    assert_eq!(client.session().properties, vec![("a".to_string(), "2".to_string())]);
}

#[test]
fn session_headers_change_the_session_of_the_client_and_its_clones() {
    let client = StatementClient::new("localhost:8080").with_catalog("tpch").with_session("a", "1");
    let clone = client.clone();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.append("x-trino-set-schema", "sf1".parse().unwrap());
    headers.append("x-trino-set-session", "b=all-at-once".parse().unwrap());
    headers.append("x-trino-set-session", "c=it%27s+here%C3%A9".parse().unwrap());
    headers.append("x-trino-clear-session", "a".parse().unwrap());
    client.session.lock().apply(&headers);
    let s = clone.session();
    assert_eq!((s.catalog.as_deref(), s.schema.as_deref()), (Some("tpch"), Some("sf1")));
    let want = [("b", "all-at-once"), ("c", "it's here\u{e9}")];
    assert_eq!(s.properties, want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec());
    // A builder gives a session of its own.
    let other = clone.clone().with_session("d", "1");
    assert!(client.session().properties.iter().all(|(k, _)| k != "d"));
    assert_eq!(other.session().properties.len(), 3);
}
