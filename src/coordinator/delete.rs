//! `DELETE FROM t [WHERE ...]` on a table of a catalog of files. Files are not
//! changed in place: the rows the statement keeps are written as new files by the
//! same writers and commit as `INSERT` (`write`, `table_commit`), and the commit
//! removes the files the query read once the new ones are in the table. A failed or
//! cancelled `DELETE` leaves the table as it was.
//!
//! The kept rows are the table's rows whose predicate is not true. A predicate with a
//! subquery (dbt's `delete+insert` strategy: `WHERE key IN (SELECT ...)` or `EXISTS`)
//! cannot be negated where DataFusion decorrelates subqueries, so those rows are
//! found instead as the table's rows without an equal row among the deleted ones (an
//! anti join on every column, nulls equal): rows equal in every column are all kept
//! or all deleted, as a predicate over a row's values decides.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{DmlStatement, Expr, JoinType, LogicalPlan, LogicalPlanBuilder, WriteOp};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use super::planner::{planning_error, QueryError};
use super::table_commit::{Replaced, TableCommit};
use super::write::{files_target, refuse_delta_lake, table_directory, writing, PlannedWrite};
use crate::connector::Connectors;
use crate::plan::table_writer::WriteTarget;

const DELETED: &str = "__flotilla_deleted";

/// Plans a `DELETE` on a table of files; None for any other statement.
pub async fn plan_delete(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let LogicalPlan::Dml(DmlStatement { table_name, target, op: WriteOp::Delete, input, .. }) = logical else {
        return Ok(None);
    };
    let Some((connector, catalog, schema, table)) = files_target(connectors, table_name, catalog, schema) else {
        return Ok(None);
    };
    let full = datafusion::common::TableReference::full(catalog.as_str(), schema.as_str(), table.as_str());
    let files = connector.files().expect("a files catalog");
    refuse_delta_lake(files, &full, "Deleting from")?;
    let provider = source_as_provider(target).map_err(|e| planning_error(&e))?;
    let (listing, path) = table_directory(&provider, &full, "delete")?;
    let location = path.as_str().to_string();
    // The files replaced: all the table's, listed before the query's own listing, so
    // that a file another write adds in between is read and kept, never removed
    // unread. (The query's scan may skip whole partitions its predicate deletes.)
    let scan = LogicalPlanBuilder::scan(table_name.clone(), target.clone(), None)
        .and_then(|b| b.build())
        .map_err(|e| planning_error(&e))?;
    let whole = ctx.state().create_physical_plan(&scan).await.map_err(|e| planning_error(&e))?;
    let read = files_read(&whole, path.prefix());
    let kept = kept_rows(input).map_err(|e| planning_error(&e))?;
    let physical = ctx.state().create_physical_plan(&kept).await.map_err(|e| planning_error(&e))?;
    let rows = ctx.read_table(provider.clone()).map_err(|e| planning_error(&e))?.count().await;
    let rows = rows.map_err(|e| planning_error(&e))? as u64;
    let options = match files.metastore().and_then(|m| m.table(&schema, &table)) {
        Some(e) => match e.plan(&ctx.task_ctx()).map_err(|e| planning_error(&e))? {
            LogicalPlan::Ddl(datafusion::logical_expr::DdlStatement::CreateExternalTable(c)) => c.options,
            _ => Default::default(),
        },
        None => Default::default(),
    };
    let target = WriteTarget {
        staging: super::write::staging_of(&location, query_id),
        format: listing.options().format.get_ext().to_uppercase(),
        options,
        partition_columns: listing.options().table_partition_cols.iter().map(|(n, _)| n.clone()).collect(),
        not_null: Vec::new(),
        field_ids: Vec::new(),
    };
    let commit =
        TableCommit::new(ctx, connector.clone(), full, location, None).replacing(Replaced { files: read, rows });
    let commit = commit.into_table(provider);
    Ok(Some(writing(physical, target, commit)))
}

/// The table's rows the `DELETE` keeps, from its input (the scan, filtered by its
/// predicate when it has one).
fn kept_rows(input: &LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    let (predicate, scan) = match input {
        LogicalPlan::Filter(f) => (Some(&f.predicate), f.input.as_ref()),
        LogicalPlan::TableScan(_) => (None, input),
        _ => return datafusion::common::not_impl_err!("DELETE with LIMIT is not supported"),
    };
    let Some(predicate) = predicate else {
        // Every row goes.
        return LogicalPlanBuilder::from(scan.clone()).filter(datafusion::prelude::lit(false))?.build();
    };
    if !has_subquery(predicate) {
        return LogicalPlanBuilder::from(scan.clone()).filter(Expr::IsNotTrue(Box::new(predicate.clone())))?.build();
    }
    let columns: Vec<Column> = scan.schema().columns();
    let deleted: Vec<Column> = columns.iter().map(|c| Column::new(Some(DELETED), c.name.clone())).collect();
    let deleted_rows = LogicalPlanBuilder::from(input.clone()).alias(DELETED)?.build()?;
    LogicalPlanBuilder::from(scan.clone())
        .join_detailed(deleted_rows, JoinType::LeftAnti, (columns, deleted), None, NullEquality::NullEqualsNull)?
        .build()
}

fn has_subquery(e: &Expr) -> bool {
    let mut found = false;
    let _ = e.apply(|e| {
        found |= matches!(e, Expr::Exists(_) | Expr::InSubquery(_) | Expr::ScalarSubquery(_));
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}

/// The files under `table` (an object store prefix) that the plan's scans list.
fn files_read(plan: &Arc<dyn ExecutionPlan>, table: &object_store::path::Path) -> Vec<object_store::path::Path> {
    let mut out = Vec::new();
    let _ = plan.apply(|node| {
        let config = (node.as_ref() as &dyn std::any::Any)
            .downcast_ref::<DataSourceExec>()
            .and_then(|d| (d.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<FileScanConfig>());
        if let Some(config) = config {
            for f in config.file_groups.iter().flat_map(|g| g.files()) {
                if f.object_meta.location.prefix_match(table).is_some() && !out.contains(&f.object_meta.location) {
                    out.push(f.object_meta.location.clone());
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}
