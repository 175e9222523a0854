//! Plans writes into `memory` tables (`connector::memory`): `CREATE TABLE m.s.t
//! (columns)`, `CREATE TABLE m.s.t AS SELECT ...` and `INSERT INTO m.s.t ...`.
//! The query's partitions go to writers on workers (`TableWriterExec` in the
//! `MEMORY` format), each keeping its rows as a fragment where it runs; the commit
//! on the coordinator (`table_commit`) adds the reported fragments to the table, and
//! a new table to its schema, only once every writer has succeeded. Planning calls
//! `plan_memory_write` before DataFusion would run the statement itself.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::prelude::SessionContext;

use super::planner::{planning_error, QueryError};
use super::table_commit::{MemoryPublish, TableCommit};
use super::write::{writing, PlannedWrite};
use crate::connector::memory::MemoryTable;
use crate::connector::{Connector, Connectors};
use crate::error_code::ErrorCode;
use crate::plan::table_writer::{WriteTarget, MEMORY_FORMAT};

/// The memory catalog a table name falls in, with the name resolved.
fn memory_target<'a>(
    connectors: &'a Connectors,
    name: &TableReference,
    catalog: &str,
    schema: &str,
) -> Option<(&'a Arc<dyn Connector>, TableReference)> {
    super::write::catalog_target(connectors, name, catalog, schema, |c| c.memory().is_some())
}

/// A write into a memory table, or None when the statement is not one.
pub async fn plan_memory_write(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let (connector, full, publish, input, planned_table) = match logical {
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) => {
            let Some((connector, full)) = memory_target(connectors, &c.name, catalog, schema) else { return Ok(None) };
            let schema_name = full.schema().unwrap_or_default().to_string();
            let Some(schema_provider) = connector.catalog().schema(&schema_name) else {
                return Err(QueryError::new(
                    ErrorCode::SchemaNotFound,
                    format!("Schema '{}.{schema_name}' does not exist", connector.catalog_name()),
                ));
            };
            if schema_provider.table_exist(full.table()) && !c.or_replace {
                if c.if_not_exists {
                    return Ok(None);
                }
                return Err(QueryError::new(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
            }
            if !c.column_defaults.is_empty() {
                return Err(QueryError::new(ErrorCode::NotSupported, "column DEFAULT values in a memory catalog"));
            }
            let table_schema = Arc::new(c.input.schema().as_arrow().clone());
            let memory = connector.memory().expect("a memory catalog");
            let table = memory.new_table(&full.to_string(), table_schema);
            let create_in = Some((schema_provider, full.table().to_string()));
            let publish = MemoryPublish { table, create_in, replace: c.or_replace, kept: Default::default() };
            (connector, full, publish, c.input.clone(), None)
        }
        LogicalPlan::Dml(DmlStatement { table_name, target, op: WriteOp::Insert(op), input, .. }) => {
            let Some((connector, full)) = memory_target(connectors, table_name, catalog, schema) else {
                return Ok(None);
            };
            if *op != InsertOp::Append {
                return Err(QueryError::new(
                    ErrorCode::NotSupported,
                    format!("INSERT {op} into '{full}': only appending"),
                ));
            }
            let provider = source_as_provider(target).map_err(|e| planning_error(&e))?;
            let Some(table) = provider.downcast_ref::<MemoryTable>() else {
                return Err(QueryError::new(ErrorCode::NotSupported, format!("'{full}' cannot be written")));
            };
            let table = Arc::new(MemoryTable::same(table));
            (
                connector,
                full,
                MemoryPublish { table, create_in: None, replace: false, kept: Default::default() },
                input.clone(),
                Some(provider),
            )
        }
        _ => return Ok(None),
    };
    let not_null = publish.table.not_null_columns();
    let input = ctx.state().create_physical_plan(&input).await.map_err(|e| planning_error(&e))?;
    let staging = format!("memory:{}/{query_id}-{}/", full, crate::util::random_suffix(6).to_lowercase());
    let target = WriteTarget {
        staging: staging.clone(),
        format: MEMORY_FORMAT.to_string(),
        options: Default::default(),
        partition_columns: Vec::new(),
        not_null,
        field_ids: Vec::new(),
    };
    let mut commit = TableCommit::for_memory(ctx, connector.clone(), full, publish, staging);
    if let Some(table) = planned_table {
        commit = commit.into_table(table);
    }
    Ok(Some(writing(input, target, commit)))
}
