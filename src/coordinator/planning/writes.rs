//! The plan of a write: `CREATE TABLE [AS]`, `INSERT`, and the row-level changes
//! (`DELETE`, `UPDATE`, and `MERGE` as `coordinator::merge` plans it) of any catalog whose connector writes
//! (`connector::writes`). The statement's table is resolved to its connector, the
//! write begun there, and its rows made ready for distribution under writers on
//! workers and the commit on the coordinator (`table_commit`). Which connector it
//! is does not matter here. Called by `planning::plan_here`.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::ExecutionPlan;

use super::parse::CreateProperties;
use super::{PlanRequest, Planned};
use crate::connector::writes::{ConnectorWrite, ConnectorWrites, CreateTable, RowChange, WriteRequest};
use crate::coordinator::planner::{planning_error, QueryError};
use crate::coordinator::table_commit::{TableCommit, TableCommitExec};
use crate::error_code::ErrorCode;
use crate::plan::distribute::prepare_for_distribution;
use crate::plan::fragmenter::{fragment_plan, reads_tables};
use crate::plan::table_writer::TableWriterExec;

/// The write's plan; `None` when `logical` writes no table of a writing connector.
pub(super) async fn plan_write(
    request: &PlanRequest,
    logical: &LogicalPlan,
    create: CreateProperties,
    analyze: bool,
    merge: bool,
) -> Result<Option<Planned>, QueryError> {
    let Some((table, write)) = begin(request, logical, create, merge).await? else { return Ok(None) };
    let (ctx, connectors) = (&request.ctx, &request.connectors);
    let commit = Arc::new(TableCommit::new(ctx, table, &write));
    let input =
        prepare_for_distribution(write.input.clone(), ctx.copied_config().options()).map_err(|e| planning_error(&e))?;
    // Writers over the rows' partitions, gathered always through a
    // `CoalescePartitionsExec` (the cut the fragmenter makes between the workers'
    // writers and the coordinator's commit), then the commit.
    let writers: Arc<dyn ExecutionPlan> = Arc::new(TableWriterExec::new(input, write.target));
    let gathered = Arc::new(CoalescePartitionsExec::new(writers));
    let physical: Arc<dyn ExecutionPlan> = Arc::new(TableCommitExec::new(gathered, commit.clone()));
    let fragments = match reads_tables(&physical, connectors) {
        true => Some(Arc::new(fragment_plan(physical.clone(), connectors).map_err(|e| planning_error(&e))?)),
        false => None,
    };
    Ok(Some(Planned::Query { physical, fragments, analyze, write: Some(commit) }))
}

/// The write `logical` asks for, begun with its table's connector.
async fn begin(
    request: &PlanRequest,
    logical: &LogicalPlan,
    create: CreateProperties,
    merge: bool,
) -> Result<Option<(TableReference, ConnectorWrite)>, QueryError> {
    let (name, row_change) = match logical {
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) => (&c.name, None),
        LogicalPlan::Dml(DmlStatement { table_name, op, input, .. }) => match op {
            WriteOp::Insert(_) => (table_name, None),
            WriteOp::Delete => (table_name, Some(("DELETE", input))),
            WriteOp::Update if merge => (table_name, Some(("MERGE", input))),
            WriteOp::Update => (table_name, Some(("UPDATE", input))),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Some((writes, table)) = writer_of(request, name) else { return Ok(None) };
    let w =
        WriteRequest { ctx: &request.ctx, query_id: &request.query_id, table: table.clone(), classify: planning_error };
    let begun = match logical {
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) => {
            let (properties, comment) = create.taken.unwrap_or_default();
            writes.begin_create_table(&w, CreateTable { plan: c, properties, comment }).await?
        }
        LogicalPlan::Dml(DmlStatement { target, op, input, .. }) => {
            let provider = source_as_provider(target).map_err(|e| planning_error(&e))?;
            match (op, row_change) {
                (WriteOp::Insert(InsertOp::Append), _) => Some(writes.begin_insert(&w, provider, input).await?),
                (WriteOp::Insert(op), _) => {
                    let m = format!("INSERT {op} into '{table}': only appending");
                    return Err(QueryError::new(ErrorCode::NotSupported, m));
                }
                (_, Some((statement, input))) => {
                    // A MERGE's input is already its rows (`coordinator::merge`).
                    let rows = match statement {
                        "MERGE" => input.as_ref().clone(),
                        _ => super::super::row_changes::rows_after(statement, input)?,
                    };
                    Some(writes.begin_row_change(&w, provider, RowChange { rows, statement }).await?)
                }
                _ => None,
            }
        }
        _ => None,
    };
    Ok(begun.map(|write| (table, write)))
}

/// The connector writing the table `name` (resolved against the session's catalog
/// and schema), and the name in full; None for a catalog that writes nothing.
fn writer_of<'a>(request: &'a PlanRequest, name: &TableReference) -> Option<(&'a dyn ConnectorWrites, TableReference)> {
    let (catalog, schema) = request.defaults();
    let catalog = name.catalog().unwrap_or(&catalog).to_string();
    let writes = request.connectors.get(&catalog)?.writes()?;
    let full = TableReference::full(catalog.as_str(), name.schema().unwrap_or(&schema), name.table());
    Some((writes, full))
}
