//! The `tpcds` catalog: ranges of source rows cover each table once whatever the
//! partition count, scans survive the wire, and SQL sees the 24 tables.

use std::sync::Arc;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;

use super::*;

/// The table's row count and the wrapping sum of its rows' hashes: equal for equal
/// multisets of rows, whatever their order and partitioning.
async fn fingerprint(kind: TpcdsTableKind, sf: f64, partitions: usize) -> (usize, u64) {
    use datafusion::common::hash_utils::{create_hashes, RandomState};
    let scan: Arc<dyn ExecutionPlan> = Arc::new(TpcdsScanExec::try_new(kind, sf, partitions, None).unwrap());
    let batches = collect(scan, SessionContext::new().task_ctx()).await.unwrap();
    let state = RandomState::with_seed(7);
    let (mut rows, mut sum) = (0usize, 0u64);
    for b in &batches {
        let mut hashes = vec![0u64; b.num_rows()];
        create_hashes(b.columns(), &state, &mut hashes).unwrap();
        rows += b.num_rows();
        sum = hashes.iter().fold(sum, |s, h| s.wrapping_add(*h));
    }
    (rows, sum)
}

#[test]
fn ranges_cover_the_source_rows_once() {
    for (total, parts) in [(10u64, 3usize), (1, 4), (100, 1), (7, 7), (1_000_003, 16)] {
        let ranges: Vec<_> = (0..parts).map(|p| source_range(total, p, parts)).collect();
        let covered: u64 = ranges.iter().map(|r| if r.is_empty() { 0 } else { r.end() - r.start() + 1 }).sum();
        assert_eq!(covered, total, "{total} rows in {parts}");
        let nonempty: Vec<_> = ranges.iter().filter(|r| !r.is_empty()).collect();
        assert_eq!(*nonempty[0].start(), 1);
        for w in nonempty.windows(2) {
            assert_eq!(*w[1].start(), w[0].end() + 1, "consecutive");
        }
    }
}

/// Every table split over several partitions holds the same rows as generated
/// whole: a worker's slice is the slice the single-node oracle reads.
#[tokio::test]
async fn split_tables_hold_the_rows_of_the_whole() {
    let sf = 0.01;
    let mut split = Vec::new();
    for kind in TpcdsTableKind::ALL {
        let whole = fingerprint(kind, sf, 1).await;
        assert!(whole.0 > 0, "{} has rows at tiny", kind.name());
        let parts = kind.partitions(sf, 3);
        if parts > 1 {
            assert_eq!(fingerprint(kind, sf, parts).await, whole, "{} in {parts} partitions", kind.name());
            split.push(kind.name());
        }
    }
    // The fact tables and the customer tables, even at tiny.
    for name in ["store_sales", "store_returns", "catalog_sales", "web_sales", "inventory", "customer"] {
        assert!(split.contains(&name), "{name} is split at tiny: {split:?}");
    }
}

#[tokio::test]
async fn scans_survive_the_wire_and_sql_sees_the_tables() {
    let scan = TpcdsScanExec::try_new(TpcdsTableKind::StoreSales, 0.01, 2, Some(vec![0, 2])).unwrap();
    let back = TpcdsScanExec::from_bytes(&scan.to_bytes()).unwrap();
    assert_eq!(back.table(), TpcdsTableKind::StoreSales);
    assert_eq!((back.num_partitions(), back.projection()), (2, Some(&[0, 2][..])));
    assert_eq!(back.schema(), scan.schema());
    assert!(TpcdsScanExec::from_bytes(b"{\"table\":\"nope\",\"scale_factor\":1,\"num_partitions\":1}").is_err());
    assert!(TpcdsScanExec::try_new(TpcdsTableKind::Item, f64::NAN, 1, None).is_err());

    let ctx = SessionContext::new();
    ctx.register_catalog(TPCDS_CATALOG_NAME, Arc::new(TpcdsCatalog::new(())));
    let names = ctx.catalog(TPCDS_CATALOG_NAME).unwrap().schema("tiny").unwrap().table_names();
    assert_eq!(names.len(), 24);
    let counted = ctx
        .sql("SELECT count(*), count(DISTINCT d_year) FROM tpcds.tiny.date_dim WHERE d_year BETWEEN 1998 AND 2002")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let text = pretty_format_batches(&counted).unwrap().to_string();
    // Five whole years of days, 1998 to 2002 (2000 a leap year).
    assert!(text.contains("| 1826 ") && text.contains("| 5 "), "{text}");
}
