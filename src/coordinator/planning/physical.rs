//! The plan of a query or a definition (DDL): a definition takes effect here (its
//! metastore entries with it), a query's physical plan is made and cut into stages;
//! and `EXPLAIN`'s answer from the same plans. Called by `planning::plan_here`.

use std::sync::Arc;

use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use super::{PlanRequest, Planned};
use crate::connector::Connectors;
use crate::coordinator::planner::{planning_error, QueryError};
use crate::coordinator::relations::ViewClauses;
use crate::coordinator::sql_parser::{ExplainFormat, ExplainType};
use crate::plan::distribute::prepare_for_distribution;
use crate::plan::fragmenter::{fragment_plan, reads_tables, scanned_rows, single_task_plan, FragmentedPlan};
use crate::scheduling::pipelined::task_count;

/// A definition takes effect (`ddl`), with the locks and metastore entries it needs.
pub(super) async fn run_definition(
    request: &PlanRequest,
    logical: &LogicalPlan,
    view_clauses: Option<ViewClauses>,
) -> Result<Option<datafusion::dataframe::DataFrame>, QueryError> {
    let (ctx, connectors) = (&request.ctx, &request.connectors);
    let (catalog, schema) = request.defaults();
    let written = view_clauses.as_ref().filter(|c| c.security_written).map(|c| c.security.as_str());
    crate::coordinator::views::check_new_view(logical, connectors, written, (&catalog, &schema))?;
    // A statement that drops or replaces tables takes turns with their writes' commits.
    let removed = crate::coordinator::ddl::removed_tables(logical, ctx, &catalog, &schema);
    let _tables = crate::coordinator::table_locks::lock(removed).await;
    let pending = crate::coordinator::ddl::before(logical, connectors, &catalog, &schema);
    // A query plans on the request's state; DataFusion's `execute_logical_plan` (which
    // runs DDL) would clone the state, function registry and all, once more.
    let df = match logical {
        LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) => {
            Some(ctx.execute_logical_plan(logical.clone()).await.map_err(|e| planning_error(&e))?)
        }
        _ => None,
    };
    let view = view_clauses.map(|clauses| crate::coordinator::ddl::NewView { clauses, owner: request.user.clone() });
    crate::coordinator::ddl::after(ctx, logical, pending, connectors, (&catalog, &schema), view).await?;
    if matches!(logical, LogicalPlan::Ddl(_)) {
        crate::coordinator::ddl::rebind_views(connectors).await;
    }
    Ok(df)
}

/// The physical plan of a query (or of a definition DataFusion ran), cut into
/// stages when it reads tables. `started`: when planning began, for the log.
pub(super) async fn plan_query(
    request: &PlanRequest,
    state: &datafusion::execution::SessionState,
    logical: &LogicalPlan,
    definition: Option<datafusion::dataframe::DataFrame>,
    analyze: bool,
    started: std::time::Instant,
) -> Result<Planned, QueryError> {
    let (ctx, connectors) = (&request.ctx, &request.connectors);
    let logical_done = started.elapsed();
    // An uncorrelated scalar subquery is a join like any other input: it answers one
    // row, checked (`plan::scalar_subqueries`).
    let planned = match definition {
        Some(df) => df.create_physical_plan().await,
        None => state.create_physical_plan(logical).await,
    };
    let (physical, in_one_task) = match planned {
        Ok(physical) => (physical, false),
        Err(e) if needs_scalar_subquery_exec(&e) => (with_scalar_subqueries(ctx, logical).await?, true),
        Err(e) => return Err(planning_error(&e)),
    };
    let physical_done = started.elapsed();
    let fragments = match reads_tables(&physical, connectors) {
        true if in_one_task => {
            Some(Arc::new(single_task_plan(physical.clone(), connectors).map_err(|e| planning_error(&e))?))
        }
        true => Some(Arc::new(cut(physical.clone(), ctx, connectors, request.single_task_max_rows)?)),
        false => None,
    };
    tracing::debug!(
        query = %request.query_id,
        parsed_and_logical_us = logical_done.as_micros() as u64,
        optimized_and_physical_us = (physical_done - logical_done).as_micros() as u64,
        distributed_and_cut_us = (started.elapsed() - physical_done).as_micros() as u64,
        "planned"
    );
    Ok(Planned::Query { physical, fragments, analyze, write: None })
}

/// `EXPLAIN`'s answer for the statement planned as `logical`.
pub(super) async fn explain(
    request: &PlanRequest,
    state: &datafusion::execution::SessionState,
    logical: &LogicalPlan,
    kind: ExplainType,
    format: ExplainFormat,
) -> Result<datafusion::arrow::array::RecordBatch, QueryError> {
    let (ctx, connectors) = (&request.ctx, &request.connectors);
    let physical = state.create_physical_plan(logical).await.map_err(|e| planning_error(&e))?;
    let fragments = match reads_tables(&physical, connectors) && kind != ExplainType::Validate {
        true => Some(cut(physical.clone(), ctx, connectors, request.single_task_max_rows)?),
        false => None,
    };
    let distributed_text = fragments.as_ref().map(|f| {
        let filters = match request.dynamic_filtering {
            true => crate::plan::dynamic_filter::dynamic_filters(f),
            false => Vec::new(),
        };
        crate::plan::explain::explain(f, &|f| task_count(f, request.workers), &filters)
    });
    let (catalog, schema) = request.defaults();
    let plans = crate::coordinator::explain::Plans {
        logical,
        physical,
        fragments,
        distributed_text,
        defaults: (&catalog, &schema),
    };
    crate::coordinator::explain::answer(kind, format, plans)
}

/// Whether DataFusion could not plan an uncorrelated scalar subquery as a join (in
/// ORDER BY, an aggregate's argument, a join's ON: `session_context` turns its
/// physical subqueries off).
fn needs_scalar_subquery_exec(e: &datafusion::error::DataFusionError) -> bool {
    matches!(e.find_root(), datafusion::error::DataFusionError::NotImplemented(m) if m.contains("ScalarSubquery"))
}

/// The plan with DataFusion's physical scalar subqueries (`ScalarSubqueryExec`):
/// their results reach the expressions that read them through the memory of one
/// process, so the plan runs whole, as one task.
async fn with_scalar_subqueries(
    ctx: &SessionContext,
    logical: &LogicalPlan,
) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    let mut state = ctx.state();
    state.config_mut().options_mut().optimizer.enable_physical_uncorrelated_scalar_subquery = true;
    state.create_physical_plan(logical).await.map_err(|e| planning_error(&e))
}

/// Cuts the plan into stages; one whose scans read at most `single_task_max_rows` (by
/// the tables' statistics) becomes a single worker stage run by one task instead, the
/// whole single-node plan with its repartitions inside that task's process: for a query
/// of tens of milliseconds, the stages, tasks and exchanges of a distributed plan cost
/// more than they save.
pub(super) fn cut(
    physical: Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
    connectors: &Connectors,
    single_task_max_rows: usize,
) -> Result<FragmentedPlan, QueryError> {
    if single_task_max_rows > 0 && scanned_rows(&physical, connectors).is_some_and(|rows| rows <= single_task_max_rows)
    {
        return single_task_plan(physical, connectors).map_err(|e| planning_error(&e));
    }
    // The configuration only: a state's clone copies the function registry too.
    let physical = prepare_for_distribution(physical, ctx.copied_config().options()).map_err(|e| planning_error(&e))?;
    fragment_plan(physical, connectors).map_err(|e| planning_error(&e))
}
