//! Writes into `memory` tables (`connector::writes`): `CREATE TABLE m.s.t (columns)`,
//! `CREATE [OR REPLACE] TABLE m.s.t AS SELECT ...`, `INSERT INTO`, and the row-level
//! changes. The writers (`TableWriterExec` in the `MEMORY` format) keep their rows as
//! fragments on the workers where they run; `MemoryPublish` adds the reported
//! fragments to the table (a new table to its schema) once every writer has
//! succeeded, and tells the workers which of the write's fragments stay.
//!
//! A row-level change writes the table's rows after it as new fragments, and its
//! publish swaps them for the fragments it read, if the table still has exactly
//! those (otherwise another write committed meanwhile: a conflict).

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::logical_expr::LogicalPlan;

use super::{FragmentRef, MemoryConnector, MemoryTable};
use crate::connector::writes::{
    conflict, refuse_comment, unknown_property, Classify, ConnectorWrite, ConnectorWrites, CreateTable, Fragment,
    RowChange, WritePublish, WriteRequest, WriteTarget, MEMORY_FORMAT,
};
use crate::connector::Connector;
use crate::error_code::{ErrorCode, QueryError};

impl MemoryConnector {
    fn write(
        &self,
        input: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        publish: MemoryPublish,
        planned_against: Option<Arc<dyn TableProvider>>,
        update_type: &'static str,
    ) -> ConnectorWrite {
        let mut target = WriteTarget::new(publish.staging.clone(), MEMORY_FORMAT);
        target.not_null = publish.table.not_null_columns();
        target.operations = publish.replaces.is_some();
        let location = publish.staging.clone();
        ConnectorWrite { input, target, publish: Arc::new(publish), planned_against, update_type, location }
    }

    fn memory_table(
        request: &WriteRequest<'_>,
        table: &Arc<dyn TableProvider>,
    ) -> Result<Arc<MemoryTable>, QueryError> {
        match table.downcast_ref::<MemoryTable>() {
            Some(t) => Ok(Arc::new(t.same())),
            None => Err(QueryError::new(ErrorCode::NotSupported, format!("'{}' cannot be written", request.table))),
        }
    }
}

fn staging(request: &WriteRequest<'_>) -> String {
    format!("memory:{}/{}-{}/", request.table, request.query_id, crate::util::random_suffix(6).to_lowercase())
}

#[async_trait]
impl ConnectorWrites for MemoryConnector {
    async fn begin_create_table(
        &self,
        request: &WriteRequest<'_>,
        create: CreateTable<'_>,
    ) -> Result<Option<ConnectorWrite>, QueryError> {
        refuse_comment(&create)?;
        if let Some((key, _)) = create.properties.first() {
            return Err(unknown_property(key, " (memory tables take none)"));
        }
        let (c, full) = (create.plan, &request.table);
        let schema_name = full.schema().unwrap_or_default().to_string();
        let Some(schema_provider) = self.catalog().schema(&schema_name) else {
            return Err(QueryError::new(
                ErrorCode::SchemaNotFound,
                format!("Schema '{}.{schema_name}' does not exist", self.catalog_name()),
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
        let table = self.new_table(&full.to_string(), crate::connector::writes::table_columns(c));
        let publish = MemoryPublish::new(request, table, Some((schema_provider, full.table().to_string())));
        let publish = MemoryPublish { replace: c.or_replace, ..publish };
        let input = request.physical(&c.input).await?;
        Ok(Some(self.write(input, publish, None, "CREATE TABLE")))
    }

    async fn begin_insert(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        input: &LogicalPlan,
    ) -> Result<ConnectorWrite, QueryError> {
        let publish = MemoryPublish::new(request, Self::memory_table(request, &table)?, None);
        let input = request.physical(input).await?;
        Ok(self.write(input, publish, Some(table), "INSERT"))
    }

    async fn begin_row_change(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        change: RowChange,
    ) -> Result<ConnectorWrite, QueryError> {
        let mut publish = MemoryPublish::new(request, Self::memory_table(request, &table)?, None);
        // Read before the change's scan is planned: a fragment added in between is
        // then one the publish finds new, and the change fails rather than drop it.
        publish.replaces = Some((publish.table.fragments(), change.statement));
        let input = request.physical(&change.rows).await?;
        Ok(self.write(input, publish, Some(table), change.statement))
    }
}

/// The end of a write into a `memory` table.
pub struct MemoryPublish {
    table: Arc<MemoryTable>,
    name: TableReference,
    staging: String,
    /// For `CREATE TABLE`: the schema the new table goes into, under this name.
    create_in: Option<(Arc<dyn SchemaProvider>, String)>,
    /// `CREATE OR REPLACE`: a table of that name is dropped as the new one comes.
    replace: bool,
    /// A row-level change: the fragments it read, which its own replace.
    replaces: Option<(Vec<FragmentRef>, &'static str)>,
    /// The fragments the publish put in the table (the ones the workers keep).
    kept: parking_lot::Mutex<Vec<String>>,
    classify: Classify,
}

impl std::fmt::Debug for MemoryPublish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPublish").field("table", &self.name).field("staging", &self.staging).finish()
    }
}

impl MemoryPublish {
    fn new(
        request: &WriteRequest<'_>,
        table: Arc<MemoryTable>,
        create_in: Option<(Arc<dyn SchemaProvider>, String)>,
    ) -> Self {
        MemoryPublish {
            table,
            name: request.table.clone(),
            staging: staging(request),
            create_in,
            replace: false,
            replaces: None,
            kept: Default::default(),
            classify: request.classify,
        }
    }

    /// The reported fragments, those without rows left out: the table would need
    /// their worker for nothing, and be unreadable once that worker restarted.
    fn fragments(&self, reported: &[Fragment]) -> Result<Vec<FragmentRef>, QueryError> {
        let mut refs = Vec::with_capacity(reported.len());
        for f in reported {
            let parsed = f.address.strip_prefix(&self.staging).and_then(|rest| rest.split_once('@'));
            let Some((id, worker)) = parsed else {
                return Err(QueryError::new(
                    ErrorCode::GenericInternalError,
                    format!("a writer reported '{}'", f.address),
                ));
            };
            if f.rows > 0 {
                refs.push(FragmentRef { worker: worker.to_string(), id: id.to_string(), rows: f.rows });
            }
        }
        Ok(refs)
    }
}

#[async_trait]
impl WritePublish for MemoryPublish {
    /// Adds (or swaps in) the reported fragments all at once: nothing to take back
    /// half-way; then puts a new table into its schema.
    async fn publish(&self, reported: &[Fragment]) -> Result<u64, QueryError> {
        let refs = self.fragments(reported)?;
        if let Some((schema, name)) = &self.create_in {
            if schema.table_exist(name) && !self.replace {
                return Err(QueryError::new(
                    ErrorCode::GenericUserError,
                    format!("Table '{}' already exists", self.name),
                ));
            }
        }
        *self.kept.lock() = refs.iter().map(|r| r.id.clone()).collect();
        match &self.replaces {
            Some((read, statement)) => {
                if !self.table.replace(read, refs) {
                    return Err(conflict(statement, &self.name, "another write changed the table"));
                }
            }
            None => self.table.append(refs),
        }
        if let Some((schema, name)) = &self.create_in {
            if self.replace {
                schema.deregister_table(name).map_err(|e| (self.classify)(&e))?;
            }
            schema.register_table(name.clone(), self.table.clone()).map_err(|e| (self.classify)(&e))?;
        }
        Ok(reported.iter().map(|f| f.changed).sum())
    }

    async fn conflict(&self) -> Option<QueryError> {
        let (read, statement) = self.replaces.as_ref()?;
        (self.table.fragments() != *read).then(|| conflict(statement, &self.name, "another write changed the table"))
    }

    async fn finish(self: Arc<Self>, published: bool) {
        let keep = if published { self.kept.lock().clone() } else { Vec::new() };
        let settle = super::fragments::Settle { staging: self.staging.clone(), keep };
        self.table.shared().settle(settle).await;
    }
}
