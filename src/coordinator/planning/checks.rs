//! What a planned statement must pass before anything of it runs: no write inside
//! an explicit transaction, the access rules for every table it reads or writes, and
//! the allowed locations of a catalog of files. Called by `planning::plan_here`.

use datafusion::logical_expr::{DdlStatement, LogicalPlan};

use super::PlanRequest;
use crate::connector::Connectors;
use crate::coordinator::planner::QueryError;
use crate::error_code::ErrorCode;
use crate::security::Access;

/// Checks `logical` (`creates`: a `CREATE TABLE` whose properties were taken from
/// it, a write even where DataFusion plans it as DDL).
pub(super) fn check(request: &PlanRequest, logical: &LogicalPlan, creates: bool) -> Result<(), QueryError> {
    if request.in_transaction && (creates || writes(logical)) {
        return Err(QueryError::new(ErrorCode::NotSupported, WRITES_IN_TRANSACTION));
    }
    let (catalog, schema) = request.defaults();
    // Rules first: what the location check says (which table lies where) is for
    // those who may write.
    if let Some(access) = &request.access {
        access.check(&accesses(logical, &request.connectors, &catalog, &schema))?;
        crate::coordinator::views::check_view_reads(logical, &request.connectors, access, (&catalog, &schema))?;
    }
    check_file_locations(logical, &request.connectors, &catalog)
}

pub(super) const WRITES_IN_TRANSACTION: &str =
    "Writes are not supported in an explicit transaction: each statement commits \
                                    on its own (autocommit), so a ROLLBACK could not undo one";

/// Whether running `plan` changes data or metadata: DML, DDL, `COPY`, or an
/// `EXPLAIN ANALYZE` of one.
fn writes(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Copy(_) => true,
        LogicalPlan::Analyze(a) => writes(&a.input),
        _ => false,
    }
}

/// A table location or `COPY TO` target must be one its catalog allows: a file
/// catalog's allowed locations (`files.allowed-locations`), and no other catalog's.
fn check_file_locations(
    logical: &LogicalPlan,
    connectors: &Connectors,
    default_catalog: &str,
) -> Result<(), QueryError> {
    let denied = |what: String| QueryError::new(ErrorCode::PermissionDenied, format!("Access Denied: {what}"));
    match logical {
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(c)) => {
            let catalog = c.name.catalog().unwrap_or(default_catalog);
            let connector = connectors.get(catalog);
            if let Some(files) = connector.and_then(|k| k.files()) {
                check_table_format(files, c)?;
            }
            if c.file_type.eq_ignore_ascii_case("PARQUET")
                && connector.is_some_and(|k| c.locations.iter().all(|l| k.allows_location(l)))
            {
                for location in &c.locations {
                    crate::connector::files::check_parquet_footers(location)
                        .map_err(|m| QueryError::new(ErrorCode::GenericUserError, m))?;
                }
            }
            match (connector, c.locations.iter().find(|l| !connector.is_some_and(|k| k.allows_location(l)))) {
                (Some(_), None) => Ok(()),
                (Some(_), Some(location)) => Err(denied(format!(
                    "Cannot create table {} at '{location}': the location is outside the allowed locations of catalog '{catalog}' (files.allowed-locations)",
                    c.name
                ))),
                (None, _) => Err(QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{catalog}' does not exist"))),
            }
        }
        LogicalPlan::Copy(copy) if connectors.allowing_location(&copy.output_url).is_empty() => Err(denied(format!(
            "Cannot write to '{}': the location is outside every catalog's allowed locations (files.allowed-locations)",
            copy.output_url
        ))),
        LogicalPlan::Copy(copy) => match connectors.holder_of(&copy.output_url) {
            Some(holder) => Err(denied(format!("Cannot write to '{}': it lies inside {holder}", copy.output_url))),
            None => Ok(()),
        },
        LogicalPlan::Explain(e) => check_file_locations(&e.plan, connectors, default_catalog),
        LogicalPlan::Analyze(a) => check_file_locations(&a.input, connectors, default_catalog),
        _ => Ok(()),
    }
}

/// A Delta Lake catalog holds Delta tables only, and only it holds them.
fn check_table_format(
    files: &crate::connector::files::FilesConnector,
    c: &datafusion::logical_expr::CreateExternalTable,
) -> Result<(), QueryError> {
    let delta = crate::connector::files::is_delta_format(&c.file_type);
    match (files.is_delta_lake(), delta) {
        (true, false) => Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("Cannot create table {}: a delta_lake catalog holds Delta tables only (STORED AS DELTA)", c.name),
        )),
        (false, true) => Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("Cannot create table {}: Delta tables belong in a catalog with connector.name=delta_lake", c.name),
        )),
        _ => Ok(()),
    }
}

/// The catalogs and schemas a statement reads or writes, subqueries included. A
/// `COPY ... TO` writes into every catalog whose allowed locations hold its target
/// (in no schema of theirs: it needs the catalog's write access, and with schema rules
/// one that matches the empty schema name).
pub fn accesses(logical: &LogicalPlan, connectors: &Connectors, catalog: &str, schema: &str) -> Vec<Access> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::common::TableReference;
    let mut out = std::collections::BTreeSet::new();
    let mut add = |t: &TableReference, write: bool| {
        let catalog = t.catalog().unwrap_or(catalog).to_string();
        let schema = t.schema().unwrap_or(schema).to_string();
        out.insert(Access { catalog, schema, write });
    };
    let _ = logical.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(t) => add(&t.table_name, false),
            LogicalPlan::Dml(d) => add(&d.table_name, true),
            LogicalPlan::Copy(c) => {
                for into in connectors.allowing_location(&c.output_url) {
                    add(&TableReference::full(into.catalog_name(), "", ""), true);
                }
            }
            LogicalPlan::Ddl(ddl) => match ddl {
                DdlStatement::CreateExternalTable(c) => add(&c.name, true),
                DdlStatement::CreateMemoryTable(c) => add(&c.name, true),
                DdlStatement::CreateView(c) => add(&c.name, true),
                DdlStatement::DropTable(d) => add(&d.name, true),
                DdlStatement::DropView(d) => add(&d.name, true),
                DdlStatement::CreateCatalogSchema(c) => {
                    let (cat, sch) = c.schema_name.split_once('.').unwrap_or((catalog, c.schema_name.as_str()));
                    add(&TableReference::full(cat, sch, ""), true)
                }
                DdlStatement::DropCatalogSchema(d) => {
                    let (cat, sch) = match &d.name {
                        datafusion::common::SchemaReference::Bare { schema } => {
                            (catalog.to_string(), schema.to_string())
                        }
                        datafusion::common::SchemaReference::Full { schema, catalog } => {
                            (catalog.to_string(), schema.to_string())
                        }
                    };
                    add(&TableReference::full(cat, sch, ""), true)
                }
                DdlStatement::CreateCatalog(c) => add(&TableReference::full(c.catalog_name.as_str(), "", ""), true),
                _ => {}
            },
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out.into_iter().collect()
}
