//! The fragmenter: cuts an optimized DataFusion physical plan into fragments at
//! exchange boundaries and links them into a petgraph DAG. The coordinator's query
//! execution calls it after planning; the scheduler runs one stage per fragment.
//!
//! Cuts: a `RepartitionExec` (hash or round robin) becomes a repartition exchange,
//! the producer partitioning its own rows into the consumer's partitions; a
//! `CoalescePartitionsExec` becomes a broadcast exchange to each consumer task (one
//! task when the consumer is a single partition); a `SortPreservingMergeExec` keeps
//! the producer's partitions apart (passthrough) so the merge stays in the consumer.
//! The build side of a collect-left join is broadcast, so every task of the probe
//! stage sees all of it, unless it only scans a small table: then each task scans it.

use datafusion::common::{internal_err, not_impl_err};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode, SortMergeJoinExec, SymmetricHashJoinExec,
};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use petgraph::graph::DiGraph;

use super::DependencyKind;
use crate::connector::Connectors;
use crate::exchange::remote_source::{ExchangeMode, RemoteSourceExec};

/// How a fragment's output leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentOutput {
    /// The root fragment: runs in the coordinator, output goes to the client.
    Root,
    /// The fragment root is a `RepartitionExec` into `partitions` consumer partitions.
    Repartition { partitions: usize },
    /// Every consumer task gets all rows.
    Broadcast,
    /// Each partition goes to the consumer partition of the same number.
    Passthrough,
}

#[derive(Debug, Clone)]
pub struct Fragment {
    /// Stage id; the root is 0, the others are numbered as cuts are made, bottom-up,
    /// so a producer has a smaller id than its (non-root) consumer.
    pub id: usize,
    pub plan: Arc<dyn ExecutionPlan>,
    pub output: FragmentOutput,
    /// Partitions the tasks of the stage divide among themselves.
    pub partitions: usize,
    pub consumer: Option<usize>,
    /// Upstream stages read through remote sources.
    pub inputs: Vec<usize>,
    /// Reads table data itself (a leaf stage).
    pub has_scan: bool,
}

impl Fragment {
    pub(crate) fn exchange_mode(&self) -> ExchangeMode {
        match self.output {
            FragmentOutput::Repartition { .. } => ExchangeMode::Repartition,
            FragmentOutput::Passthrough => ExchangeMode::Passthrough,
            _ => ExchangeMode::Broadcast,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FragmentedPlan {
    /// Indexed by stage id.
    pub fragments: Vec<Fragment>,
    pub graph: DiGraph<usize, ExchangeMode>,
}

impl FragmentedPlan {
    pub fn root(&self) -> &Fragment {
        &self.fragments[0]
    }

    /// Worker stages, producers before their consumers.
    pub fn worker_stages(&self) -> Vec<usize> {
        (1..self.fragments.len()).collect()
    }

    /// The schedule dependencies of Trino's phased policy, from the joins.
    pub fn dependencies(&self) -> Vec<(usize, usize, DependencyKind)> {
        let mut deps = Vec::new();
        for f in &self.fragments {
            collect_join_dependencies(&f.plan, f.id, &mut deps);
        }
        deps.retain(|(a, b, _)| *a != 0 && *b != 0 && a != b);
        // A probe-side stage that only streams rows (scans, filters, projections,
        // repartitioning) runs while the build is read and stops when its output
        // buffers fill: it holds nothing else, and its rows are ready when the join
        // wants them. One that gathers state (a join, an aggregation, a sort) waits, as
        // in Trino, so that it and the build do not hold their memory at once.
        deps.retain(|(_, probe, kind)| {
            *kind != DependencyKind::PartitionedJoinBuild || !streams_only(&self.fragments[*probe].plan)
        });
        deps
    }

    /// The DAG in Graphviz DOT, fragments as nodes and exchanges as edges.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph fragments {\n  rankdir=BT;\n");
        for f in &self.fragments {
            let _ = writeln!(out, "  f{} [shape=box,label=\"Fragment {}\\n{} partitions\"];", f.id, f.id, f.partitions);
        }
        for e in self.graph.edge_indices() {
            let (a, b) = self.graph.edge_endpoints(e).expect("edge");
            let _ = writeln!(out, "  f{} -> f{} [label=\"{}\"];", self.graph[a], self.graph[b], self.graph[e]);
        }
        out.push_str("}\n");
        out
    }
}

/// True when the plan runs anything that must execute on workers: a connector's table
/// scan (in-memory tables, like information_schema's, stay on the coordinator), or a
/// writer into a `memory` table (its rows stay where it runs).
pub fn reads_tables(plan: &Arc<dyn ExecutionPlan>, connectors: &Connectors) -> bool {
    connectors.is_scan(plan.as_ref())
        || as_::<crate::plan::table_writer::TableWriterExec>(plan).is_some_and(|w| w.target().needs_worker())
        || plan.children().iter().any(|c| reads_tables(c, connectors))
}

fn is<T: 'static>(plan: &Arc<dyn ExecutionPlan>) -> bool {
    (plan.as_ref() as &dyn std::any::Any).is::<T>()
}

pub(crate) fn as_<T: 'static>(plan: &Arc<dyn ExecutionPlan>) -> Option<&T> {
    (plan.as_ref() as &dyn std::any::Any).downcast_ref::<T>()
}

/// The stages `plan` reads through its remote sources.
pub(crate) fn remote_sources(plan: &Arc<dyn ExecutionPlan>, out: &mut BTreeSet<usize>) {
    if let Some(rs) = as_::<RemoteSourceExec>(plan) {
        out.insert(rs.stage());
    }
    for c in plan.children() {
        remote_sources(c, out);
    }
}

fn collect_join_dependencies(
    plan: &Arc<dyn ExecutionPlan>,
    fragment: usize,
    deps: &mut Vec<(usize, usize, DependencyKind)>,
) {
    let sides = if let Some(j) = as_::<HashJoinExec>(plan) {
        Some((j.left(), j.right(), *j.partition_mode() == PartitionMode::CollectLeft))
    } else if let Some(j) = as_::<NestedLoopJoinExec>(plan) {
        Some((j.left(), j.right(), true))
    } else {
        as_::<CrossJoinExec>(plan).map(|j| (j.left(), j.right(), true))
    };
    if let Some((left, right, broadcast)) = sides {
        let (mut build, mut probe) = (BTreeSet::new(), BTreeSet::new());
        remote_sources(left, &mut build);
        remote_sources(right, &mut probe);
        for &b in &build {
            // Only the join's own stage waits for a broadcast build. Trino also holds
            // back the stages feeding its probe side; here they run meanwhile and stop
            // when their output buffers fill, which took a phase off queries like q11,
            // q21 and q22 (sf10: 12%, 3% and 9% less time).
            if broadcast {
                deps.push((b, fragment, DependencyKind::BroadcastJoinBuild));
                continue;
            }
            for &p in &probe {
                deps.push((b, p, DependencyKind::PartitionedJoinBuild));
            }
        }
    }
    for c in plan.children() {
        collect_join_dependencies(c, fragment, deps);
    }
}

/// Whether `plan` passes rows through without gathering them: no join, aggregation,
/// sort or window anywhere in it.
pub(crate) fn streams_only(plan: &Arc<dyn ExecutionPlan>) -> bool {
    !gathers(plan) && plan.children().into_iter().all(streams_only)
}

/// Whether the node itself (not its inputs) gathers rows: a join, an aggregation,
/// a sort or a window.
pub(crate) fn gathers(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let any = plan.as_ref() as &dyn std::any::Any;
    any.is::<HashJoinExec>()
        || any.is::<NestedLoopJoinExec>()
        || any.is::<CrossJoinExec>()
        || any.is::<SortMergeJoinExec>()
        || any.is::<SymmetricHashJoinExec>()
        || any.is::<AggregateExec>()
        || any.is::<SortExec>()
        || any.is::<WindowAggExec>()
        || any.is::<BoundedWindowAggExec>()
}

/// Largest estimated build-side scan that every task of a join reads itself instead
/// of a stage broadcasting it: dimension tables like TPC-H's `nation` and `supplier`
/// at sf1, not `part` (200,000 rows: q14 took twice as long with every task scanning
/// it), whose scans would be repeated by every task.
const INLINE_BUILD_MAX_BYTES: usize = 4 << 20;
/// Largest estimated row count of such a scan.
pub(crate) const INLINE_BUILD_MAX_ROWS: usize = 32 << 10;

struct Fragmenter<'a> {
    fragments: Vec<Option<Fragment>>,
    connectors: &'a Connectors,
}

/// Cuts `plan` into fragments. The root fragment is always a single partition that
/// reads only remote sources, so the coordinator never scans.
pub fn fragment_plan(plan: Arc<dyn ExecutionPlan>, connectors: &Connectors) -> Result<FragmentedPlan> {
    fragment_with(plan, connectors, true)
}

/// The whole plan as one fragment run by a single task (its partitions merged at its
/// top), under the root fragment: its repartitions and joins stay inside that task's
/// process, where DataFusion moves rows between partitions for free.
pub fn single_task_plan(plan: Arc<dyn ExecutionPlan>, connectors: &Connectors) -> Result<FragmentedPlan> {
    fragment_with(plan, connectors, false)
}

/// Rows the plan's table scans read in all, by their statistics (exact or estimated);
/// None when a scan does not know.
pub fn scanned_rows(plan: &Arc<dyn ExecutionPlan>, connectors: &Connectors) -> Option<usize> {
    if connectors.is_scan(plan.as_ref()) {
        return estimated_rows(plan);
    }
    plan.children().into_iter().try_fold(0usize, |sum, c| Some(sum.saturating_add(scanned_rows(c, connectors)?)))
}

/// The rows `plan` produces by DataFusion's statistics, exact or estimated.
pub(crate) fn estimated_rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    use datafusion::physical_plan::{StatisticsArgs, StatisticsContext};
    let stats = StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new()).ok()?;
    stats.num_rows.get_value().copied()
}

fn fragment_with(plan: Arc<dyn ExecutionPlan>, connectors: &Connectors, cut: bool) -> Result<FragmentedPlan> {
    let plan = if plan.output_partitioning().partition_count() > 1 {
        Arc::new(CoalescePartitionsExec::new(plan)) as Arc<dyn ExecutionPlan>
    } else {
        plan
    };
    let mut f = Fragmenter { fragments: vec![None], connectors };
    let mut root = if cut { f.visit(plan)? } else { plan };
    if reads_tables(&root, connectors) {
        // Nothing was cut above the scans: run the whole plan on one worker task.
        let partitions = root.output_partitioning().partition_count();
        let id = f.add(root.clone(), FragmentOutput::Passthrough, partitions);
        let rs: Arc<dyn ExecutionPlan> = Arc::new(
            RemoteSourceExec::new(id, ExchangeMode::Passthrough, partitions, root.schema())
                .with_partitioning(root.output_partitioning().clone()),
        );
        root = if partitions > 1 { Arc::new(CoalescePartitionsExec::new(rs)) } else { rs };
    }
    if root.output_partitioning().partition_count() != 1 {
        return internal_err!("root fragment must have one partition");
    }
    f.fragments[0] = Some(Fragment {
        id: 0,
        partitions: 1,
        output: FragmentOutput::Root,
        consumer: None,
        inputs: Vec::new(),
        has_scan: false,
        plan: root,
    });
    let mut fragments: Vec<Fragment> = f.fragments.into_iter().map(|x| x.expect("every fragment filled")).collect();
    if cut {
        for fr in &mut fragments {
            fr.plan = sorted_where_required(fr.plan.clone())?;
        }
    }
    // Link inputs and consumers from the remote sources each fragment reads.
    let mut graph = DiGraph::new();
    let nodes: Vec<_> = fragments.iter().map(|fr| graph.add_node(fr.id)).collect();
    for i in 0..fragments.len() {
        let mut inputs = BTreeSet::new();
        remote_sources(&fragments[i].plan, &mut inputs);
        fragments[i].inputs = inputs.iter().copied().collect();
        fragments[i].has_scan = reads_tables(&fragments[i].plan, connectors);
        for &input in &inputs {
            fragments[input].consumer = Some(i);
        }
    }
    for fr in &fragments {
        for &input in &fr.inputs {
            graph.add_edge(nodes[input], nodes[fr.id], fragments[input].exchange_mode());
        }
    }
    Ok(FragmentedPlan { fragments, graph })
}

/// `plan` with a sort wherever a window needs an order its input no longer has. A
/// remote source does not carry what DataFusion knew of the rows above the cut (an
/// order, a column made constant by a filter), so a window in sorted mode above one
/// would fail ("Expects PARTITION BY expression to be ordered"); DataFusion's own rule
/// adds the sorts back. Only fragments with a window: elsewhere the sorts it would add
/// above a passthrough source (whose partitions arrive sorted, which the source does
/// not declare) would sort again what is sorted.
fn sorted_where_required(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_optimizer::enforce_sorting::{ensure_sorting, PlanWithCorrespondingSort};
    let windowed = plan.exists(|n| {
        let any = n.as_ref() as &dyn std::any::Any;
        Ok(any.is::<BoundedWindowAggExec>() || any.is::<WindowAggExec>())
    })?;
    if !windowed {
        return Ok(plan);
    }
    Ok(PlanWithCorrespondingSort::new_default(plan).transform_up(ensure_sorting)?.data.plan)
}

impl Fragmenter<'_> {
    fn add(&mut self, plan: Arc<dyn ExecutionPlan>, output: FragmentOutput, partitions: usize) -> usize {
        let id = self.fragments.len();
        self.fragments.push(Some(Fragment {
            id,
            plan,
            output,
            partitions,
            consumer: None,
            inputs: vec![],
            has_scan: false,
        }));
        id
    }

    /// Cuts a subtree into a producer fragment feeding a broadcast remote source.
    fn broadcast(&mut self, producer: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let partitions = producer.output_partitioning().partition_count();
        let schema = producer.schema();
        let id = self.add(producer, FragmentOutput::Broadcast, partitions);
        Arc::new(RemoteSourceExec::new(id, ExchangeMode::Broadcast, 1, schema))
    }

    /// A build side that only scans a small table, with nothing to cut below it:
    /// every task of the join's stage scans it itself (all its partitions, through the
    /// `CoalescePartitionsExec` above it). Reading a few megabytes once per task costs
    /// less than a stage of its own and a broadcast, which a query of tens of
    /// milliseconds pays as a whole phase.
    fn is_small_scan(&self, plan: &Arc<dyn ExecutionPlan>) -> bool {
        fn has_cut(plan: &Arc<dyn ExecutionPlan>) -> bool {
            is::<RepartitionExec>(plan)
                || is::<CoalescePartitionsExec>(plan)
                || is::<SortPreservingMergeExec>(plan)
                || is::<HashJoinExec>(plan)
                || is::<NestedLoopJoinExec>(plan)
                || is::<CrossJoinExec>(plan)
                || is::<RemoteSourceExec>(plan)
                || plan.children().into_iter().any(has_cut)
        }
        if !reads_tables(plan, self.connectors) || has_cut(plan) {
            return false;
        }
        use datafusion::physical_plan::{StatisticsArgs, StatisticsContext};
        let Ok(stats) = StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new()) else { return false };
        // Both limits where both are known: a narrow projection of a large table
        // estimates few bytes, yet every task would decode all its rows.
        match (stats.total_byte_size.get_value(), stats.num_rows.get_value()) {
            (Some(bytes), Some(rows)) => *bytes <= INLINE_BUILD_MAX_BYTES && *rows <= INLINE_BUILD_MAX_ROWS,
            (Some(bytes), None) => *bytes <= INLINE_BUILD_MAX_BYTES,
            (None, Some(rows)) => *rows <= INLINE_BUILD_MAX_ROWS,
            (None, None) => false,
        }
    }

    fn visit(&mut self, plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(rep) = as_::<RepartitionExec>(&plan) {
            if rep.preserve_order() {
                return not_impl_err!("order-preserving repartition cannot be distributed");
            }
            let input = self.visit(rep.input().clone())?;
            let input_partitions = input.output_partitioning().partition_count();
            let partitions = rep.partitioning().partition_count();
            let schema = plan.schema();
            let producer = replace_children(&plan, vec![input])?;
            let id = self.add(producer, FragmentOutput::Repartition { partitions }, input_partitions);
            let rs = RemoteSourceExec::new(id, ExchangeMode::Repartition, partitions, schema)
                .with_partitioning(rep.partitioning().clone());
            return Ok(Arc::new(rs));
        }
        if let Some(c) = as_::<CoalescePartitionsExec>(&plan) {
            let input = self.visit(c.input().clone())?;
            if input.output_partitioning().partition_count() <= 1 && !reads_tables(&input, self.connectors) {
                return replace_children(&plan, vec![input]);
            }
            let rs = self.broadcast(input);
            return replace_children(&plan, vec![rs]);
        }
        if let Some(spm) = as_::<SortPreservingMergeExec>(&plan) {
            let input = self.visit(spm.input().clone())?;
            let partitions = input.output_partitioning().partition_count();
            if partitions <= 1 && !reads_tables(&input, self.connectors) {
                return replace_children(&plan, vec![input]);
            }
            let (schema, partitioning) = (input.schema(), input.output_partitioning().clone());
            let id = self.add(input, FragmentOutput::Passthrough, partitions);
            let rs: Arc<dyn ExecutionPlan> = Arc::new(
                RemoteSourceExec::new(id, ExchangeMode::Passthrough, partitions, schema)
                    .with_partitioning(partitioning),
            );
            return replace_children(&plan, vec![rs]);
        }
        let collect_left =
            as_::<HashJoinExec>(&plan).map(|j| *j.partition_mode() == PartitionMode::CollectLeft).unwrap_or(false)
                || is::<NestedLoopJoinExec>(&plan)
                || is::<CrossJoinExec>(&plan);
        let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
        let mut new_children = Vec::with_capacity(children.len());
        for (i, child) in children.into_iter().enumerate() {
            let is_build = collect_left && i == 0;
            let was_coalesce = is::<CoalescePartitionsExec>(&child);
            if is_build && was_coalesce && self.is_small_scan(child.children()[0]) {
                new_children.push(child);
                continue;
            }
            let visited = self.visit(child)?;
            // Each task of this stage runs the build side itself; if that side reads an
            // exchange, tasks would compete for the same buffers, so broadcast it.
            let mut sources = BTreeSet::new();
            remote_sources(&visited, &mut sources);
            let needs_broadcast = is_build && !was_coalesce && !sources.is_empty() && !is::<RemoteSourceExec>(&visited);
            new_children.push(if needs_broadcast { self.broadcast(visited) } else { visited });
        }
        if new_children.is_empty() {
            return Ok(plan);
        }
        replace_children(&plan, new_children)
    }
}

/// `plan` over `children`, its properties computed anew.
pub(crate) fn replace_children(
    plan: &Arc<dyn ExecutionPlan>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    #[allow(deprecated)]
    plan.clone().with_new_children(children)
}
