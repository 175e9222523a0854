//! Snapshots of the distributed plans of the 22 TPC-H queries: `EXPLAIN` as a user
//! sees it (fragments, their partitioning, tasks, exchanges, waits and dynamic
//! filters, then each fragment's plan), over the built-in `tpch.tiny` schema with 2
//! workers and every query cut into stages. A planning change shows up as a diff of
//! `snapshots/`, to be reviewed (`cargo insta review`) and committed with the change.

use std::time::Duration;

use super::{plan, PlanRequest, Planned, Purpose};
use crate::config::SessionProperties;
use crate::connector::Connectors;
use crate::coordinator::planner::{session_context, SessionSpec};
use crate::coordinator::sql_parser::{ExplainFormat, ExplainType};

async fn explain(sql: &str) -> String {
    let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 4, &Connectors::benchmark());
    let purpose = Purpose::Explain(ExplainType::Distributed, ExplainFormat::Text);
    let request = PlanRequest { purpose, ..PlanRequest::for_tests(ctx, 2) };
    match plan(request, sql.trim().trim_end_matches(';').to_string(), Duration::from_secs(60)).await {
        Ok(Planned::Answer(batch)) => {
            let text = batch.column(0).as_any().downcast_ref::<datafusion::arrow::array::StringArray>();
            text.expect("EXPLAIN answers a text").value(0).to_string()
        }
        Ok(_) => panic!("EXPLAIN answers a text"),
        Err(e) => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn tpch_distributed_plans() {
    for n in 1..=22 {
        let path = format!("{}/queries/tpch/q{n}.sql", env!("CARGO_MANIFEST_DIR"));
        let sql = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        insta::assert_snapshot!(format!("tpch_q{n:02}"), explain(&sql).await);
    }
}
