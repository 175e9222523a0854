//! Unit tests of the `tpch` catalog and its scan.

use super::*;
use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::common::collect;
use datafusion::physical_plan::DefaultDisplay;
use datafusion::prelude::SessionConfig;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

fn task_ctx(batch_size: usize) -> Arc<TaskContext> {
    let config = SessionConfig::new().with_batch_size(batch_size);
    SessionContext::new_with_config(config).task_ctx()
}

async fn run(exec: &TpchScanExec, partition: usize, batch_size: usize) -> Vec<RecordBatch> {
    collect(exec.execute(partition, task_ctx(batch_size)).unwrap()).await.unwrap()
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

fn int64(batch: &RecordBatch, column: usize) -> &Int64Array {
    batch.column(column).as_any().downcast_ref::<Int64Array>().unwrap()
}

#[test]
fn schema_names_parse_to_scale_factors() {
    let good = [("tiny", 0.01), ("sf0_1", 0.1), ("sf1", 1.0), ("sf10", 10.0)];
    for (name, sf) in good.into_iter().chain([("sf0_01", 0.01), ("sf100", 100.0)]) {
        assert_eq!(parse_schema_name(name), Some(sf), "{name}");
    }
    for bad in [
        "", "sf", "sf0", "sf0_0", "sf-1", "sf_1", "sf1_", "sf1_2_3", "sf1e3", "sfinf", "SF1", "sf1.5", "huge",
        "default",
    ] {
        assert_eq!(parse_schema_name(bad), None, "{bad:?} should be rejected");
    }
}

#[test]
fn row_counts_match_the_spec() {
    // TPC-H specification, section 4.2.5: base cardinalities at SF 1.
    assert_eq!(TpchTableKind::Orders.row_count(1.0), 1_500_000);
    assert_eq!(TpchTableKind::PartSupp.row_count(1.0), 800_000);
    assert_eq!(TpchTableKind::Supplier.row_count(0.01), 100);
    for kind in TpchTableKind::ALL {
        assert_eq!(TpchTableKind::from_name(kind.name()), Some(kind));
    }
}

#[tokio::test]
async fn orders_split_four_ways_matches_single_part() {
    let whole = TpchScanExec::try_new(TpchTableKind::Orders, 0.01, 1, Some(vec![0])).unwrap();
    let split = TpchScanExec::try_new(TpchTableKind::Orders, 0.01, 4, Some(vec![0])).unwrap();
    let whole_batches = run(&whole, 0, 1000).await;
    let mut split_batches = Vec::new();
    for p in 0..4 {
        let part = run(&split, p, 1000).await;
        // Per-partition statistics predict what each partition produces.
        #[allow(deprecated)]
        let stats = split.partition_statistics(Some(p)).unwrap();
        assert_eq!(stats.num_rows, Precision::Inexact(rows(&part)));
        split_batches.extend(part);
    }
    // TPC-H spec: orders has 1,500,000 * SF rows.
    assert_eq!(rows(&whole_batches), 15_000);
    assert_eq!(rows(&split_batches), 15_000);
    let key_sum =
        |batches: &[RecordBatch]| -> i64 { batches.iter().map(|b| int64(b, 0).values().iter().sum::<i64>()).sum() };
    assert_eq!(key_sum(&whole_batches), key_sum(&split_batches));
    assert!(whole_batches.iter().all(|b| b.num_rows() <= 1000));
    #[allow(deprecated)]
    let total = split.partition_statistics(None).unwrap();
    assert_eq!(total.num_rows, Precision::Inexact(15_000));
}

#[tokio::test]
async fn nation_has_25_rows_in_one_partition() {
    let exec = TpchScanExec::try_new(TpchTableKind::Nation, 1.0, 8, None).unwrap();
    assert_eq!(exec.num_partitions(), 1);
    assert_eq!(rows(&run(&exec, 0, 8192).await), 25);
}

#[tokio::test]
async fn projected_scan_yields_projected_schema() {
    let exec = TpchScanExec::try_new(TpchTableKind::LineItem, 0.01, 2, Some(vec![0, 4]));
    let exec = exec.unwrap();
    let names: Vec<_> = exec.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["l_orderkey", "l_quantity"]);
    let batches = run(&exec, 1, 4096).await;
    assert!(!batches.is_empty());
    assert!(batches.iter().all(|b| b.schema() == exec.schema()));
    assert_eq!(
        DefaultDisplay(exec.clone()).to_string(),
        "TpchScanExec: table=lineitem, sf=0.01, partitions=2, \
         projection=[l_orderkey, l_quantity]"
    );
    assert!(exec.execute(2, task_ctx(4096)).is_err());
    assert!(TpchScanExec::try_new(TpchTableKind::Region, 1.0, 1, Some(vec![3])).is_err());
}

#[tokio::test]
async fn dropping_the_stream_early_is_clean() {
    let exec = TpchScanExec::try_new(TpchTableKind::LineItem, 0.1, 1, None).unwrap();
    let mut stream = exec.execute(0, task_ctx(100)).unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().num_rows(), 100);
}

#[test]
fn bytes_round_trip() {
    let exec = TpchScanExec::try_new(TpchTableKind::PartSupp, 0.1, 3, Some(vec![1, 0]));
    let exec = exec.unwrap();
    let back = TpchScanExec::from_bytes(&exec.to_bytes()).unwrap();
    assert_eq!(back.table(), TpchTableKind::PartSupp);
    assert_eq!((back.scale_factor(), back.num_partitions()), (0.1, 3));
    assert_eq!(back.projection(), Some(&[1, 0][..]));
    assert_eq!(back.schema(), exec.schema());
    assert!(TpchScanExec::from_bytes(b"not json").is_err());
    let bad = br#"{"table":"widgets","scale_factor":1.0,"num_partitions":1,"projection":null}"#;
    assert!(TpchScanExec::from_bytes(bad).is_err());
}

#[tokio::test]
async fn catalog_resolves_through_sql() {
    let ctx = SessionContext::new();
    ctx.register_catalog(TPCH_CATALOG_NAME, Arc::new(TpchCatalog::new(TpchSpelling::default())));
    let catalog = ctx.catalog(TPCH_CATALOG_NAME).unwrap();
    assert_eq!(catalog.schema_names(), ["tiny", "sf0_1", "sf1", "sf10"]);
    let unlisted = catalog.schema("sf0_01").unwrap();
    assert!(unlisted.table_exist("lineitem") && !unlisted.table_exist("widgets"));
    assert_eq!(unlisted.table_names().len(), 8);
    assert!(catalog.schema("public").is_none());
    for (sql, expected) in [
        ("SELECT count(*) FROM tpch.tiny.nation", 25),
        ("SELECT count(*) FROM tpch.sf0_01.region", 5),
        ("SELECT count(*) FROM tpch.tiny.orders", 15_000),
    ] {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(int64(&batches[0], 0).value(0), expected, "{sql}");
    }
}

/// Trino's default spelling of the same rows: plain names, money as DOUBLE equal to
/// the generator's decimal; DECIMAL mapping gives decimal(12,2) of the same values;
/// the spelling travels with the scan.
#[tokio::test]
async fn spelled_scans_rename_and_retype_the_generated_rows() {
    use datafusion::arrow::array::{Decimal128Array, Float64Array};
    let projection = Some(vec![0, 4, 5]);
    let native = TpchScanExec::try_new(TpchTableKind::LineItem, 0.01, 1, projection.clone()).unwrap();
    let trino =
        TpchScanExec::try_new_spelled(TpchTableKind::LineItem, 0.01, 1, projection.clone(), TpchSpelling::default())
            .unwrap();
    let benchmark =
        TpchScanExec::try_new_spelled(TpchTableKind::LineItem, 0.01, 1, projection, TpchSpelling::BENCHMARK).unwrap();
    let names = |e: &TpchScanExec| e.schema().fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
    assert_eq!(names(&native), ["l_orderkey", "l_quantity", "l_extendedprice"]);
    assert_eq!(names(&trino), ["orderkey", "quantity", "extendedprice"]);
    assert_eq!(names(&benchmark), ["l_orderkey", "l_quantity", "l_extendedprice"]);
    let back = TpchScanExec::from_bytes(&trino.to_bytes()).unwrap();
    assert_eq!(back.schema(), trino.schema(), "the spelling travels with the scan");

    let (native, trino, benchmark) =
        (run(&native, 0, 4096).await, run(&back, 0, 4096).await, run(&benchmark, 0, 4096).await);
    assert_eq!((rows(&native), rows(&trino), rows(&benchmark)), (60_175, 60_175, 60_175));
    for ((n, t), b) in native.iter().zip(&trino).zip(&benchmark) {
        assert_eq!(t.schema(), back.schema());
        assert_eq!(int64(n, 0).values(), int64(t, 0).values());
        let generated = n.column(2).as_any().downcast_ref::<Decimal128Array>().unwrap();
        let doubles = t.column(2).as_any().downcast_ref::<Float64Array>().unwrap();
        let decimals = b.column(2).as_any().downcast_ref::<Decimal128Array>().unwrap();
        assert_eq!(decimals.precision(), 12);
        for i in 0..n.num_rows() {
            assert_eq!(doubles.value(i), generated.value(i) as f64 / 100.0);
            assert_eq!(decimals.value(i), generated.value(i));
        }
    }
}

#[test]
fn catalog_properties_read_as_trino_reads_them() {
    let spelled = |naming, mapping| TpchSpelling::from_properties(naming, mapping);
    assert_eq!(spelled(None, None), Ok(TpchSpelling::default()));
    assert_eq!(spelled(Some("standard"), Some("DECIMAL")), Ok(TpchSpelling::BENCHMARK));
    assert_eq!(spelled(Some("SIMPLIFIED"), Some("double")), Ok(TpchSpelling::default()));
    let e = spelled(Some("prefixed"), None).unwrap_err();
    assert!(e.contains("tpch.column-naming") && e.contains("prefixed"), "{e}");
    assert!(spelled(None, Some("float")).unwrap_err().contains("tpch.double-type-mapping"));
}
