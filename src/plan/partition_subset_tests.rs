//! A join whose dynamic filter reaches a Parquet scan, narrowed to some of its
//! partitions: it runs them without waiting for the others, prunes with the filter,
//! and returns the rows those partitions hold without it.

use std::path::PathBuf;
use std::time::Duration;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::common;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::*;

/// `fact` in four files (four scan partitions), each key 0..99 ten times in key
/// order, 100 rows a row group; `dim` flags keys 40..44.
pub(crate) struct Tables {
    dir: PathBuf,
}

impl Tables {
    pub(crate) async fn new() -> Tables {
        let dir = std::env::temp_dir().join(format!("flotilla-subset-{}", crate::util::random_suffix(8)));
        std::fs::create_dir_all(dir.join("fact")).unwrap();
        let ctx = SessionContext::new();
        for file in 0..4 {
            let sql = format!(
                "COPY (SELECT k AS f_key, k * 10 + {file} AS f_val FROM (SELECT value / 10 AS k FROM range(1000)) \
                 ORDER BY k) TO '{}' STORED AS PARQUET OPTIONS ('format.max_row_group_size' '100')",
                dir.join("fact").join(format!("part-{file}.parquet")).display()
            );
            ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        }
        let sql = format!(
            "COPY (SELECT value AS d_key, CASE WHEN value BETWEEN 40 AND 44 THEN 'x' ELSE 'y' END AS d_flag \
             FROM range(100)) TO '{}' STORED AS PARQUET",
            dir.join("dim.parquet").display()
        );
        ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        Tables { dir }
    }

    /// The join's physical plan in a context with four partitions and join dynamic
    /// filters `on` or off.
    pub(crate) async fn plan(&self, sql: &str, on: bool) -> (Arc<dyn ExecutionPlan>, SessionContext) {
        let mut config = SessionConfig::new().with_target_partitions(4);
        config.options_mut().optimizer.enable_join_dynamic_filter_pushdown = on;
        let ctx = SessionContext::new_with_config(config);
        for (name, path) in [("fact", self.dir.join("fact")), ("dim", self.dir.join("dim.parquet"))] {
            let path = path.display().to_string();
            let path = if name == "fact" { format!("{path}/") } else { path };
            ctx.sql(&format!("CREATE EXTERNAL TABLE {name} STORED AS PARQUET LOCATION '{path}'"))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
        }
        let plan = ctx.sql(sql).await.unwrap().create_physical_plan().await.unwrap();
        (plan, ctx)
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) const JOIN: &str = "SELECT f_key, f_val FROM fact JOIN dim ON f_key = d_key WHERE d_flag = 'x'";

/// Runs `partitions` of `plan` at once, as a task does, and prints the rows sorted.
async fn run(plan: &Arc<dyn ExecutionPlan>, partitions: &[usize], ctx: &SessionContext) -> String {
    let runs = partitions.iter().map(|p| {
        let stream = plan.execute(*p, ctx.task_ctx()).unwrap();
        common::collect(stream)
    });
    let batches: Vec<_> = tokio::time::timeout(Duration::from_secs(20), futures::future::try_join_all(runs))
        .await
        .expect("the partitions ran without waiting for the others")
        .unwrap()
        .concat();
    let mut lines: Vec<String> =
        pretty_format_batches(&batches).unwrap().to_string().lines().skip(3).map(String::from).collect();
    lines.pop();
    lines.sort();
    lines.join("\n")
}

fn pruned_row_groups(plan: &Arc<dyn ExecutionPlan>) -> usize {
    use datafusion::physical_plan::metrics::MetricValue;
    let own: usize = plan
        .metrics()
        .iter()
        .flat_map(|m| m.iter())
        .map(|m| match m.value() {
            MetricValue::PruningMetrics { name, pruning_metrics } if name == "row_groups_pruned_statistics" => {
                pruning_metrics.pruned()
            }
            _ => 0,
        })
        .sum();
    own + plan.children().into_iter().map(pruned_row_groups).sum::<usize>()
}

#[tokio::test]
async fn a_narrowed_join_runs_its_partitions_with_the_dynamic_filter() {
    let tables = Tables::new().await;
    let (plan, ctx) = tables.plan(JOIN, true).await;
    assert_eq!(plan.output_partitioning().partition_count(), 4);
    assert!(has_join_dynamic_filter(&plan).unwrap(), "{}", displayed(&plan));

    let (narrowed, all_run) = narrow(&plan, &[1, 3]).unwrap();
    assert!(all_run, "{}", displayed(&narrowed));
    assert_eq!(narrowed.output_partitioning().partition_count(), 2);
    let rows = run(&narrowed, &[0, 1], &ctx).await;

    let (plain, plain_ctx) = tables.plan(JOIN, false).await;
    assert!(!has_join_dynamic_filter(&plain).unwrap());
    let expected = run(&plain, &[1, 3], &plain_ctx).await;
    // Files 1 and 3: keys 40..44, ten rows each.
    assert_eq!(rows.lines().count(), 100);
    assert_eq!(rows, expected);
    // Each of the two files keeps one row group of its ten.
    assert_eq!(pruned_row_groups(&narrowed), 18, "{}", displayed(&narrowed));
}

#[tokio::test]
async fn a_union_hands_each_input_its_own_partitions() {
    let tables = Tables::new().await;
    let sql =
        format!("{JOIN} UNION ALL SELECT f_key, f_val + 1 FROM fact JOIN dim ON f_key = d_key WHERE d_flag = 'x'");
    let (plan, ctx) = tables.plan(&sql, true).await;
    assert_eq!(plan.output_partitioning().partition_count(), 8);
    // Partition 2 of the first input, 1 and 3 of the second.
    let (narrowed, all_run) = narrow(&plan, &[2, 5, 7]).unwrap();
    assert!(all_run, "{}", displayed(&narrowed));
    let rows = run(&narrowed, &[0, 1, 2], &ctx).await;
    let (plain, plain_ctx) = tables.plan(&sql, false).await;
    assert_eq!(rows, run(&plain, &[2, 5, 7], &plain_ctx).await);
    assert_eq!(rows.lines().count(), 150);
}

#[tokio::test]
async fn an_operator_it_does_not_know_runs_the_subset_and_says_the_joins_would_wait() {
    let tables = Tables::new().await;
    let (plan, _ctx) = tables.plan(JOIN, true).await;
    let repartitioned: Arc<dyn ExecutionPlan> =
        Arc::new(RepartitionExec::try_new(plan.clone(), Partitioning::RoundRobinBatch(4)).unwrap());
    let (narrowed, all_run) = narrow(&repartitioned, &[0, 2]).unwrap();
    assert!(!all_run);
    let subset = (narrowed.as_ref() as &dyn Any).downcast_ref::<PartitionSubsetExec>().expect("a subset over it");
    assert_eq!(subset.partitions, vec![0, 2]);

    // Every partition, or a plan with no such join, is left as it is.
    let (same, all_run) = narrow(&plan, &[0, 1, 2, 3]).unwrap();
    assert!(Arc::ptr_eq(&same, &plan) && all_run);
    let (plain, _) = tables.plan(JOIN, false).await;
    let plain: Arc<dyn ExecutionPlan> =
        Arc::new(RepartitionExec::try_new(plain, Partitioning::RoundRobinBatch(4)).unwrap());
    let (_, all_run) = narrow(&plain, &[1]).unwrap();
    assert!(all_run);
}

fn displayed(plan: &Arc<dyn ExecutionPlan>) -> String {
    datafusion::physical_plan::displayable(plan.as_ref()).indent(true).to_string()
}

/// What a worker gets: the fragment coded and decoded by the codec. The join and the
/// scan still share one filter, so the scan prunes by what the join built.
#[tokio::test]
async fn a_decoded_fragment_keeps_the_join_and_its_scan_on_one_filter() {
    use crate::codec::FlotillaCodec;
    use crate::connector::Connectors;
    let tables = Tables::new().await;
    let (plan, ctx) = tables.plan(JOIN, true).await;
    let codec = FlotillaCodec::new(Connectors::benchmark());
    let back = codec.decode_plan(&codec.encode_plan(plan).unwrap(), &ctx.task_ctx()).unwrap();
    let (narrowed, all_run) = narrow(&back, &[0, 2]).unwrap();
    assert!(all_run);
    let rows = run(&narrowed, &[0, 1], &ctx).await;
    let (plain, plain_ctx) = tables.plan(JOIN, false).await;
    assert_eq!(rows, run(&plain, &[0, 2], &plain_ctx).await);
    assert_eq!(pruned_row_groups(&narrowed), 18, "{}", displayed(&narrowed));
}
