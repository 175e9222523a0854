//! What a task runs: its fragment's plan, narrowed to the task's partitions where that
//! lets a hash join's dynamic filter work (`plan::partition_subset`), and the context
//! it runs in. `SqlTask::start` asks.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;

use super::task::derived_context;
use crate::plan::partition_subset::{has_join_dynamic_filter, narrow};

pub struct TaskPlan {
    pub plan: Arc<dyn ExecutionPlan>,
    /// For each of the task's partitions, in its order: the partition of `plan` to
    /// execute and the fragment's partition it stands for.
    pub runs: Vec<(usize, usize)>,
    /// The task runs all of the fragment's partitions.
    pub every_partition: bool,
    /// Hash joins may fill dynamic filters: each one runs all of its partitions.
    pub join_filters: bool,
}

/// One partition a task runs, as `TaskPlan::runs` has it, and the fragment's
/// partition count (which the task's output partitioner counts in).
pub struct PartitionRun {
    pub local: usize,
    pub partition: usize,
    pub input_partitions: usize,
}

/// The plan a task with `partitions` of a fragment of `input_partitions` runs.
pub fn task_plan(plan: Arc<dyn ExecutionPlan>, partitions: &[usize], input_partitions: usize) -> Result<TaskPlan> {
    let every_partition = (0..input_partitions).all(|p| partitions.contains(&p));
    let as_cut = |plan, join_filters| TaskPlan {
        plan,
        runs: partitions.iter().map(|p| (*p, *p)).collect(),
        every_partition,
        join_filters,
    };
    // A join's barrier counts the plan's partitions: with all of them it is DataFusion's
    // own case, and with none of those joins there is no barrier.
    if every_partition {
        return Ok(as_cut(plan, true));
    }
    if !has_join_dynamic_filter(&plan)? {
        return Ok(as_cut(plan, false));
    }
    let mut mine = partitions.to_vec();
    mine.sort_unstable();
    mine.dedup();
    let (narrowed, all_run) = narrow(&plan, &mine)?;
    if !all_run {
        return Ok(as_cut(plan, false));
    }
    let runs = partitions.iter().map(|p| (mine.partition_point(|m| m < p), *p)).collect();
    Ok(TaskPlan { plan: narrowed, runs, every_partition, join_filters: true })
}

/// The task's context: `base` with file scans' work stealing on when the task runs
/// every partition of its fragment (their streams may then take each other's files,
/// as in one DataFusion process; otherwise they would read files other tasks own),
/// and hash joins' dynamic filters on only where `TaskPlan::join_filters` says.
pub fn task_context(base: &Arc<TaskContext>, every_partition: bool, join_filters: bool) -> Arc<TaskContext> {
    let current = base.session_config().options();
    if current.execution.enable_file_stream_work_stealing == every_partition
        && current.optimizer.enable_join_dynamic_filter_pushdown == join_filters
    {
        return base.clone();
    }
    let mut config = base.session_config().clone();
    let options = config.options_mut();
    options.execution.enable_file_stream_work_stealing = every_partition;
    options.optimizer.enable_join_dynamic_filter_pushdown = join_filters;
    derived_context(base, config, base.runtime_env())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::physical_plan::{ExecutionPlanProperties, Partitioning};

    fn four_partitions() -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        let empty = Arc::new(EmptyExec::new(schema).with_partitions(4));
        Arc::new(RepartitionExec::try_new(empty, Partitioning::RoundRobinBatch(4)).unwrap())
    }

    #[test]
    fn a_plan_without_join_filters_runs_as_cut() {
        let plan = four_partitions();
        let tp = task_plan(plan.clone(), &[3, 1], 4).unwrap();
        assert!(Arc::ptr_eq(&tp.plan, &plan));
        assert_eq!(tp.runs, vec![(3, 3), (1, 1)]);
        assert!(!tp.every_partition && !tp.join_filters);
        let tp = task_plan(plan, &[0, 1, 2, 3], 4).unwrap();
        assert!(tp.every_partition && tp.join_filters);
        assert_eq!(tp.plan.output_partitioning().partition_count(), 4);
    }

    /// A task with partitions 3 and 1 of a join whose filter reaches its scan runs the
    /// plan narrowed to two partitions: its first is the fragment's 1, its second 3.
    #[tokio::test]
    async fn a_task_of_a_join_with_a_filter_runs_its_partitions_narrowed() {
        use crate::plan::partition_subset::tests::{Tables, JOIN};
        let tables = Tables::new().await;
        let (plan, _ctx) = tables.plan(JOIN, true).await;
        let tp = task_plan(plan, &[3, 1], 4).unwrap();
        assert_eq!(tp.plan.output_partitioning().partition_count(), 2);
        assert_eq!(tp.runs, vec![(1, 3), (0, 1)]);
        assert!(!tp.every_partition && tp.join_filters);
    }

    #[test]
    fn the_context_says_what_the_plan_allows() {
        let base = Arc::new(TaskContext::default());
        let ctx = task_context(&base, false, true);
        let options = ctx.session_config().options();
        assert!(!options.execution.enable_file_stream_work_stealing);
        assert!(options.optimizer.enable_join_dynamic_filter_pushdown);
        let ctx = task_context(&base, true, false);
        let options = ctx.session_config().options();
        assert!(options.execution.enable_file_stream_work_stealing);
        assert!(!options.optimizer.enable_join_dynamic_filter_pushdown);
        // A context that already says so is used as it is.
        assert!(Arc::ptr_eq(&task_context(&ctx, true, false), &ctx));
    }
}
