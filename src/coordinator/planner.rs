//! The coordinator's planner: a DataFusion `SessionContext` per query, configured for
//! plans that will be cut (no dynamic filters, no round-robin repartitions), with the
//! `tpch` catalog registered and, unless `early_filter_rewrites` is off, three logical
//! rules of ours (`plan::join_order`, `plan::semi_join`, `plan::semi_join_reduction`).
//! Also turns planning errors into the user-facing `QueryError` with Trino's error
//! names.

use std::collections::BTreeMap;

use std::sync::Arc;

use datafusion::catalog::{CatalogProviderList, MemoryCatalogProviderList};
use datafusion::config::TableOptions;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateDefaults;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::config::SessionProperties;
use crate::connector::tpch::{TpchCatalog, TpchSpelling, TPCH_CATALOG_NAME};
use crate::connector::Connectors;
use crate::error_code::ErrorCode;
use crate::plan::join_order::JoinFilteredScanEarly;
use crate::plan::semi_join::PushDownSemiJoin;
use crate::plan::semi_join_reduction::SemiJoinReduction;

pub use crate::error_code::QueryError;

/// Classifies a DataFusion error raised while planning.
pub fn planning_error(e: &DataFusionError) -> QueryError {
    let root = e.find_root();
    let message = match root {
        // The location is in the context DataFusion wrapped around the store's error.
        DataFusionError::ObjectStore(_) => e.to_string(),
        _ => root.to_string(),
    };
    let lower = message.to_lowercase();
    let arithmetic = crate::plan::checked_arithmetic::arithmetic_error_code(e);
    let code = match root {
        _ if arithmetic.is_some() => arithmetic.unwrap_or(ErrorCode::ExecutionError),
        DataFusionError::SQL(..) => ErrorCode::SyntaxError,
        DataFusionError::NotImplemented(_) => ErrorCode::NotSupported,
        DataFusionError::Plan(_) | DataFusionError::SchemaError(..) => {
            if lower.contains("table")
                && (lower.contains("not found") || lower.contains("doesn't exist") || lower.contains("does not exist"))
            {
                ErrorCode::TableNotFound
            } else {
                ErrorCode::GenericUserError
            }
        }
        DataFusionError::Execution(_) | DataFusionError::ArrowError(..) => ErrorCode::ExecutionError,
        DataFusionError::External(_) if crate::connector::postgresql::PostgresError::is(e) => ErrorCode::JdbcError,
        DataFusionError::ObjectStore(_) if crate::connector::local_files::is_refused_path(e) => {
            ErrorCode::PermissionDenied
        }
        DataFusionError::ObjectStore(_) => ErrorCode::ObjectStoreError,
        _ => ErrorCode::GenericInternalError,
    };
    QueryError::new(code, strip_prefixes(&message))
}

/// DataFusion prefixes messages with its error kind ("Error during planning: ..."),
/// which says nothing to a SQL user.
fn strip_prefixes(message: &str) -> String {
    let mut m = message.trim();
    for p in [
        "Error during planning: ",
        "SQL error: ",
        "This feature is not implemented: ",
        "Execution error: ",
        "Schema error: ",
    ] {
        if let Some(rest) = m.strip_prefix(p) {
            m = rest;
        }
    }
    m.to_string()
}

/// What the client chose for this query.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    pub user: String,
    pub catalog: String,
    pub schema: String,
    pub properties: BTreeMap<String, String>,
    /// The open transaction the client named (`X-Trino-Transaction-Id`), if any.
    pub transaction: Option<String>,
    /// The session's time zone (`X-Trino-Time-Zone`): where a time without a zone is.
    pub time_zone: Option<String>,
    /// The client's prepared statements by name (`X-Trino-Prepared-Statement`).
    pub prepared: BTreeMap<String, String>,
}

impl Default for SessionSpec {
    fn default() -> Self {
        SessionSpec {
            user: "flotilla".into(),
            catalog: "tpch".into(),
            schema: "tiny".into(),
            properties: BTreeMap::new(),
            transaction: None,
            time_zone: None,
            prepared: BTreeMap::new(),
        }
    }
}

/// A planning context whose `target_partitions` is the query's partition count, with
/// the coordinator's catalogs.
pub fn session_context(
    spec: &SessionSpec,
    props: &SessionProperties,
    partitions: usize,
    connectors: &Connectors,
) -> SessionContext {
    // The catalog brings Trino's information_schema; DataFusion's would shadow it.
    let mut config = SessionConfig::new()
        .with_target_partitions(partitions.max(1))
        .with_information_schema(false)
        .with_create_default_catalog_and_schema(true)
        .with_default_catalog_and_schema(&spec.catalog, &spec.schema)
        .with_round_robin_repartition(false);
    if let Some(bs) = props.batch_size {
        config = config.with_batch_size(bs);
    }
    let opts = config.options_mut();
    // The session's zone, for `TIMESTAMP WITH TIME ZONE` types and Trino's functions
    // that read it (the dialect passes it to them, `coordinator::dialect`).
    // `SET TIME ZONE` (the `time_zone_id` property) overrides the client's header.
    opts.execution.time_zone = props.time_zone_id.clone().or_else(|| spec.time_zone.clone());
    // Dynamic filters are state shared between operators in one process. A hash
    // join's reaches the scans of its probe side: within a fragment they share it on
    // the worker too (the codec keeps one filter one object, and each task runs the
    // join over its own partitions, see `plan::partition_subset`); a scan cut off into
    // another fragment keeps a filter nobody fills, which passes every row. The other
    // kinds would cross cuts the same way for less, and stay off.
    opts.optimizer.enable_dynamic_filter_pushdown = false;
    opts.optimizer.enable_join_dynamic_filter_pushdown = props.enable_dynamic_filtering;
    opts.optimizer.enable_topk_dynamic_filter_pushdown = false;
    opts.optimizer.enable_aggregate_dynamic_filter_pushdown = false;
    opts.execution.parquet.pushdown_filters = false;
    opts.execution.enable_file_stream_work_stealing = false;
    // An uncorrelated scalar subquery would run as a `ScalarSubqueryExec` whose
    // results reach expressions below it through shared memory, which a cut between
    // them breaks; as a join it is just another (broadcast) input.
    opts.optimizer.enable_physical_uncorrelated_scalar_subquery = false;
    // A hash join's build side cannot spill (DataFusion 55); a sort-merge join's
    // sorts can.
    opts.optimizer.prefer_hash_join = !props.spill_enabled;
    // Across processes a repartitioned row costs an encode, a copy through the kernel
    // and a decode, where in one process DataFusion moves it for free; a build side
    // far smaller than its probe side is cheaper sent whole to every task. DataFusion
    // uses the row limit only where a plan has no byte estimate (the `tpch` catalog
    // gives rows only); 128 bytes a row errs on the side of a TPC-H row in memory.
    let broadcast = props.join_max_broadcast_table_size as usize;
    opts.optimizer.hash_join_single_partition_threshold = broadcast;
    opts.optimizer.hash_join_single_partition_threshold_rows = broadcast / 128;
    // What `SessionStateBuilder::build` would do with this configuration, on a copy of
    // a state whose functions are already registered.
    let mut state = connectors.session_template();
    *state.table_options_mut() = TableOptions::default_from_session_config(config.options());
    *state.config_mut() = config;
    let catalogs: Arc<dyn CatalogProviderList> = Arc::new(MemoryCatalogProviderList::new());
    let default = SessionStateDefaults::default_catalog(state.config(), state.table_factories(), state.runtime_env());
    catalogs.register_catalog(state.config().options().catalog.default_catalog.clone(), Arc::new(default));
    state.register_catalog_list(catalogs);
    let ctx = SessionContext::new_with_state(state);
    // Trino's integer arithmetic: overflow is an error (`plan::checked_arithmetic`).
    crate::plan::checked_arithmetic::register(&ctx);
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::checked_arithmetic::CheckedArithmetic)));
    // Trino's casts to and from JSON and of rows by position (`plan::casts`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::casts::TrinoCasts)));
    // `EXCEPT ALL` and `INTERSECT ALL` count copies (`plan::set_operations`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::set_operations::CountedSetOperations)));
    // `FETCH FIRST n ROWS WITH TIES` by rank (`plan::fetch_ties`); before the
    // subquery rules, which then push it into a correlated subquery as a window.
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::fetch_ties::FetchWithTies)));
    // A subquery in an aggregate's argument or `FILTER`, computed under the
    // aggregation where the rules below take it (`plan::subquery_arguments`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::subquery_arguments::SubqueryArguments)));
    // A scalar subquery of any shape, with Trino's `SUBQUERY_MULTIPLE_ROWS`
    // (`plan::scalar_subqueries`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::scalar_subqueries::ScalarSubqueries)));
    // `LATERAL` and `CROSS JOIN UNNEST` over the left side's columns
    // (`plan::lateral_joins`); first, so that a subquery over a lateral join's rows
    // finds a plain join, whose rows its domain is made of.
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::lateral_joins::LateralJoins)));
    // Subqueries correlated on any predicate, through their outer values' domain
    // (`plan::correlated_domains`); before the marks, which then take them too.
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::correlated_domains::CorrelatedDomains)));
    // `EXISTS` and `IN (subquery)` outside filters, and `IN` inside a filter's
    // expressions, as mark joins with SQL's NULLs (`plan::subquery_marks`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::subquery_marks::SubqueryMarks)));
    // `min` and `max` of floats skip NaN (`plan::nan_extremes`).
    ctx.add_analyzer_rule(Arc::new(Timed(crate::plan::nan_extremes::NanSkippingExtremes)));
    if props.early_filter_rewrites {
        ctx.add_optimizer_rule(Arc::new(JoinFilteredScanEarly));
        ctx.add_optimizer_rule(Arc::new(PushDownSemiJoin));
        ctx.add_optimizer_rule(Arc::new(SemiJoinReduction));
    }
    connectors.register(&ctx);
    ctx
}

/// The same context for single-node DataFusion: the oracle of the tests and the
/// baseline of the benchmark, over the same generated data, `tpch` spelled as the
/// benchmark does (`TpchSpelling::BENCHMARK`).
pub fn single_node_context(schema: &str, partitions: usize) -> SessionContext {
    single_node_context_with(schema, partitions, Arc::new(Default::default()))
}

/// The same over `runtime` (the benchmark's memory-limited one).
pub fn single_node_context_with(
    schema: &str,
    partitions: usize,
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
) -> SessionContext {
    single_node_context_in("tpch", schema, partitions, runtime)
}

/// The same with `catalog` (`tpch` or `tpcds`) as the default catalog.
pub fn single_node_context_in(
    catalog: &str,
    schema: &str,
    partitions: usize,
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
) -> SessionContext {
    let spec = SessionSpec { catalog: catalog.to_string(), schema: schema.to_string(), ..Default::default() };
    let config = SessionConfig::new()
        .with_target_partitions(partitions.max(1))
        .with_information_schema(true)
        .with_default_catalog_and_schema(&spec.catalog, &spec.schema);
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    ctx.register_catalog(TPCH_CATALOG_NAME, Arc::new(TpchCatalog::new(TpchSpelling::BENCHMARK)));
    ctx.register_catalog(
        crate::connector::tpcds::TPCDS_CATALOG_NAME,
        Arc::new(crate::connector::tpcds::TpcdsCatalog::new(())),
    );
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_sql_is_a_syntax_error() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        let e = ctx.sql("SELEC 1").await.unwrap_err();
        let q = planning_error(&e);
        assert_eq!(q.error_name, "SYNTAX_ERROR");
        assert_eq!(q.error_type, crate::error_code::ErrorType::UserError);
    }

    #[tokio::test]
    async fn small_build_sides_are_broadcast_up_to_the_session_limit() {
        let sql = "SELECT c_name, o_totalprice FROM customer JOIN orders ON c_custkey = o_custkey";
        let plan = |props: SessionProperties| async move {
            let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
            let df = ctx.sql(sql).await.unwrap();
            let plan = df.create_physical_plan().await.unwrap();
            let text = datafusion::physical_plan::displayable(plan.as_ref()).indent(false).to_string();
            text
        };
        // tiny: 1,500 customers and 15,000 orders, far under 100MB.
        let broadcast = plan(SessionProperties::default()).await;
        assert!(broadcast.contains("mode=CollectLeft"), "{broadcast}");
        let none = SessionProperties { join_max_broadcast_table_size: 0, ..Default::default() };
        let partitioned = plan(none).await;
        assert!(partitioned.contains("mode=Partitioned"), "{partitioned}");
    }

    #[tokio::test]
    async fn early_filter_rewrites_turn_off_with_their_session_property() {
        // TPC-H q17 over tpch.tiny: with the rewrites its subquery aggregates only the
        // line items of filtered parts (the semi join with `part` below the aggregate).
        let sql = "SELECT sum(l_extendedprice) FROM lineitem, part WHERE p_partkey = l_partkey
            AND p_brand = 'Brand#23' AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem
            WHERE l_partkey = p_partkey)";
        let semi_joins = |props: SessionProperties| async move {
            let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::benchmark());
            let plan = ctx.sql(sql).await.unwrap().into_optimized_plan().unwrap();
            let text = plan.display_indent().to_string();
            text.matches("LeftSemi Join").count()
        };
        let on = semi_joins(SessionProperties::default()).await;
        let off = semi_joins(SessionProperties { early_filter_rewrites: false, ..Default::default() }).await;
        assert_eq!((on, off), (2, 1));
    }

    #[tokio::test]
    async fn unknown_tables_are_named() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::benchmark());
        let e = ctx.sql("SELECT * FROM no_such_table").await.unwrap_err();
        let q = planning_error(&e);
        assert_eq!(q.error_name, "TABLE_NOT_FOUND", "{q:?}");
        assert!(q.message.contains("no_such_table"), "{}", q.message);
    }
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod rewrite_tests;

/// An analyzer rule of ours, timed: each run is a trace event with the rule's name and
/// its microseconds, so that what the rules add to a plan's time can be read off a
/// run (`FLOTILLA_LOG=flotilla::coordinator::planner=trace`; docs/benchmarks.md).
#[derive(Debug)]
struct Timed<R>(R);

impl<R: datafusion::optimizer::AnalyzerRule> datafusion::optimizer::AnalyzerRule for Timed<R> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn analyze(
        &self,
        plan: datafusion::logical_expr::LogicalPlan,
        config: &datafusion::config::ConfigOptions,
    ) -> datafusion::error::Result<datafusion::logical_expr::LogicalPlan> {
        let started = std::time::Instant::now();
        let analyzed = self.0.analyze(plan, config);
        tracing::trace!(rule = self.0.name(), us = started.elapsed().as_micros() as u64, "analyzer rule");
        analyzed
    }
}
