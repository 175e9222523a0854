//! Keeps a catalog's metastore in step with the DDL DataFusion has just run against
//! the catalog in memory: `CREATE SCHEMA`, `CREATE EXTERNAL TABLE`, `DROP TABLE`
//! (which, for a table `CREATE TABLE ... AS` wrote, also removes its files) and
//! `DROP SCHEMA`. The planning phase calls `before` and `after` around running the
//! statement; catalogs without a metastore are left alone.

use datafusion::common::{SchemaReference, TableReference};
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use object_store::ObjectStoreExt;

use super::planner::QueryError;
use crate::connector::metastore::{Metastore, TableEntry};
use crate::connector::Connectors;
use crate::error_code::ErrorCode;

/// What `after` needs from before the statement ran.
pub struct Pending {
    /// The entries of tables being dropped (one table, or a schema's).
    dropped: Vec<TableEntry>,
}

fn metastore<'a>(connectors: &'a Connectors, catalog: &str) -> Option<&'a std::sync::Arc<Metastore>> {
    connectors.get(catalog).and_then(|c| c.files()).and_then(|f| f.metastore())
}

fn resolve(name: &TableReference, catalog: &str, schema: &str) -> (String, String, String) {
    (
        name.catalog().unwrap_or(catalog).to_string(),
        name.schema().unwrap_or(schema).to_string(),
        name.table().to_string(),
    )
}

pub fn before(logical: &LogicalPlan, connectors: &Connectors, catalog: &str, schema: &str) -> Pending {
    let dropped = match logical {
        LogicalPlan::Ddl(DdlStatement::DropTable(d)) => {
            let (c, s, t) = resolve(&d.name, catalog, schema);
            metastore(connectors, &c).and_then(|m| m.table(&s, &t)).into_iter().collect()
        }
        LogicalPlan::Ddl(DdlStatement::DropCatalogSchema(d)) => {
            let (c, s) = schema_of(&d.name, catalog);
            metastore(connectors, &c)
                .map(|m| m.tables().into_iter().filter(|t| t.schema == s).collect())
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    Pending { dropped }
}

fn recording_error(m: &Metastore, e: std::io::Error) -> QueryError {
    QueryError::new(ErrorCode::GenericInternalError, format!("cannot update {}: {e}", m.describe()))
}

/// Records what the statement did, once it has run.
pub async fn after(
    ctx: &SessionContext,
    logical: &LogicalPlan,
    pending: Pending,
    connectors: &Connectors,
    catalog: &str,
    schema: &str,
) -> Result<(), QueryError> {
    let LogicalPlan::Ddl(ddl) = logical else { return Ok(()) };
    match ddl {
        DdlStatement::CreateExternalTable(c) => {
            let (cat, sch, table) = resolve(&c.name, catalog, schema);
            let Some(m) = metastore(connectors, &cat) else { return Ok(()) };
            if c.if_not_exists && m.table(&sch, &table).is_some() {
                return Ok(());
            }
            let mut create = c.clone();
            create.name = TableReference::full(cat.as_str(), sch.as_str(), table.as_str());
            let entry = TableEntry::new(&sch, &create, false).map_err(|e| super::planner::planning_error(&e))?;
            m.put_table(entry).map_err(|e| recording_error(m, e))
        }
        DdlStatement::CreateCatalogSchema(c) => {
            let (cat, sch) = match c.schema_name.split_once('.') {
                Some((cat, sch)) => (cat.to_string(), sch.to_string()),
                None => (catalog.to_string(), c.schema_name.clone()),
            };
            match metastore(connectors, &cat) {
                Some(m) => m.put_schema(&sch).map_err(|e| recording_error(m, e)),
                None => Ok(()),
            }
        }
        DdlStatement::DropCatalogSchema(d) => {
            let (cat, sch) = schema_of(&d.name, catalog);
            let Some(m) = metastore(connectors, &cat) else { return Ok(()) };
            m.remove_schema(&sch).map_err(|e| recording_error(m, e))?;
            remove_managed_files(ctx, connectors, &cat, pending.dropped).await;
            Ok(())
        }
        DdlStatement::DropTable(d) => {
            let (cat, sch, table) = resolve(&d.name, catalog, schema);
            let Some(m) = metastore(connectors, &cat) else { return Ok(()) };
            m.remove_table(&sch, &table).map_err(|e| recording_error(m, e))?;
            remove_managed_files(ctx, connectors, &cat, pending.dropped).await;
            Ok(())
        }
        _ => Ok(()),
    }
}

fn schema_of(name: &SchemaReference, catalog: &str) -> (String, String) {
    match name {
        SchemaReference::Bare { schema } => (catalog.to_string(), schema.to_string()),
        SchemaReference::Full { schema, catalog } => (catalog.to_string(), schema.to_string()),
    }
}

/// Deletes the files of the dropped tables that the catalog wrote itself, and only
/// where it would have put them (`WAREHOUSE/SCHEMA/TABLE/`): a metastore entry is
/// never trusted to name what may be deleted.
async fn remove_managed_files(ctx: &SessionContext, connectors: &Connectors, catalog: &str, dropped: Vec<TableEntry>) {
    let Some(files) = connectors.get(catalog).and_then(|c| c.files()) else { return };
    for entry in dropped.into_iter().filter(|e| e.managed) {
        match files.managed_location(&entry.schema, &entry.name) {
            Ok(Some(location)) if location == entry.location => remove_files(ctx, &location).await,
            _ => tracing::warn!(
                "table {}.{}: its files at {} are not where the warehouse puts tables; left in place",
                entry.schema,
                entry.name,
                entry.location
            ),
        }
    }
}

/// Deletes every file under a managed table's location.
async fn remove_files(ctx: &SessionContext, location: &str) {
    let Ok(url) = ListingTableUrl::parse(location) else { return };
    if url.scheme() == "file" {
        if let Ok(Ok(path)) = url::Url::parse(url.as_str()).map(|u| u.to_file_path()) {
            let _ = tokio::fs::remove_dir_all(path).await;
        }
        return;
    }
    let Ok(store) = ctx.runtime_env().object_store(url.object_store()) else { return };
    let files: Vec<_> = store.list(Some(url.prefix())).filter_map(|r| async { r.ok() }).collect().await;
    for f in files {
        if let Err(e) = store.delete(&f.location).await {
            tracing::warn!("cannot remove {} of a dropped table: {e}", f.location);
        }
    }
}
