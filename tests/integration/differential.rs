//! The differential tester (`flotilla::difftest`) on the 3-worker cluster of the TPC-H
//! test: generated queries over its own small tables, each checked against single-node
//! DataFusion, DuckDB, counted multisets or ternary logic partitioning, under the sessions it
//! rotates through. Any mismatch fails with its seed and reduced query; `flotilla
//! difftest --seed N --queries M` runs longer searches.

use std::time::Instant;

use flotilla::client::StatementClient;

use super::common::Cluster;

/// The first seed and the number of queries CI runs.
const SEED: u64 = 1;
const QUERIES: usize = 3000;

pub async fn check(cluster: &Cluster) {
    let started = Instant::now();
    let client = StatementClient::new(&cluster.coordinator.url);
    let duckdb = super::common::python_with("FLOTILLA_PYTHON", "duckdb");
    if duckdb.is_none() {
        super::common::missing_service("the differential tester's DuckDB", "no Python imports duckdb");
    }
    let report =
        flotilla::difftest::run(client, SEED, QUERIES, duckdb.as_deref()).await.expect("the differential tester runs");
    println!(
        "differential tester: {} queries, {} checks, {} refused by both sides, {} beyond DataFusion (TLP only), \
         {} against DuckDB ({} refused by one), {} mismatches, in {:.1} s",
        report.queries,
        report.checks,
        report.refused,
        report.beyond_oracle,
        report.duckdb_checks,
        report.duckdb_refused,
        report.mismatches.len(),
        started.elapsed().as_secs_f64()
    );
    let listed: Vec<String> = report.mismatches.iter().map(|m| m.to_string()).collect();
    assert!(listed.is_empty(), "{} mismatches:\n{}", listed.len(), listed.join("\n"));
    // A tester whose queries both sides refuse tests nothing.
    assert!(report.refused * 10 < report.queries, "{} of {} queries refused", report.refused, report.queries);
    assert_eq!(report.queries, QUERIES);
}
