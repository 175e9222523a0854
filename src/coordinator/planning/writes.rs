//! The plan of a write flotilla commits itself: `CREATE TABLE ... AS` and `INSERT`
//! into a catalog of files, Iceberg or `memory`, and `DELETE` from a table of files.
//! Its query is made ready for distribution; its writers and the commit above them
//! are already where they must be. Called by `planning::plan_here`.

use std::sync::Arc;

use datafusion::logical_expr::LogicalPlan;

use super::parse::CreateProperties;
use super::{PlanRequest, Planned};
use crate::coordinator::planner::{planning_error, QueryError};
use crate::coordinator::write::{self, PlannedWrite};
use crate::plan::distribute::prepare_for_distribution;
use crate::plan::fragmenter::{fragment_plan, reads_tables};

/// The write's plan; `None` when `logical` is no write of ours.
pub(super) async fn plan_write(
    request: &PlanRequest,
    logical: &LogicalPlan,
    create: CreateProperties,
    analyze: bool,
) -> Result<Option<Planned>, QueryError> {
    let Some(w) = planned_write(request, logical, create).await? else { return Ok(None) };
    let (ctx, connectors) = (&request.ctx, &request.connectors);
    let input =
        prepare_for_distribution(w.input.clone(), ctx.copied_config().options()).map_err(|e| planning_error(&e))?;
    let physical = w.assemble(input);
    let fragments = match reads_tables(&physical, connectors) {
        true => Some(Arc::new(fragment_plan(physical.clone(), connectors).map_err(|e| planning_error(&e))?)),
        false => None,
    };
    Ok(Some(Planned::Query { physical, fragments, analyze, write: Some(w.commit) }))
}

/// Which write `logical` is, planned: the first kind that takes it.
async fn planned_write(
    request: &PlanRequest,
    logical: &LogicalPlan,
    create: CreateProperties,
) -> Result<Option<PlannedWrite>, QueryError> {
    let (ctx, connectors, id) = (&request.ctx, &request.connectors, &request.query_id);
    let (catalog, schema) = request.defaults();
    let (c, s) = (catalog.as_str(), schema.as_str());
    if let Some(props) = create.files {
        return write::plan_ctas(ctx, connectors, logical, props, id, c, s).await;
    }
    #[cfg(feature = "iceberg")]
    {
        use crate::coordinator::iceberg_write;
        let iceberg = match create.iceberg {
            Some(props) => iceberg_write::plan_create(ctx, connectors, logical, props, id, c, s).await?,
            None => iceberg_write::plan_insert(ctx, connectors, logical, id, c, s).await?,
        };
        if iceberg.is_some() {
            return Ok(iceberg);
        }
    }
    if let Some(w) = crate::coordinator::memory_write::plan_memory_write(ctx, connectors, logical, id, c, s).await? {
        return Ok(Some(w));
    }
    if let Some(w) = write::plan_insert(ctx, connectors, logical, id, c, s).await? {
        return Ok(Some(w));
    }
    crate::coordinator::delete::plan_delete(ctx, connectors, logical, id, c, s).await
}
