//! Which joins get a dynamic filter, and what its two nodes do to rows: the build
//! side's collected hashes, handed to the probe side's filter, keep exactly the probe
//! rows whose keys occur on the build side.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;

use super::*;
use crate::codec::FlotillaCodec;
use crate::config::SessionProperties;
use crate::connector::Connectors;
use crate::coordinator::planner::{session_context, SessionSpec};
use crate::coordinator::planning::{plan, PlanRequest, Planned};
use crate::plan::dynamic_filter_exec::{DynamicFilterExec, DynamicFilterSourceExec, MAX_KEY_HASHES};

/// `sql` over tpch.tiny cut into stages, every join partitioned.
async fn fragmented(sql: &str) -> FragmentedPlan {
    let props = SessionProperties { join_max_broadcast_table_size: 0, ..Default::default() };
    let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
    let request = PlanRequest::for_tests(ctx, 2);
    match plan(request, sql.to_string(), Duration::from_secs(60)).await {
        Ok(Planned::Query { fragments: Some(f), .. }) => f.as_ref().clone(),
        _ => panic!("a distributed plan of {sql}"),
    }
}

/// q4's `EXISTS` (a semi join of orders with line items) filters the line items by
/// the orders' keys; the probe stage then waits for the build stage.
#[tokio::test]
async fn a_partitioned_semi_join_filters_its_probe_stage() {
    let sql = include_str!("../../queries/tpch/q4.sql").trim().trim_end_matches(';');
    let f = fragmented(sql).await;
    let filters = dynamic_filters(&f);
    assert_eq!(filters.len(), 1, "{filters:?}");
    let d = &filters[0];
    assert_eq!(d.build_keys.len(), 1);
    let name = |stage: usize, key: usize| f.fragments[stage].plan.schema().field(key).name().clone();
    assert_eq!(
        (name(d.build, d.build_keys[0]).as_str(), name(d.probe, d.probe_keys[0]).as_str()),
        ("o_orderkey", "l_orderkey")
    );
    assert!(!dependencies(&f, &filters).is_empty());
    assert!(dependencies(&f, &filters).contains(&(d.build, d.probe, DependencyKind::PartitionedJoinBuild)));
    // EXPLAIN says so, on the probe fragment.
    let text = crate::plan::explain::explain(&f, &|_| 2, &filters);
    let probe = &text[text.find(&format!("Fragment {} ", d.probe)).unwrap()..];
    let probe = &probe[..probe.find("\n\n").unwrap()];
    assert!(probe.contains(&format!("Starts after: fragment {} (the build of the join it feeds)", d.build)), "{probe}");
    assert!(
        probe.contains(&format!("Dynamic filter: keeps rows whose [l_orderkey] fragment {} has", d.build)),
        "{probe}"
    );
    assert!(!crate::plan::explain::explain(&f, &|_| 2, &[]).contains("Dynamic filter"));
    // The two nodes go under the stages' repartitions.
    let collecting = with_collector(&f.fragments[d.build].plan, d).unwrap();
    assert!((collecting.children()[0].as_ref() as &dyn std::any::Any).is::<DynamicFilterSourceExec>());
    let filtering = with_filter(&f.fragments[d.probe].plan, d, Arc::from([])).unwrap();
    assert!((filtering.children()[0].as_ref() as &dyn std::any::Any).is::<DynamicFilterExec>());
}

/// Joins that keep probe rows without a match, or whose NULLs match, get none.
#[tokio::test]
async fn joins_that_keep_unmatched_probe_rows_get_no_filter() {
    for sql in [
        // Outer joins that keep the probe side (DataFusion builds on the smaller side).
        "SELECT c_name, o_orderkey FROM customer FULL JOIN orders ON c_custkey = o_custkey",
        "SELECT count(*) FROM orders RIGHT JOIN lineitem ON o_orderkey = l_orderkey",
    ] {
        let f = fragmented(sql).await;
        let plans: Vec<String> = f
            .fragments
            .iter()
            .map(|fr| datafusion::physical_plan::displayable(fr.plan.as_ref()).indent(false).to_string())
            .collect();
        assert!(plans.iter().any(|p| p.contains("HashJoinExec: mode=Partitioned")), "{sql}: {plans:?}");
        let filters = dynamic_filters(&f);
        assert!(filters.is_empty(), "{sql}: unexpected filters {filters:?}\n{}", plans.join("\n"));
    }
}

fn batch(keys: Vec<Option<i64>>, names: Vec<Option<&str>>) -> RecordBatch {
    let schema =
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("name", DataType::Utf8, true)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(keys)), Arc::new(StringArray::from(names))]).unwrap()
}

fn source(partitions: Vec<Vec<RecordBatch>>) -> Arc<dyn ExecutionPlan> {
    let schema = partitions[0][0].schema();
    DataSourceExec::from_data_source(MemorySourceConfig::try_new(&partitions, schema, None).unwrap())
}

/// The rows a probe side keeps as (key, name).
fn rows(batches: &[RecordBatch]) -> Vec<(Option<i64>, Option<String>)> {
    let mut out = Vec::new();
    for b in batches {
        let k = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let n = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            out.push((k.is_valid(i).then(|| k.value(i)), n.is_valid(i).then(|| n.value(i).to_string())));
        }
    }
    out.sort();
    out
}

async fn run(plan: Arc<dyn ExecutionPlan>) -> Vec<RecordBatch> {
    collect(plan, SessionContext::new().task_ctx()).await.unwrap()
}

/// Build rows flow through unchanged; their key hashes (two columns, NULLs left out)
/// are ready once every partition ran, and keep exactly the probe rows with a
/// build-side key pair (the bloom filter's false positives, 1.5% of other keys,
/// would let one through; the hashes are fixed, and none of these is one).
#[tokio::test]
async fn collected_hashes_keep_exactly_the_probe_rows_with_build_keys() {
    let build = source(vec![
        vec![batch(vec![Some(1), Some(2), None], vec![Some("a"), Some("b"), Some("c")])],
        vec![batch(vec![Some(3), Some(1)], vec![Some("c"), None])],
    ]);
    let collector = Arc::new(DynamicFilterSourceExec::new(build, 7, vec![0, 1]));
    assert_eq!(collector.hashes(), None, "nothing ran yet");
    let ctx = SessionContext::new().task_ctx();
    let first = collector.execute(0, ctx.clone()).unwrap();
    let second = collector.execute(1, ctx.clone()).unwrap();
    assert_eq!(collector.hashes(), None, "both partitions are running");
    use futures::TryStreamExt;
    let first: Vec<RecordBatch> = first.try_collect().await.unwrap();
    assert_eq!(rows(&first).len(), 3, "rows pass unchanged");
    assert_eq!(collector.hashes(), None, "one partition of two ran to its end");
    let _: Vec<RecordBatch> = second.try_collect().await.unwrap();
    // (1,a) (2,b) (3,c); (NULL,c) and (1,NULL) have a NULL key.
    let hashes = collector.hashes().expect("complete");
    assert_eq!(hashes.len(), 3);

    let probe = source(vec![vec![batch(
        vec![Some(1), Some(1), Some(2), Some(3), None, Some(4), Some(3)],
        vec![Some("a"), Some("b"), Some("b"), Some("c"), Some("c"), Some("a"), None],
    )]]);
    let filter = Arc::new(DynamicFilterExec::new(probe, vec![0, 1], hashes.into()));
    let kept = rows(&run(filter).await);
    assert_eq!(
        kept,
        vec![(Some(1), Some("a".into())), (Some(2), Some("b".into())), (Some(3), Some("c".into()))],
        "the probe rows whose (k, name) a build row has"
    );
}

/// An empty build side keeps no probe row; too many build keys give no hashes.
#[tokio::test]
async fn an_empty_build_side_drops_every_probe_row_and_a_huge_one_gives_up() {
    let empty = source(vec![vec![batch(vec![], vec![])]]);
    let collector = Arc::new(DynamicFilterSourceExec::new(empty, 1, vec![0]));
    let _ = run(collector.clone()).await;
    let hashes = collector.hashes().expect("complete");
    assert!(hashes.is_empty());
    let probe = source(vec![vec![batch(vec![Some(1), Some(2)], vec![None, None])]]);
    assert!(run(Arc::new(DynamicFilterExec::new(probe, vec![0], Arc::from([])))).await.is_empty());

    let many: Vec<Option<i64>> = (0..(MAX_KEY_HASHES as i64 + 1)).map(Some).collect();
    let names = vec![None; many.len()];
    let collector = Arc::new(DynamicFilterSourceExec::new(source(vec![vec![batch(many, names)]]), 1, vec![0]));
    let _ = run(collector.clone()).await;
    assert_eq!(collector.hashes(), None, "over the limit");
    assert_eq!(union_of(vec![Some(vec![1, 2]), None]), None, "one task without hashes: no filter");
    assert_eq!(union_of(vec![Some(vec![1, 2]), Some(vec![2, 3])]).map(|s| s.len()), Some(3));
}

/// A filter that keeps nearly every row stops filtering: the rows after it pass
/// without being hashed (all of them, also those it would have dropped).
#[tokio::test]
async fn a_filter_that_keeps_most_rows_stops_filtering() {
    let n = 300_000i64;
    let keys: Vec<Option<i64>> = (0..n).map(Some).collect();
    let names = vec![None; keys.len()];
    // The build side has every key but the last thousand.
    let build = source(vec![vec![batch((0..n - 1000).map(Some).collect(), vec![None; (n - 1000) as usize])]]);
    let collector = Arc::new(DynamicFilterSourceExec::new(build, 1, vec![0]));
    let _ = run(collector.clone()).await;
    let set: Arc<[u64]> = collector.hashes().unwrap().into();
    let whole = batch(keys, names);
    let batches: Vec<RecordBatch> = (0..n as usize).step_by(10_000).map(|i| whole.slice(i, 10_000)).collect();
    let probe = source(vec![batches]);
    let kept: usize =
        run(Arc::new(DynamicFilterExec::new(probe, vec![0], set))).await.iter().map(|b| b.num_rows()).sum();
    assert_eq!(kept, n as usize, "the unmatched rows come last, after the filter gave up");
}

/// Both nodes travel through the codec with their keys, id and hashes.
#[tokio::test]
async fn both_nodes_survive_the_codec() {
    let codec = FlotillaCodec::new(Connectors::benchmark());
    let ctx = SessionContext::new().task_ctx();
    let input = source(vec![vec![batch(vec![Some(1)], vec![Some("a")])]]);
    let collector: Arc<dyn ExecutionPlan> = Arc::new(DynamicFilterSourceExec::new(input.clone(), 5, vec![1, 0]));
    let back = codec.decode_plan(&codec.encode_plan(collector).unwrap(), &ctx).unwrap();
    let back = (back.as_ref() as &dyn std::any::Any).downcast_ref::<DynamicFilterSourceExec>().expect("a collector");
    assert_eq!((back.id(), back.keys()), (5, &[1usize, 0][..]));

    let set = [3u64, u64::MAX, 0];
    let filter: Arc<dyn ExecutionPlan> = Arc::new(DynamicFilterExec::new(input, vec![0], Arc::from(set)));
    let back = codec.decode_plan(&codec.encode_plan(filter).unwrap(), &ctx).unwrap();
    let back = (back.as_ref() as &dyn std::any::Any).downcast_ref::<DynamicFilterExec>().expect("a filter");
    assert_eq!((back.keys(), back.hashes()), (&[0usize][..], &set[..]));
}

/// The bloom filter never misses a key it holds, and lets few others through.
#[test]
fn the_key_bloom_holds_every_key_and_few_others() {
    use crate::plan::dynamic_filter_exec::KeyBloom;
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    let hash = |i: u64| state.hash_one(i);
    let held: Vec<u64> = (0..100_000u64).map(hash).collect();
    let bloom = KeyBloom::new(&held);
    assert!(held.iter().all(|h| bloom.may_contain(*h)), "no false negatives");
    let others = (1_000_000..1_200_000u64).filter(|i| bloom.may_contain(hash(*i))).count();
    assert!(others < 200_000 * 3 / 100, "{others} of 200000 other keys pass (about 1.5% expected)");
    assert!(!KeyBloom::new(&[]).may_contain(hash(1)), "an empty filter holds nothing");
}

/// The build side's hashes count in the task's memory pool; a pool too small for
/// them gives up the filter, not the query.
#[tokio::test]
async fn the_collected_hashes_live_in_the_memory_pool() {
    use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool};
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::prelude::SessionConfig;
    let keys: Vec<Option<i64>> = (0..50_000).map(Some).collect();
    for (limit, complete) in [(64 << 20, true), (64 << 10, false)] {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(limit));
        let runtime = RuntimeEnvBuilder::new().with_memory_pool(pool.clone()).build_arc().unwrap();
        let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime).task_ctx();
        let build = source(vec![vec![batch(keys.clone(), vec![None; keys.len()])]]);
        let collector = Arc::new(DynamicFilterSourceExec::new(build, 1, vec![0]));
        let rows: usize = collect(collector.clone(), ctx).await.unwrap().iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, keys.len(), "every row passes either way");
        assert_eq!(collector.hashes().map(|h| h.len()), complete.then_some(keys.len()), "pool of {limit} B");
        assert_eq!(pool.reserved() > 0, complete, "the set is held in the pool while it lives");
        drop(collector);
        assert_eq!(pool.reserved(), 0, "and freed with the plan");
    }
}
