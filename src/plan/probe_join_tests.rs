use super::*;
use crate::exchange::remote_source::ExchangeMode;
use datafusion::arrow::array::{Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::NullEquality;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::aggregates::PhysicalGroupBy;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::prelude::SessionContext;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]))
}

fn remote(stage: usize, partitions: usize) -> Arc<dyn ExecutionPlan> {
    Arc::new(RemoteSourceExec::new(stage, ExchangeMode::Repartition, partitions, schema()))
}

fn hashed(input: Arc<dyn ExecutionPlan>, partitions: usize) -> Arc<dyn ExecutionPlan> {
    let key = Arc::new(Column::new("k", 0)) as _;
    Arc::new(RepartitionExec::try_new(input, Partitioning::Hash(vec![key], partitions)).unwrap())
}

fn join_of(
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    join_type: JoinType,
    mode: PartitionMode,
) -> Arc<dyn ExecutionPlan> {
    let on = vec![(Arc::new(Column::new("k", 0)) as _, Arc::new(Column::new("k", 0)) as _)];
    let join =
        HashJoinExec::try_new(left, right, on, None, &join_type, None, mode, NullEquality::NullEqualsNothing, false);
    Arc::new(join.unwrap())
}

/// Stage 1 builds, stage 2 probes, over 4 partitions.
fn join(join_type: JoinType, mode: PartitionMode) -> Arc<dyn ExecutionPlan> {
    join_of(remote(1, 4), remote(2, 4), join_type, mode)
}

fn aggregate(mode: AggregateMode, input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let group = PhysicalGroupBy::new_single(vec![(Arc::new(Column::new("k", 0)) as _, "k".to_string())]);
    let schema = input.schema();
    Arc::new(AggregateExec::try_new(mode, group, vec![], vec![], input, schema).unwrap())
}

fn memory(partitions: Vec<Vec<i64>>) -> Arc<dyn ExecutionPlan> {
    let batches: Vec<Vec<RecordBatch>> = partitions
        .into_iter()
        .map(|keys| vec![RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(keys))]).unwrap()])
        .collect();
    DataSourceExec::from_data_source(MemorySourceConfig::try_new(&batches, schema(), None).unwrap())
}

/// The probe side (stage 2) may be split under joins that never emit a build row
/// alone, with a partial aggregation above; not under a left join, a final
/// aggregation or a sort, nor for a join that collects its build side.
#[test]
fn only_a_partitioned_probe_preserving_join_is_split_by_its_probe_side() {
    let inner = join(JoinType::Inner, PartitionMode::Partitioned);
    assert_eq!(probe_stage(&inner), Some(2));
    assert_eq!(build_stages(&inner), BTreeSet::from([1]));
    assert_eq!(probe_stage(&join(JoinType::RightAnti, PartitionMode::Partitioned)), Some(2));
    assert_eq!(probe_stage(&aggregate(AggregateMode::Partial, inner.clone())), Some(2));
    assert_eq!(probe_stage(&join(JoinType::Left, PartitionMode::Partitioned)), None);
    assert_eq!(probe_stage(&join(JoinType::LeftSemi, PartitionMode::Partitioned)), None);
    assert_eq!(probe_stage(&join(JoinType::Inner, PartitionMode::CollectLeft)), None);
    assert_eq!(probe_stage(&aggregate(AggregateMode::FinalPartitioned, inner.clone())), None);
    let key = datafusion::physical_expr::PhysicalSortExpr::new_default(Arc::new(Column::new("k", 0)));
    let ordering = datafusion::physical_expr::LexOrdering::new([key]).expect("one key");
    let sort = SortExec::new(ordering, inner).with_preserve_partitioning(true);
    assert_eq!(probe_stage(&(Arc::new(sort) as Arc<dyn ExecutionPlan>)), None);
}

/// The join stage repartitions its output for its consumer; the probe stage's 3
/// partitions were hashed into the join's 4. Broadcast, the join collects its build
/// side into one partition and probes the probe stage's 3 partitions directly.
#[test]
fn a_broadcast_build_side_takes_the_probe_stage_in() {
    let join_plan = hashed(aggregate(AggregateMode::Partial, join(JoinType::Inner, PartitionMode::Partitioned)), 8);
    let probe_plan = hashed(remote(5, 3), 4);
    let fused = broadcast_build_side(&join_plan, 2, &probe_plan).unwrap().expect("the shapes fit");
    let text = datafusion::physical_plan::displayable(fused.as_ref()).indent(false).to_string();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert!(lines[0].starts_with("RepartitionExec: partitioning=Hash([k@0], 8), input_partitions=3"), "{text}");
    assert!(lines[2].starts_with("HashJoinExec: mode=CollectLeft, join_type=Inner"), "{text}");
    assert_eq!(
        lines[3..],
        [
            "CoalescePartitionsExec",
            "RemoteSourceExec: stage=1, mode=repartition, partitions=4",
            "RemoteSourceExec: stage=5, mode=repartition, partitions=3"
        ],
        "{text}"
    );
    let mut sources = BTreeSet::new();
    remote_sources(&fused, &mut sources);
    assert_eq!(sources, BTreeSet::from([1, 5]), "stage 2 is no longer read");
}

/// Not for a probe fragment that does not end in a hash repartition, another stage
/// than the probe side, or a join that emits build rows alone.
#[test]
fn only_the_probe_stage_of_a_probe_preserving_join_is_taken_in() {
    let inner = join(JoinType::Inner, PartitionMode::Partitioned);
    let probe_plan = hashed(remote(5, 3), 4);
    assert!(broadcast_build_side(&inner, 2, &remote(5, 3)).unwrap().is_none());
    assert!(broadcast_build_side(&inner, 1, &probe_plan).unwrap().is_none());
    let left = join(JoinType::Left, PartitionMode::Partitioned);
    assert!(broadcast_build_side(&left, 2, &probe_plan).unwrap().is_none());
}

/// The fused plan answers as the partitioned one: every probe row with each build
/// row of its key, whatever partition either was in.
#[tokio::test]
async fn the_broadcast_join_finds_every_match() {
    let build = hashed(memory(vec![vec![1, 2], vec![3, 3]]), 4);
    let join_plan = join_of(build, remote(2, 4), JoinType::Inner, PartitionMode::Partitioned);
    let probe_plan = hashed(memory(vec![vec![1, 1, 4], vec![2, 3], vec![5, 3, 9]]), 4);
    let fused = broadcast_build_side(&join_plan, 2, &probe_plan).unwrap().expect("the shapes fit");
    assert_eq!(fused.output_partitioning().partition_count(), 3);
    let batches = datafusion::physical_plan::collect(fused, SessionContext::new().task_ctx()).await.unwrap();
    let mut pairs: Vec<(i64, i64)> = Vec::new();
    for b in &batches {
        let col = |i: usize| b.column(i).as_any().downcast_ref::<Int64Array>().unwrap().clone();
        let (l, r) = (col(0), col(1));
        pairs.extend((0..b.num_rows()).map(|i| (l.value(i), r.value(i))));
    }
    pairs.sort();
    // Probe keys 1, 1, 2, 3, 3 meet build keys 1, 2, 3, 3: 2 + 1 + 2 * 2 pairs.
    assert_eq!(pairs, vec![(1, 1), (1, 1), (2, 2), (3, 3), (3, 3), (3, 3), (3, 3)]);
}
