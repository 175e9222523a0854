//! The planning phase of a query, from SQL text to a physical plan cut into fragments,
//! run apart from the coordinator's runtime and under limits. `QueryExecution` calls
//! [`plan`]; it owns nothing past the call.
//!
//! Why apart: parsing and planning are synchronous and recurse over expression trees.
//! On a tokio worker thread a statement of a few thousand terms overflows the 2 MiB
//! stack (aborting the coordinator), and a slow plan blocks the thread that serves
//! heartbeats and the statement protocol, so a DELETE of the query cannot be heard.
//! Here planning runs on a thread of its own with a large stack, expression depth is
//! bounded before any planning starts, and the caller waits for the thread only until
//! `query_max_planning_time` passes or the query is cancelled.

use crate::error_code::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use super::planner::{planning_error, QueryError};
use super::sql_parser::{ExplainFormat, ExplainType};
use super::table_commit::TableCommit;
use crate::connector::Connectors;
use crate::plan::fragmenter::FragmentedPlan;
use crate::security::{Access, AccessRules, Identity};

mod checks;
mod parse;
mod physical;
mod writes;

pub use checks::accesses;

/// Deepest expression nesting accepted (`a + b + ...` counts one level per operator).
/// DataFusion's optimizer is superlinear in depth: about 1,000 terms over a column
/// took a minute, so deeper statements are refused before planning starts.
pub const MAX_EXPRESSION_DEPTH: usize = 500;

/// Longest statement accepted, in bytes (Trino's `query.max-length` is in characters
/// and defaults to 1,000,000; long IN lists from tools need more).
pub const MAX_QUERY_LENGTH: usize = 16 << 20;

/// What planning produced.
pub enum Planned {
    /// Rows answered by planning alone: `EXPLAIN`, `DESCRIBE INPUT|OUTPUT`.
    Answer(datafusion::arrow::array::RecordBatch),
    /// A statement that did all it does while planned (`ALTER ... RENAME TO`,
    /// `COMMENT ON`), with its `updateType`.
    Done(&'static str),
    /// A plan to run; `fragments` is set when it reads tables (it needs workers);
    /// `write` when it writes a table (committed by its root, finished at the end).
    Query {
        physical: Arc<dyn ExecutionPlan>,
        fragments: Option<Arc<FragmentedPlan>>,
        analyze: bool,
        write: Option<Arc<TableCommit>>,
    },
}

/// Planning threads at once. A query waits (cancellably, within its planning time)
/// for one; an abandoned planning keeps its slot until its thread ends, so slow
/// statements cannot pile up threads that burn the coordinator's cores.
fn planning_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        tokio::sync::Semaphore::new(2 * cores + 2)
    })
}

/// Plans `sql` on a planning thread; gives up after `max_time`.
/// Access rules and who is asking: a statement's tables are checked before it runs.
#[derive(Clone)]
pub struct AccessCheck {
    pub rules: Arc<AccessRules>,
    pub who: Identity,
}

impl AccessCheck {
    pub fn check(&self, accesses: &[Access]) -> Result<(), QueryError> {
        self.rules.check(&self.who, accesses).map_err(|m| QueryError::new(ErrorCode::PermissionDenied, m))
    }
}

/// What a query is planned with besides its SQL.
pub struct PlanRequest {
    pub ctx: SessionContext,
    pub connectors: Connectors,
    pub access: Option<AccessCheck>,
    pub query_id: String,
    pub workers: usize,
    /// `single_task_max_rows`: see `cut`.
    pub single_task_max_rows: usize,
    /// `EXPLAIN` shows the dynamic filters the query would run with
    /// (`SessionProperties::runs_dynamic_filters`).
    pub dynamic_filtering: bool,
    /// The client is in an explicit transaction, where writes are refused (see
    /// `transaction`).
    pub in_transaction: bool,
    /// The session's user: the owner of the views it makes.
    pub user: String,
    /// Whether the statement is to run, or to be explained or described.
    pub purpose: Purpose,
}

/// What a statement is planned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Run,
    /// `EXPLAIN (TYPE ..., FORMAT ...)`: planned, never run.
    Explain(ExplainType, ExplainFormat),
    /// `DESCRIBE INPUT` of a prepared statement: its parameters.
    DescribeInput,
    /// `DESCRIBE OUTPUT` of a prepared statement: its columns.
    DescribeOutput,
    /// `SHOW STATS FOR`: the statistics of the query's plan.
    ShowStats,
}

impl PlanRequest {
    /// The session's catalog and schema: where unqualified names are.
    pub fn defaults(&self) -> (String, String) {
        // Read in place: a copy of the configuration would clone all of it.
        let state = self.ctx.state_ref();
        let state = state.read();
        let c = &state.config().options().catalog;
        (c.default_catalog.clone(), c.default_schema.clone())
    }
}

#[cfg(test)]
impl PlanRequest {
    /// A request of tests: the built-in catalogs, no access rules, every query cut into
    /// stages, dynamic filters on.
    pub(crate) fn for_tests(ctx: SessionContext, workers: usize) -> Self {
        PlanRequest {
            ctx,
            connectors: Connectors::benchmark(),
            access: None,
            query_id: "q".into(),
            workers,
            single_task_max_rows: 0,
            dynamic_filtering: true,
            in_transaction: false,
            user: "test".into(),
            purpose: Purpose::Run,
        }
    }
}

pub async fn plan(request: PlanRequest, sql: String, max_time: Duration) -> Result<Planned, QueryError> {
    let (connectors, text) = (request.connectors.clone(), sql.clone());
    let planning = async move {
        let slot = planning_slots()
            .acquire()
            .await
            .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
        let thread = crate::runtime::spawn_with_big_stack("flotilla-planner", move |abandoned| {
            let _slot = slot;
            // Planning threads are reused (see `spawn_with_big_stack`), and so is each
            // one's runtime.
            thread_local! {
                static RUNTIME: std::cell::OnceCell<tokio::runtime::Runtime> = const { std::cell::OnceCell::new() };
            }
            RUNTIME.with(|cell| {
                let rt = match cell.get() {
                    Some(rt) => rt,
                    None => {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
                        cell.get_or_init(|| rt)
                    }
                };
                // Constants folded while planning share one budget (`functions::bounded`).
                crate::functions::bounded::while_planning(|| rt.block_on(plan_here(&request, &sql, abandoned)))
            })
        });
        Ok::<_, QueryError>(thread.await)
    };
    match tokio::time::timeout(max_time, planning).await {
        Ok(Err(e)) => Err(e),
        Ok(Ok(thread)) => match thread {
            Err(_) => Err(QueryError::new(ErrorCode::GenericInternalError, "the planning thread could not be started")),
            Ok(Err(panic)) => {
                let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                // The Parquet reader panics on some corrupt footers: name the file.
                match connectors.find_corrupt_parquet(&text) {
                    Some(corrupt) => Err(QueryError::new(ErrorCode::CorruptFile, corrupt)),
                    None => Err(QueryError::new(ErrorCode::GenericInternalError, format!("planning failed unexpectedly: {what}"))),
                }
            }
            Ok(Ok(planned)) => planned,
        },
        Err(_) => Err(QueryError::new(
            ErrorCode::ExceededTimeLimit,
            format!("Query exceeded the maximum planning time limit of {max_time:?} (session property query_max_planning_time)"),
        )),
    }
}

/// Plans the statement for its purpose: parse, check, then the plan of its kind.
async fn plan_here(request: &PlanRequest, sql: &str, abandoned: &dyn Fn() -> bool) -> Result<Planned, QueryError> {
    let started = std::time::Instant::now();
    // One state for the whole planning: a clone copies the function registry too.
    let state = request.ctx.state();
    let mut parsed = parse::parse(request, &state, sql)?;
    super::stars::expand(&state, &mut parsed.statement).await?;
    if let Some(relation) = super::relations::parse(&parsed.statement) {
        return plan_relation(request, relation?, abandoned).await;
    }
    // DataFusion plans no MERGE: it is planned as the query of the rows it leaves.
    let normalize = state.config().options().sql_parser.enable_ident_normalization;
    let merge = super::merge::plan(&state, &parsed.statement, normalize).await?;
    let is_merge = merge.is_some();
    let logical = match merge {
        Some(logical) => logical,
        None => state.statement_to_plan(parsed.statement).await.map_err(|e| planning_error(&e))?,
    };
    checks::check(request, &logical, parsed.create.any())?;
    match request.purpose {
        Purpose::Run => {}
        Purpose::Explain(kind, format) => {
            return physical::explain(request, &state, &logical, kind, format).await.map(Planned::Answer)
        }
        Purpose::DescribeInput => return super::describe::input(&logical).map(Planned::Answer),
        Purpose::ShowStats => {
            let physical = state.create_physical_plan(&logical).await.map_err(|e| planning_error(&e))?;
            return super::show_stats::answer(&physical).map(Planned::Answer);
        }
        Purpose::DescribeOutput => {
            let (catalog, schema) = request.defaults();
            return super::describe::output(&logical, (&catalog, &schema)).map(Planned::Answer);
        }
    }
    // EXPLAIN ANALYZE runs the statement, discards its rows and reports the stages.
    let (logical, analyze) = match logical {
        LogicalPlan::Analyze(a) => (a.input.as_ref().clone(), true),
        other => (other, false),
    };
    // DDL (CREATE EXTERNAL TABLE) takes effect here: not for a query already given up.
    if abandoned() {
        return Err(QueryError::new(ErrorCode::UserCanceled, "planning was abandoned"));
    }
    if let Some(planned) = writes::plan_write(request, &logical, parsed.create, analyze, is_merge).await? {
        return Ok(planned);
    }
    let definition = physical::run_definition(request, &logical, parsed.view_clauses).await?;
    physical::plan_query(request, &state, &logical, definition, analyze, started).await
}

/// `ALTER ... RENAME` and `COMMENT ON`, done while planned (`relations`).
async fn plan_relation(
    request: &PlanRequest,
    relation: super::relations::RelationStatement,
    abandoned: &dyn Fn() -> bool,
) -> Result<Planned, QueryError> {
    if request.purpose != Purpose::Run {
        let m = "EXPLAIN and DESCRIBE take a query or a write, not ALTER or COMMENT";
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    if request.in_transaction {
        return Err(QueryError::new(ErrorCode::NotSupported, checks::WRITES_IN_TRANSACTION));
    }
    if abandoned() {
        return Err(QueryError::new(ErrorCode::UserCanceled, "planning was abandoned"));
    }
    let (catalog, schema) = request.defaults();
    let (ctx, connectors, access) = (&request.ctx, &request.connectors, request.access.as_ref());
    let scope = super::relations::Scope { ctx, connectors, catalog: &catalog, schema: &schema, access };
    super::relations::run(&relation, &scope).await.map(Planned::Done)
}

#[cfg(test)]
#[path = "../cut_tests.rs"]
mod cut_tests;
#[cfg(test)]
#[path = "../plan_snapshots.rs"]
mod plan_snapshots;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SessionProperties;
    use crate::coordinator::planner::{session_context, SessionSpec};
    use crate::scheduling::pipelined::task_count;

    fn request(ctx: SessionContext) -> PlanRequest {
        PlanRequest::for_tests(ctx, 1)
    }

    fn chain(n: usize) -> String {
        format!("SELECT {}", vec!["1"; n].join(" + "))
    }

    #[tokio::test]
    async fn shallow_statements_plan() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        let planned = plan(request(ctx), chain(100), Duration::from_secs(60)).await;
        assert!(matches!(planned, Ok(Planned::Query { fragments: None, .. })));
    }

    #[tokio::test]
    async fn deep_statements_are_refused_not_crashed() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        let e = plan(request(ctx), chain(10_000), Duration::from_secs(60)).await.err().expect("refused");
        assert_eq!(e.error_name, "SYNTAX_ERROR", "{e:?}");
        assert!(e.message.contains("limit of 500"), "{}", e.message);
    }

    /// Under `single_task_max_rows` the whole plan is one worker stage of one task, its
    /// repartitions kept inside; over it (or at 0) the plan is cut into stages.
    #[tokio::test]
    async fn small_queries_run_as_one_task_and_larger_ones_are_cut() {
        use crate::plan::fragmenter::remote_sources;
        use datafusion::physical_plan::repartition::RepartitionExec;
        fn repartitions(p: &Arc<dyn ExecutionPlan>) -> usize {
            usize::from((p.as_ref() as &dyn std::any::Any).is::<RepartitionExec>())
                + p.children().into_iter().map(repartitions).sum::<usize>()
        }
        // tiny: 1,500 customers and 15,000 orders are read.
        let sql = "SELECT c_mktsegment, count(*) FROM customer JOIN orders ON c_custkey = o_custkey \
                   GROUP BY c_mktsegment";
        let planned = |max: usize| async move {
            let ctx =
                session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
            let r = PlanRequest { single_task_max_rows: max, ..request(ctx) };
            match plan(r, sql.to_string(), Duration::from_secs(60)).await {
                Ok(Planned::Query { fragments: Some(f), .. }) => f,
                _ => panic!("a distributed plan"),
            }
        };
        let one = planned(16_500).await;
        assert_eq!(one.fragments.len(), 2, "the root and one worker stage");
        let stage = &one.fragments[1];
        assert_eq!((stage.partitions, task_count(stage, 3)), (1, 1), "one partition, one task");
        assert!(stage.has_scan && stage.inputs.is_empty());
        let mut sources = std::collections::BTreeSet::new();
        remote_sources(&stage.plan, &mut sources);
        assert!(sources.is_empty(), "no exchange inside: {sources:?}");
        assert!(repartitions(&stage.plan) > 0, "the single-node plan's repartitions stay in the task");
        // One row more than the limit, or the limit 0: stages and exchanges.
        for max in [16_499, 0] {
            let cut = planned(max).await;
            assert!(cut.fragments.len() > 2, "limit {max}: {} fragments", cut.fragments.len());
            assert!(cut.fragments.iter().all(|f| repartitions(&f.plan) <= 1), "limit {max}: cut at every repartition");
        }
    }

    #[tokio::test]
    async fn small_build_scans_are_read_by_each_task_instead_of_broadcast() {
        use crate::plan::fragmenter::FragmentOutput;
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        // tiny: 100 suppliers, the build side; 80,000 partsupp rows, the probe side.
        let sql = "SELECT s_name, ps_availqty FROM supplier JOIN partsupp ON s_suppkey = ps_suppkey".to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let outputs: Vec<FragmentOutput> = f.fragments.iter().map(|fr| fr.output).collect();
        assert_eq!(outputs.len(), 2, "the root and one stage that scans both tables: {outputs:?}");
        assert!(f.fragments[1].inputs.is_empty() && f.fragments[1].has_scan, "{:?}", f.fragments[1].inputs);
        // At 0B the join repartitions both sides: the supplier scan is a stage again.
        let props = SessionProperties { join_max_broadcast_table_size: 0, ..Default::default() };
        let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
        let sql = "SELECT s_name, ps_availqty FROM supplier JOIN partsupp ON s_suppkey = ps_suppkey".to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        assert!(f.fragments.len() > 2, "{:?}", f.fragments.iter().map(|fr| fr.output).collect::<Vec<_>>());
    }

    /// A broadcast join's stage waits for its build; the stages feeding its probe side
    /// do not (they fill their buffers meanwhile). A partitioned join's probe-side
    /// producers wait for its build when they gather state (see
    /// `partitioned_probe_stages_wait_only_when_they_gather_state`).
    #[tokio::test]
    async fn only_the_stage_of_a_broadcast_join_waits_for_its_build() {
        use crate::plan::DependencyKind::{BroadcastJoinBuild, PartitionedJoinBuild};
        let sql = include_str!("../../../queries/tpch/q11.sql").trim().trim_end_matches(';').to_string();
        // DataFusion's join order: `early_filter_rewrites` joins `nation` with
        // `supplier` first, and that small join is then broadcast too.
        let datafusion_order = SessionProperties { early_filter_rewrites: false, ..Default::default() };
        let ctx = session_context(&SessionSpec::default(), &datafusion_order, 2, &Connectors::benchmark());
        let Ok(Planned::Query { fragments: Some(f), .. }) =
            plan(request(ctx), sql.clone(), Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let deps = f.dependencies();
        // q11's scalar subquery is the build of a join whose probe side is another
        // stage's aggregation.
        let (build, join) = deps.iter().find(|d| d.2 == BroadcastJoinBuild).map(|d| (d.0, d.1)).expect("{deps:?}");
        let probe: Vec<usize> = f.fragments[join].inputs.iter().copied().filter(|i| *i != build).collect();
        assert!(!probe.is_empty(), "the join reads its probe side from a stage: {deps:?}");
        assert!(deps.iter().all(|d| d.2 != PartitionedJoinBuild || !probe.contains(&d.1)), "{deps:?}");
        let props = SessionProperties { join_max_broadcast_table_size: 0, ..datafusion_order };
        let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        assert!(f.dependencies().iter().any(|d| d.2 == PartitionedJoinBuild), "{:?}", f.dependencies());
    }

    /// With every join partitioned, the stages feeding a join's probe side wait for its
    /// build only when they gather state; a stage that only scans and repartitions
    /// (q22's `orders`) starts at once. Both kinds occur over these queries.
    #[tokio::test]
    async fn partitioned_probe_stages_wait_only_when_they_gather_state() {
        use crate::plan::fragmenter::{remote_sources, streams_only};
        use crate::plan::DependencyKind::PartitionedJoinBuild;
        // DataFusion's join orders: under `early_filter_rewrites` (q11 joins `nation`
        // with `supplier` first) no probe-side stage of these queries gathers state.
        let props =
            SessionProperties { join_max_broadcast_table_size: 0, early_filter_rewrites: false, ..Default::default() };
        let (mut waiting, mut streaming_probes) = (0, 0);
        for q in [include_str!("../../../queries/tpch/q11.sql"), include_str!("../../../queries/tpch/q22.sql")] {
            let sql = q.trim().trim_end_matches(';').to_string();
            let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
            let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
            else {
                panic!("a distributed plan")
            };
            let deps = f.dependencies();
            for (_, probe, kind) in &deps {
                if *kind == PartitionedJoinBuild {
                    assert!(!streams_only(&f.fragments[*probe].plan), "fragment {probe} streams but waits: {deps:?}");
                    waiting += 1;
                }
            }
            // Stages that only stream and feed a partitioned join's probe side.
            for join in &f.fragments {
                let Some(hj) = find_partitioned_join(&join.plan) else { continue };
                let mut probe = std::collections::BTreeSet::new();
                remote_sources(hj.right(), &mut probe);
                for p in probe.into_iter().filter(|p| streams_only(&f.fragments[*p].plan)) {
                    assert!(deps.iter().all(|d| d.1 != p), "fragment {p} only streams but waits: {deps:?}");
                    streaming_probes += 1;
                }
            }
        }
        assert!(waiting > 0 && streaming_probes > 0, "{waiting} waiting, {streaming_probes} streaming probe stages");
    }

    /// A join whose probe side is an aggregation already partitioned on the join key
    /// (DataFusion alone builds on all of `orders` in every task): the build side is
    /// repartitioned on its key, not broadcast.
    #[tokio::test]
    async fn a_join_over_a_partitioned_probe_side_repartitions_its_build_side() {
        use crate::plan::fragmenter::FragmentOutput;
        use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
        fn join(p: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
            match (p.as_ref() as &dyn std::any::Any).downcast_ref::<HashJoinExec>() {
                Some(j) => Some(j),
                _ => p.children().into_iter().find_map(join),
            }
        }
        let spec = SessionSpec { schema: "sf0_1".into(), ..Default::default() };
        let ctx = session_context(&spec, &SessionProperties::default(), 4, &Connectors::benchmark());
        let sql = "SELECT o_orderpriority, sum(q) FROM orders JOIN \
                   (SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_orderkey) ON o_orderkey = l_orderkey \
                   GROUP BY o_orderpriority"
            .to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let join = f.fragments.iter().find_map(|fr| join(&fr.plan)).expect("a join");
        assert_eq!(*join.partition_mode(), PartitionMode::Partitioned);
        let mut build = std::collections::BTreeSet::new();
        crate::plan::fragmenter::remote_sources(join.left(), &mut build);
        let outputs: Vec<_> = build.iter().map(|s| f.fragments[*s].output).collect();
        assert!(
            !outputs.is_empty() && outputs.iter().all(|o| matches!(o, FragmentOutput::Repartition { .. })),
            "the build side comes through {outputs:?}"
        );
    }

    fn find_partitioned_join(
        plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> Option<&datafusion::physical_plan::joins::HashJoinExec> {
        use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
        match (plan.as_ref() as &dyn std::any::Any).downcast_ref::<HashJoinExec>() {
            Some(j) if *j.partition_mode() == PartitionMode::Partitioned => Some(j),
            _ => plan.children().into_iter().find_map(find_partitioned_join),
        }
    }

    #[tokio::test]
    async fn nested_parentheses_are_a_syntax_error() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        let sql = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        let e = plan(request(ctx), sql, Duration::from_secs(60)).await.err().expect("refused");
        assert_eq!(e.error_name, "SYNTAX_ERROR", "{e:?}");
    }
}
