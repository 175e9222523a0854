//! `flotilla bench exchange`: the throughput of one exchange link on loopback. A
//! producer lays TPC-H `lineitem` batches into an `OutputBuffer` (32 MiB, as a
//! worker's), which the worker's results route encodes into Arrow IPC and serves over
//! HTTP; an `ExchangeClient` pulls, decodes and hands the batches on, as a
//! consumer task's `RemoteSourceExec` does. Everything a link costs is in the time:
//! encoding, HTTP, the long polls and acknowledgements, decoding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use datafusion::arrow::record_batch::RecordBatch;
use futures::StreamExt;
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

use super::median;
use crate::exchange::client::{ExchangeClient, ExchangeConfig, ExchangeSource, ExchangeStats};
use crate::exchange::output_buffer::OutputBuffer;
use crate::exchange::page::Page;
use crate::protocol::TaskId;
use crate::worker::api::{pages_response, results_limits};

type Buffer = Arc<OutputBuffer>;

async fn results(State(b): State<Buffer>, Path((_, _, token)): Path<(String, usize, u64)>, h: HeaderMap) -> Response {
    let (max_bytes, max_wait) = results_limits(&h);
    match b.get(0, token, max_bytes, max_wait).await {
        Ok(r) => pages_response(&r).unwrap_or_else(IntoResponse::into_response),
        Err(e) => (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn acknowledge(State(b): State<Buffer>, Path((_, _, token)): Path<(String, usize, u64)>) -> Response {
    match b.acknowledge(0, token) {
        Ok(()) => axum::http::StatusCode::NO_CONTENT.into_response(),
        Err(e) => (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn destroy(State(b): State<Buffer>) -> Response {
    b.destroy_all();
    axum::http::StatusCode::NO_CONTENT.into_response()
}

/// One transfer of at least `bytes` of batches; returns (time, encoded bytes, rows).
async fn transfer(batches: &[RecordBatch], bytes: u64) -> Result<(Duration, u64, u64), String> {
    let buffer: Buffer = Arc::new(OutputBuffer::new(1, 32 << 20, Default::default()));
    let app = Router::new()
        .route("/v1/task/{task_id}/results/{buffer_id}/{token}", get(results))
        .route("/v1/task/{task_id}/results/{buffer_id}/{token}/acknowledge", get(acknowledge))
        .route("/v1/task/{task_id}/results/{buffer_id}", axum::routing::delete(destroy))
        .with_state(buffer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let started = Instant::now();
    let producer = {
        let (buffer, batches) = (buffer.clone(), batches.to_vec());
        tokio::spawn(async move {
            let mut sent = 0u64;
            for batch in batches.iter().cycle() {
                if sent >= bytes {
                    break;
                }
                let page = Page::new(batch.clone());
                sent += page.len() as u64;
                buffer.enqueue(0, page).await.map_err(|e| e.to_string())?;
            }
            buffer.set_no_more_pages();
            Ok::<u64, String>(sent)
        })
    };
    let stats = Arc::new(ExchangeStats::default());
    let client = ExchangeClient::new(reqwest::Client::new(), ExchangeConfig::default(), stats.clone());
    let source = ExchangeSource { task_id: TaskId::new("bench", 1, 0, 0), url, buffer: 0 };
    let mut stream = client.stream(batches[0].schema(), vec![source]);
    let mut rows = 0u64;
    while let Some(batch) = stream.next().await {
        rows += batch.map_err(|e| e.to_string())?.num_rows() as u64;
    }
    let elapsed = started.elapsed();
    producer.await.map_err(|e| e.to_string())??;
    server.abort();
    // The bytes that crossed the link, encoded.
    Ok((elapsed, stats.bytes.load(std::sync::atomic::Ordering::Relaxed), rows))
}

pub async fn run_exchange(bytes: u64, iterations: usize) -> Result<(), String> {
    // sf0.1 lineitem (600,572 rows) as a scan produces it: 8192-row batches.
    let batches: Vec<RecordBatch> = LineItemArrow::new(LineItemGenerator::new(0.1, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    let (mut sent, mut rows) = (0, 0);
    for _ in 0..iterations.max(1) {
        let (t, b, r) = transfer(&batches, bytes).await?;
        times.push(t);
        (sent, rows) = (b, r);
    }
    let t = median(times).as_secs_f64();
    println!(
        "one exchange link on loopback: {:.0} MB of lineitem pages ({rows} rows) in {:.3} s: {:.2} GB/s, {:.1}M rows/s (median of {iterations})",
        sent as f64 / 1e6,
        t,
        sent as f64 / 1e9 / t,
        rows as f64 / 1e6 / t
    );
    Ok(())
}
