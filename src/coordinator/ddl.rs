//! Keeps a catalog's metastore in step with the DDL DataFusion has just run against
//! the catalog in memory: `CREATE SCHEMA`, `CREATE EXTERNAL TABLE`, `CREATE VIEW`,
//! `DROP TABLE` (which, for a table `CREATE TABLE ... AS` wrote, also removes its
//! files), `DROP VIEW` and `DROP SCHEMA`. The planning phase calls `before` and
//! `after` around running the statement; catalogs without a metastore are left
//! alone. At start-up `restore_views` makes the metastores' views again.

use datafusion::common::{SchemaReference, TableReference};
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use object_store::ObjectStoreExt;

use super::planner::{QueryError, SessionSpec};
use super::relations::ViewClauses;
use crate::connector::metastore::{Metastore, TableEntry, ViewEntry};
use crate::connector::view::TrinoView;
use crate::connector::Connectors;
use crate::error_code::ErrorCode;

/// What `after` needs from before the statement ran.
pub struct Pending {
    /// The entries of tables being dropped (one table, or a schema's).
    dropped: Vec<TableEntry>,
}

pub(super) fn metastore<'a>(connectors: &'a Connectors, catalog: &str) -> Option<&'a std::sync::Arc<Metastore>> {
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

/// The tables (full names) a DDL statement removes or replaces, which it locks
/// (`table_locks`): the one it drops, the one `CREATE OR REPLACE` replaces, every table
/// of a schema it drops.
pub fn removed_tables(logical: &LogicalPlan, ctx: &SessionContext, catalog: &str, schema: &str) -> Vec<String> {
    let one = |name: &TableReference| {
        let (c, s, t) = resolve(name, catalog, schema);
        vec![format!("{c}.{s}.{t}")]
    };
    let LogicalPlan::Ddl(ddl) = logical else { return Vec::new() };
    match ddl {
        DdlStatement::DropTable(d) => one(&d.name),
        DdlStatement::CreateExternalTable(c) if c.or_replace => one(&c.name),
        DdlStatement::CreateMemoryTable(c) if c.or_replace => one(&c.name),
        DdlStatement::DropCatalogSchema(d) => {
            let (c, s) = schema_of(&d.name, catalog);
            let tables = ctx.catalog(&c).and_then(|cat| cat.schema(&s)).map(|p| p.table_names()).unwrap_or_default();
            tables.into_iter().map(|t| format!("{c}.{s}.{t}")).collect()
        }
        _ => Vec::new(),
    }
}

fn recording_error(m: &Metastore, e: std::io::Error) -> QueryError {
    QueryError::new(ErrorCode::GenericInternalError, format!("cannot update {}: {e}", m.describe()))
}

/// A `CREATE VIEW` being run: its Trino clauses and who makes it.
pub struct NewView {
    pub clauses: ViewClauses,
    pub owner: String,
}

/// Records what the statement did, once it has run.
pub async fn after(
    ctx: &SessionContext,
    logical: &LogicalPlan,
    pending: Pending,
    connectors: &Connectors,
    (catalog, schema): (&str, &str),
    view: Option<NewView>,
) -> Result<(), QueryError> {
    let LogicalPlan::Ddl(ddl) = logical else { return Ok(()) };
    match ddl {
        DdlStatement::CreateView(c) => {
            let (cat, sch, name) = resolve(&c.name, catalog, schema);
            keep_whole(ctx, &cat, &sch, &name).await.map_err(|e| super::planner::planning_error(&e))?;
            let (Some(m), Some(view)) = (metastore(connectors, &cat), view) else { return Ok(()) };
            let entry = ViewEntry {
                schema: sch,
                name,
                query: view.clauses.query,
                owner: view.owner,
                session_catalog: catalog.to_string(),
                session_schema: schema.to_string(),
                security: view.clauses.security,
                comment: view.clauses.comment,
                column_comments: Default::default(),
            };
            m.put_view(entry).map_err(|e| recording_error(m, e))
        }
        DdlStatement::DropView(d) => {
            let (cat, sch, name) = resolve(&d.name, catalog, schema);
            let Some(m) = metastore(connectors, &cat) else { return Ok(()) };
            m.remove_view(&sch, &name).map(|_| ()).map_err(|e| recording_error(m, e))
        }
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

/// Makes the views the catalogs' metastores keep (the coordinator, at start-up, once
/// their tables are back), each planned as it was made: in Trino's dialect, with the
/// catalog and schema of the session that made it. A view that cannot be made (a
/// table it reads is gone) is logged and left in the metastore.
pub async fn restore_views(connectors: &Connectors) {
    for made in make_kept_views(connectors).await {
        for (v, e) in &made.failed {
            tracing::warn!("catalog {}: view {}.{} is not available: {e}", made.catalog, v.schema, v.name);
        }
        if made.planned > 0 {
            tracing::info!("catalog {}: {} views from {}", made.catalog, made.planned, made.source);
        }
    }
}

/// Plans every view the metastores keep again from its text, so that a view reads
/// the tables its text names as they are now (Trino's rule), not the ones it was
/// planned against: after `ALTER TABLE t RENAME TO u` and a new `t`, a view over `t`
/// reads the new `t`. Called after every statement that makes, drops or renames a
/// table or view. A view that no longer plans (its table is gone) answers every read
/// with `INVALID_VIEW` and why, until a statement makes it plan again.
pub async fn rebind_views(connectors: &Connectors) {
    for made in make_kept_views(connectors).await {
        for (v, e) in made.failed {
            invalidate_view(connectors, &made.catalog, &v, e).await;
        }
    }
}

/// What `make_kept_views` did in one catalog.
struct MadeViews {
    catalog: String,
    /// The metastore, for messages.
    source: String,
    planned: usize,
    /// The views that did not plan, and why.
    failed: Vec<(ViewEntry, String)>,
}

/// Plans and registers every view each catalog's metastore keeps. Views are made in
/// the order they were, and those that failed are tried again while any succeeds, so
/// a view over a view made (or replaced) later still comes back.
async fn make_kept_views(connectors: &Connectors) -> Vec<MadeViews> {
    let mut out = Vec::new();
    for c in connectors.list() {
        let Some(m) = metastore(connectors, c.catalog_name()) else { continue };
        let (mut pending, mut planned) = (m.views(), 0);
        let failed = loop {
            let tried = pending.len();
            let mut failed = Vec::new();
            for v in pending {
                match make_view(connectors, c.catalog_name(), &v).await {
                    Ok(()) => planned += 1,
                    Err(e) => failed.push((v, e)),
                }
            }
            if failed.is_empty() || failed.len() == tried {
                break failed;
            }
            pending = failed.into_iter().map(|(v, _)| v).collect();
        };
        let (catalog, source) = (c.catalog_name().to_string(), m.describe());
        out.push(MadeViews { catalog, source, planned, failed });
    }
    out
}

/// Puts an `InvalidView` in place of a view whose text no longer plans, with the
/// columns it had, so that a statement naming them plans and its read says why.
async fn invalidate_view(connectors: &Connectors, catalog: &str, v: &ViewEntry, why: String) {
    let Some(schema) = connectors.get(catalog).and_then(|c| c.catalog().schema(&v.schema)) else { return };
    let name = format!("{catalog}.{}.{}", v.schema, v.name);
    let columns = match schema.table(&v.name).await {
        Ok(Some(old)) => old.schema(),
        _ => std::sync::Arc::new(datafusion::arrow::datatypes::Schema::empty()),
    };
    let invalid = crate::connector::view::InvalidView::new(name, why, columns);
    let _ = schema.deregister_table(&v.name);
    if let Err(e) = schema.register_table(v.name.clone(), std::sync::Arc::new(invalid)) {
        tracing::warn!("view {catalog}.{}.{} cannot be marked invalid: {e}", v.schema, v.name);
    }
}

/// Plans and registers one view of `catalog`, as its maker's session would have.
async fn make_view(connectors: &Connectors, catalog: &str, v: &ViewEntry) -> Result<(), String> {
    let spec =
        SessionSpec { catalog: v.session_catalog.clone(), schema: v.session_schema.clone(), ..Default::default() };
    let ctx = super::planner::session_context(&spec, &Default::default(), 1, connectors);
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let sql =
        format!("CREATE OR REPLACE VIEW {}.{}.{} AS {}", quote(catalog), quote(&v.schema), quote(&v.name), v.query);
    let mut statement =
        super::dialect::parse_in(&sql, 1000, &super::dialect::SessionValues::utc()).map_err(|e| e.to_string())?;
    super::stars::expand(&ctx.state(), &mut statement).await.map_err(|e| e.message)?;
    let plan = ctx.state().statement_to_plan(statement).await.map_err(|e| e.to_string())?;
    ctx.execute_logical_plan(plan).await.map_err(|e| e.to_string())?;
    keep_whole(&ctx, catalog, &v.schema, &v.name).await.map_err(|e| e.to_string())
}

/// Swaps the `ViewTable` DataFusion registered for one whose query is not inlined
/// (`connector::view`), so that access rules see the view.
async fn keep_whole(ctx: &SessionContext, catalog: &str, schema: &str, name: &str) -> datafusion::error::Result<()> {
    let Some(provider) = ctx.catalog(catalog).and_then(|c| c.schema(schema)) else { return Ok(()) };
    let Some(table) = provider.table(name).await? else { return Ok(()) };
    let Some(view) = table.downcast_ref::<datafusion::catalog::view::ViewTable>() else { return Ok(()) };
    let copy = datafusion::catalog::view::ViewTable::new(view.logical_plan().clone(), view.definition().cloned());
    provider.deregister_table(name)?;
    provider.register_table(name.to_string(), std::sync::Arc::new(TrinoView::new(std::sync::Arc::new(copy))))?;
    Ok(())
}

fn schema_of(name: &SchemaReference, catalog: &str) -> (String, String) {
    match name {
        SchemaReference::Bare { schema } => (catalog.to_string(), schema.to_string()),
        SchemaReference::Full { schema, catalog } => (catalog.to_string(), schema.to_string()),
    }
}

/// Deletes the files of the dropped tables that the catalog wrote itself, and only
/// where it puts them (`WAREHOUSE/SCHEMA/DIRECTORY/`): a metastore entry is never
/// trusted to name what may be deleted.
async fn remove_managed_files(ctx: &SessionContext, connectors: &Connectors, catalog: &str, dropped: Vec<TableEntry>) {
    let Some(files) = connectors.get(catalog).and_then(|c| c.files()) else { return };
    for entry in dropped.into_iter().filter(|e| e.managed) {
        match files.is_managed_location(&entry.location) {
            true => remove_files(ctx, &entry.location).await,
            false => tracing::warn!(
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
