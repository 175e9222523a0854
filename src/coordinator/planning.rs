//! The planning phase of a query, from SQL text to a physical plan cut into fragments,
//! run apart from the coordinator's runtime and under limits. `QueryExecution` calls
//! [`plan`]; it owns nothing past the call.
//!
//! Why apart: parsing and planning are synchronous and recurse over expression trees.
//! On a tokio worker thread a statement of a few thousand terms overflows the 2 MiB
//! stack (aborting the coordinator), and a slow plan blocks the thread that serves
//! heartbeats and the statement protocol, so a DELETE of the query cannot be heard.
//! Here planning runs on a thread of its own with a large stack, expression depth is
//! bounded before any planning starts, and the caller waits for the thread only until
//! `query_max_planning_time` passes or the query is cancelled.

use crate::error_code::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Visit, Visitor};

use super::planner::{planning_error, QueryError};
use super::table_commit::TableCommit;
use super::write;
use crate::connector::Connectors;
use crate::plan::distribute::prepare_for_distribution;
use crate::plan::fragmenter::{fragment_plan, reads_tables, scanned_rows, single_task_plan, FragmentedPlan};
use crate::scheduling::pipelined::task_count;
use crate::security::{Access, AccessRules, Identity};

/// Deepest expression nesting accepted (`a + b + ...` counts one level per operator).
/// DataFusion's optimizer is superlinear in depth: about 1,000 terms over a column
/// took a minute, so deeper statements are refused before planning starts.
pub const MAX_EXPRESSION_DEPTH: usize = 500;

/// Longest statement accepted, in bytes (Trino's `query.max-length` is in characters
/// and defaults to 1,000,000; long IN lists from tools need more).
pub const MAX_QUERY_LENGTH: usize = 16 << 20;

/// What planning produced.
pub enum Planned {
    /// EXPLAIN's text.
    Explain(String),
    /// A statement that did all it does while planned (`ALTER ... RENAME TO`,
    /// `COMMENT ON`), with its `updateType`.
    Done(&'static str),
    /// A plan to run; `fragments` is set when it reads tables (it needs workers);
    /// `write` when it writes a table (committed by its root, finished at the end).
    Query {
        physical: Arc<dyn ExecutionPlan>,
        fragments: Option<Arc<FragmentedPlan>>,
        analyze: bool,
        write: Option<Arc<TableCommit>>,
    },
}

/// Planning threads at once. A query waits (cancellably, within its planning time)
/// for one; an abandoned planning keeps its slot until its thread ends, so slow
/// statements cannot pile up threads that burn the coordinator's cores.
fn planning_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        tokio::sync::Semaphore::new(2 * cores + 2)
    })
}

/// Plans `sql` on a planning thread; gives up after `max_time`.
/// Access rules and who is asking: a statement's tables are checked before it runs.
#[derive(Clone)]
pub struct AccessCheck {
    pub rules: Arc<AccessRules>,
    pub who: Identity,
}

impl AccessCheck {
    pub fn check(&self, accesses: &[Access]) -> Result<(), QueryError> {
        self.rules.check(&self.who, accesses).map_err(|m| QueryError::new(ErrorCode::PermissionDenied, m))
    }
}

/// What a query is planned with besides its SQL.
pub struct PlanRequest {
    pub ctx: SessionContext,
    pub connectors: Connectors,
    pub access: Option<AccessCheck>,
    pub query_id: String,
    pub workers: usize,
    /// `single_task_max_rows`: see `cut`.
    pub single_task_max_rows: usize,
    /// `EXPLAIN` shows the dynamic filters the query would run with
    /// (`SessionProperties::runs_dynamic_filters`).
    pub dynamic_filtering: bool,
    /// The client is in an explicit transaction, where writes are refused (see
    /// `transaction`).
    pub in_transaction: bool,
    /// The session's user: the owner of the views it makes.
    pub user: String,
}

#[cfg(test)]
impl PlanRequest {
    /// A request of tests: the built-in catalogs, no access rules, every query cut into
    /// stages, dynamic filters on.
    pub(crate) fn for_tests(ctx: SessionContext, workers: usize) -> Self {
        PlanRequest {
            ctx,
            connectors: Connectors::builtin(),
            access: None,
            query_id: "q".into(),
            workers,
            single_task_max_rows: 0,
            dynamic_filtering: true,
            in_transaction: false,
            user: "test".into(),
        }
    }
}

pub async fn plan(request: PlanRequest, sql: String, max_time: Duration) -> Result<Planned, QueryError> {
    let (connectors, text) = (request.connectors.clone(), sql.clone());
    let planning = async move {
        let slot = planning_slots()
            .acquire()
            .await
            .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
        let thread = crate::runtime::spawn_with_big_stack("flotilla-planner", move |abandoned| {
            let _slot = slot;
            // Planning threads are reused (see `spawn_with_big_stack`), and so is each
            // one's runtime.
            thread_local! {
                static RUNTIME: std::cell::OnceCell<tokio::runtime::Runtime> = const { std::cell::OnceCell::new() };
            }
            RUNTIME.with(|cell| {
                let rt = match cell.get() {
                    Some(rt) => rt,
                    None => {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
                        cell.get_or_init(|| rt)
                    }
                };
                // Constants folded while planning share one budget (`functions::bounded`).
                crate::functions::bounded::while_planning(|| rt.block_on(plan_here(&request, &sql, abandoned)))
            })
        });
        Ok::<_, QueryError>(thread.await)
    };
    match tokio::time::timeout(max_time, planning).await {
        Ok(Err(e)) => Err(e),
        Ok(Ok(thread)) => match thread {
            Err(_) => Err(QueryError::new(ErrorCode::GenericInternalError, "the planning thread could not be started")),
            Ok(Err(panic)) => {
                let what = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                // The Parquet reader panics on some corrupt footers: name the file.
                match connectors.find_corrupt_parquet(&text) {
                    Some(corrupt) => Err(QueryError::new(ErrorCode::CorruptFile, corrupt)),
                    None => Err(QueryError::new(ErrorCode::GenericInternalError, format!("planning failed unexpectedly: {what}"))),
                }
            }
            Ok(Ok(planned)) => planned,
        },
        Err(_) => Err(QueryError::new(
            ErrorCode::ExceededTimeLimit,
            format!("Query exceeded the maximum planning time limit of {max_time:?} (session property query_max_planning_time)"),
        )),
    }
}

async fn plan_here(request: &PlanRequest, sql: &str, abandoned: &dyn Fn() -> bool) -> Result<Planned, QueryError> {
    let started = std::time::Instant::now();
    let (ctx, connectors, workers) = (&request.ctx, &request.connectors, request.workers);
    let single_task_max_rows = request.single_task_max_rows;
    let state = ctx.state();
    let normalize = state.config().options().sql_parser.enable_ident_normalization;
    let versioned = versioned_tables(sql, normalize, connectors, &state)?;
    let sql = versioned.as_deref().unwrap_or(sql);
    // Trino's spellings the parser does not read: `ALTER VIEW ... RENAME TO`, and the
    // clauses of `CREATE VIEW`, kept for the view's metastore entry.
    let renamed_view = super::relations::alter_view_as_table(sql);
    let (sql, view_clauses) = match super::relations::take_view_clauses(renamed_view.as_deref().unwrap_or(sql)) {
        Some(taken) => {
            let (text, clauses) = taken?;
            (std::borrow::Cow::Owned(text), Some(clauses))
        }
        None => (std::borrow::Cow::Borrowed(renamed_view.as_deref().unwrap_or(sql)), None),
    };
    let (sql, table_comment) = match super::relations::take_table_comment(&sql) {
        Some((text, comment)) => (std::borrow::Cow::Owned(text), Some(comment)),
        None => (sql, None),
    };
    let recursion_limit = state.config().options().sql_parser.recursion_limit.get();
    let zone = state.config().options().execution.time_zone.clone().unwrap_or_else(|| "UTC".into());
    let mut statement = super::dialect::parse_in(&sql, recursion_limit, &zone).map_err(|e| planning_error(&e))?;
    check_depth(&statement)?;
    let defaults = state.config().options().catalog.clone();
    let (catalog, schema) = (defaults.default_catalog.as_str(), defaults.default_schema.as_str());
    if let Some(relation_statement) = super::relations::parse(&statement) {
        let relation_statement = relation_statement?;
        if request.in_transaction {
            return Err(QueryError::new(ErrorCode::NotSupported, WRITES_IN_TRANSACTION));
        }
        if abandoned() {
            return Err(QueryError::new(ErrorCode::UserCanceled, "planning was abandoned"));
        }
        let scope = super::relations::Scope { ctx, connectors, catalog, schema, access: request.access.as_ref() };
        return super::relations::run(&relation_statement, &scope).await.map(Planned::Done);
    }
    // A table made from a query in a catalog of files: its `WITH (...)` properties
    // (Trino's) are ours to read, DataFusion plans the rest.
    let mut ctas = None;
    #[cfg(feature = "iceberg")]
    let mut iceberg_create = None;
    if let DFStatement::Statement(s) = &mut statement {
        #[cfg(feature = "iceberg")]
        if super::iceberg_write::is_create_in_iceberg(s, connectors, catalog, schema, normalize) {
            if let datafusion::sql::sqlparser::ast::Statement::CreateTable(ct) = s.as_mut() {
                iceberg_create = Some(super::iceberg_write::take_properties(ct)?);
            }
        }
        if write::is_ctas_into_files(s, connectors, catalog, schema, normalize) {
            if let datafusion::sql::sqlparser::ast::Statement::CreateTable(ct) = s.as_mut() {
                let mut props = write::take_table_properties(ct)?;
                props.comment = table_comment.clone();
                ctas = Some(props);
            }
        }
    }
    if table_comment.is_some() && ctas.is_none() {
        let m = "CREATE TABLE ... COMMENT: tables take comments only in catalogs of files";
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let logical = state.statement_to_plan(statement).await.map_err(|e| planning_error(&e))?;
    if request.in_transaction && (ctas.is_some() || writes(&logical)) {
        return Err(QueryError::new(ErrorCode::NotSupported, WRITES_IN_TRANSACTION));
    }
    // Rules first: what the location check says (which table lies where) is for
    // those who may write.
    if let Some(access) = &request.access {
        access.check(&accesses(&logical, connectors, catalog, schema))?;
        super::views::check_view_reads(&logical, connectors, access, (catalog, schema))?;
    }
    check_file_locations(&logical, connectors, catalog)?;
    if let LogicalPlan::Explain(explain) = &logical {
        let physical = state.create_physical_plan(&explain.plan).await.map_err(|e| planning_error(&e))?;
        let graphviz = matches!(explain.explain_format, datafusion::common::format::ExplainFormat::Graphviz);
        let text = if reads_tables(&physical, connectors) {
            let fragmented = cut(physical, ctx, connectors, single_task_max_rows)?;
            if graphviz {
                fragmented.to_dot()
            } else {
                let filters = match request.dynamic_filtering {
                    true => crate::plan::dynamic_filter::dynamic_filters(&fragmented),
                    false => Vec::new(),
                };
                crate::plan::explain::explain(&fragmented, &|f| task_count(f, workers), &filters)
            }
        } else {
            format!(
                "Fragment 0 [COORDINATOR ONLY]\n{}",
                datafusion::physical_plan::displayable(physical.as_ref()).indent(false)
            )
        };
        return Ok(Planned::Explain(text));
    }
    // EXPLAIN ANALYZE runs the statement, discards its rows and reports the stages.
    let (logical, analyze) = match logical {
        LogicalPlan::Analyze(a) => (a.input.as_ref().clone(), true),
        other => (other, false),
    };
    // DDL (CREATE EXTERNAL TABLE) takes effect here: not for a query already given up.
    if abandoned() {
        return Err(QueryError::new(ErrorCode::UserCanceled, "planning was abandoned"));
    }
    #[cfg(feature = "iceberg")]
    let iceberg_write = match iceberg_create {
        Some(props) => {
            super::iceberg_write::plan_create(ctx, connectors, &logical, props, &request.query_id, catalog, schema)
                .await?
        }
        None => {
            super::iceberg_write::plan_insert(ctx, connectors, &logical, &request.query_id, catalog, schema).await?
        }
    };
    #[cfg(not(feature = "iceberg"))]
    let iceberg_write = None;
    let planned_write = match ctas {
        Some(props) => write::plan_ctas(ctx, connectors, &logical, props, &request.query_id, catalog, schema).await?,
        None if iceberg_write.is_some() => iceberg_write,
        None => {
            let (id, c, s) = (&request.query_id, catalog, schema);
            match super::memory_write::plan_memory_write(ctx, connectors, &logical, id, c, s).await? {
                Some(w) => Some(w),
                None => match write::plan_insert(ctx, connectors, &logical, id, c, s).await? {
                    Some(w) => Some(w),
                    None => super::delete::plan_delete(ctx, connectors, &logical, id, c, s).await?,
                },
            }
        }
    };
    if let Some(w) = planned_write {
        // Only the query is made ready for distribution: its writers and the commit
        // above them are already where they must be.
        let input =
            prepare_for_distribution(w.input.clone(), state.config().options()).map_err(|e| planning_error(&e))?;
        let physical = w.assemble(input);
        let fragments = match reads_tables(&physical, connectors) {
            true => Some(Arc::new(fragment_plan(physical.clone(), connectors).map_err(|e| planning_error(&e))?)),
            false => None,
        };
        return Ok(Planned::Query { physical, fragments, analyze, write: Some(w.commit) });
    }
    let written = view_clauses.as_ref().filter(|c| c.security_written).map(|c| c.security.as_str());
    super::views::check_new_view(&logical, connectors, written, (catalog, schema))?;
    // A statement that drops or replaces tables takes turns with their writes' commits.
    let _tables = super::table_locks::lock(super::ddl::removed_tables(&logical, ctx, catalog, schema)).await;
    let pending = super::ddl::before(&logical, connectors, catalog, schema);
    let logical_done = started.elapsed();
    // A query plans on the state cloned above; DataFusion's `execute_logical_plan`
    // (which runs DDL) would clone the state, function registry and all, once more.
    let df = match &logical {
        LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) => {
            Some(ctx.execute_logical_plan(logical.clone()).await.map_err(|e| planning_error(&e))?)
        }
        _ => None,
    };
    let view = view_clauses.map(|clauses| super::ddl::NewView { clauses, owner: request.user.clone() });
    super::ddl::after(ctx, &logical, pending, connectors, (catalog, schema), view).await?;
    if matches!(logical, LogicalPlan::Ddl(_)) {
        super::ddl::rebind_views(connectors).await;
    }
    // An uncorrelated scalar subquery is a join like any other input: it answers one
    // row, checked (`plan::scalar_subqueries`).
    let planned = match df {
        Some(df) => df.create_physical_plan().await,
        None => state.create_physical_plan(&logical).await,
    };
    let (physical, in_one_task) = match planned {
        Ok(physical) => (physical, false),
        Err(e) if needs_scalar_subquery_exec(&e) => (with_scalar_subqueries(ctx, &logical).await?, true),
        Err(e) => return Err(planning_error(&e)),
    };
    let physical_done = started.elapsed();
    let fragments = match reads_tables(&physical, connectors) {
        true if in_one_task => {
            Some(Arc::new(single_task_plan(physical.clone(), connectors).map_err(|e| planning_error(&e))?))
        }
        true => Some(Arc::new(cut(physical.clone(), ctx, connectors, single_task_max_rows)?)),
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

const WRITES_IN_TRANSACTION: &str = "Writes are not supported in an explicit transaction: each statement commits \
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

/// The statement with Trino's `FOR VERSION AS OF n` taken out (see
/// `connector::time_travel`), when it has one; only Delta and Iceberg tables have
/// versions, and only Iceberg's are read by time.
fn versioned_tables(
    sql: &str,
    normalize: bool,
    connectors: &Connectors,
    state: &datafusion::execution::SessionState,
) -> Result<Option<String>, QueryError> {
    use crate::connector::time_travel;
    // Tokenized as the statement itself is parsed next (`dialect::parse`).
    let zone = state.config().options().execution.time_zone.clone().unwrap_or_else(|| "UTC".into());
    let rewritten = time_travel::rewrite(sql, &super::dialect::TrinoDialect, normalize, &zone)
        .map_err(|e| QueryError::new(ErrorCode::SyntaxError, e))?;
    let Some(rewritten) = rewritten else { return Ok(None) };
    let default_catalog = state.config().options().catalog.default_catalog.clone();
    for t in &rewritten.tables {
        let catalog = if t.parts.len() == 3 { t.parts[0].as_str() } else { default_catalog.as_str() };
        let connector = connectors.get(catalog);
        if !connector.is_some_and(|c| c.has_versions()) {
            return Err(QueryError::new(
                ErrorCode::NotSupported,
                format!(
                    "{}: '{}' is not a table of a delta_lake or iceberg catalog",
                    t.point.clause(),
                    t.parts.join(".")
                ),
            ));
        }
        let delta = connector.and_then(|c| c.files()).is_some_and(|f| f.is_delta_lake());
        if delta && matches!(t.point, time_travel::TravelPoint::Timestamp(_)) {
            return Err(QueryError::new(
                ErrorCode::NotSupported,
                format!("FOR TIMESTAMP AS OF: Delta table '{}' is read by version only", t.parts.join(".")),
            ));
        }
    }
    Ok(Some(rewritten.sql))
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

/// Cuts the plan into stages; one whose scans read at most `single_task_max_rows` (by
/// the tables' statistics) becomes a single worker stage run by one task instead, the
/// whole single-node plan with its repartitions inside that task's process: for a query
/// of tens of milliseconds, the stages, tasks and exchanges of a distributed plan cost
/// more than they save.
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

fn cut(
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

/// Refuses statements whose expressions nest deeper than `MAX_EXPRESSION_DEPTH`.
fn check_depth(statement: &DFStatement) -> Result<(), QueryError> {
    let depth = statement_depth(statement);
    if depth > MAX_EXPRESSION_DEPTH {
        return Err(QueryError::new(
            ErrorCode::SyntaxError,
            format!("expressions nest {depth} levels deep, more than the limit of {MAX_EXPRESSION_DEPTH}; long chains of AND/OR/+ can often be written as IN lists or sums over a table"),
        ));
    }
    Ok(())
}

fn statement_depth(statement: &DFStatement) -> usize {
    let mut v = DepthVisitor::default();
    match statement {
        DFStatement::Statement(s) => {
            let _ = s.visit(&mut v);
        }
        DFStatement::Explain(e) => return statement_depth(&e.statement),
        DFStatement::CopyTo(c) => {
            if let datafusion::sql::parser::CopyToSource::Query(q) = &c.source {
                let _ = q.visit(&mut v);
            }
        }
        _ => {}
    }
    v.max
}

#[derive(Default)]
struct DepthVisitor {
    depth: usize,
    max: usize,
}

impl Visitor for DepthVisitor {
    type Break = ();

    fn pre_visit_expr(&mut self, _: &SqlExpr) -> std::ops::ControlFlow<()> {
        self.depth += 1;
        self.max = self.max.max(self.depth);
        std::ops::ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _: &SqlExpr) -> std::ops::ControlFlow<()> {
        self.depth -= 1;
        std::ops::ControlFlow::Continue(())
    }
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod cut_tests;
#[cfg(test)]
#[path = "plan_snapshots.rs"]
mod plan_snapshots;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SessionProperties;
    use crate::coordinator::planner::{session_context, SessionSpec};

    fn request(ctx: SessionContext) -> PlanRequest {
        PlanRequest::for_tests(ctx, 1)
    }

    fn chain(n: usize) -> String {
        format!("SELECT {}", vec!["1"; n].join(" + "))
    }

    #[tokio::test]
    async fn shallow_statements_plan() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::builtin());
        let planned = plan(request(ctx), chain(100), Duration::from_secs(60)).await;
        assert!(matches!(planned, Ok(Planned::Query { fragments: None, .. })));
    }

    #[tokio::test]
    async fn deep_statements_are_refused_not_crashed() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::builtin());
        let e = plan(request(ctx), chain(10_000), Duration::from_secs(60)).await.err().expect("refused");
        assert_eq!(e.error_name, "SYNTAX_ERROR", "{e:?}");
        assert!(e.message.contains("limit of 500"), "{}", e.message);
    }

    /// Under `single_task_max_rows` the whole plan is one worker stage of one task, its
    /// repartitions kept inside; over it (or at 0) the plan is cut into stages.
    #[tokio::test]
    async fn small_queries_run_as_one_task_and_larger_ones_are_cut() {
        use crate::plan::fragmenter::remote_sources;
        use datafusion::physical_plan::repartition::RepartitionExec;
        fn repartitions(p: &Arc<dyn ExecutionPlan>) -> usize {
            usize::from((p.as_ref() as &dyn std::any::Any).is::<RepartitionExec>())
                + p.children().into_iter().map(repartitions).sum::<usize>()
        }
        // tiny: 1,500 customers and 15,000 orders are read.
        let sql = "SELECT c_mktsegment, count(*) FROM customer JOIN orders ON c_custkey = o_custkey \
                   GROUP BY c_mktsegment";
        let planned = |max: usize| async move {
            let ctx =
                session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::builtin());
            let r = PlanRequest { single_task_max_rows: max, ..request(ctx) };
            match plan(r, sql.to_string(), Duration::from_secs(60)).await {
                Ok(Planned::Query { fragments: Some(f), .. }) => f,
                _ => panic!("a distributed plan"),
            }
        };
        let one = planned(16_500).await;
        assert_eq!(one.fragments.len(), 2, "the root and one worker stage");
        let stage = &one.fragments[1];
        assert_eq!((stage.partitions, task_count(stage, 3)), (1, 1), "one partition, one task");
        assert!(stage.has_scan && stage.inputs.is_empty());
        let mut sources = std::collections::BTreeSet::new();
        remote_sources(&stage.plan, &mut sources);
        assert!(sources.is_empty(), "no exchange inside: {sources:?}");
        assert!(repartitions(&stage.plan) > 0, "the single-node plan's repartitions stay in the task");
        // One row more than the limit, or the limit 0: stages and exchanges.
        for max in [16_499, 0] {
            let cut = planned(max).await;
            assert!(cut.fragments.len() > 2, "limit {max}: {} fragments", cut.fragments.len());
            assert!(cut.fragments.iter().all(|f| repartitions(&f.plan) <= 1), "limit {max}: cut at every repartition");
        }
    }

    #[tokio::test]
    async fn small_build_scans_are_read_by_each_task_instead_of_broadcast() {
        use crate::plan::fragmenter::FragmentOutput;
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::builtin());
        // tiny: 100 suppliers, the build side; 80,000 partsupp rows, the probe side.
        let sql = "SELECT s_name, ps_availqty FROM supplier JOIN partsupp ON s_suppkey = ps_suppkey".to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let outputs: Vec<FragmentOutput> = f.fragments.iter().map(|fr| fr.output).collect();
        assert_eq!(outputs.len(), 2, "the root and one stage that scans both tables: {outputs:?}");
        assert!(f.fragments[1].inputs.is_empty() && f.fragments[1].has_scan, "{:?}", f.fragments[1].inputs);
        // At 0B the join repartitions both sides: the supplier scan is a stage again.
        let props = SessionProperties { join_max_broadcast_table_size: 0, ..Default::default() };
        let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::builtin());
        let sql = "SELECT s_name, ps_availqty FROM supplier JOIN partsupp ON s_suppkey = ps_suppkey".to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        assert!(f.fragments.len() > 2, "{:?}", f.fragments.iter().map(|fr| fr.output).collect::<Vec<_>>());
    }

    /// A broadcast join's stage waits for its build; the stages feeding its probe side
    /// do not (they fill their buffers meanwhile). A partitioned join's probe-side
    /// producers wait for its build when they gather state (see
    /// `partitioned_probe_stages_wait_only_when_they_gather_state`).
    #[tokio::test]
    async fn only_the_stage_of_a_broadcast_join_waits_for_its_build() {
        use crate::plan::DependencyKind::{BroadcastJoinBuild, PartitionedJoinBuild};
        let sql = include_str!("../../queries/tpch/q11.sql").trim().trim_end_matches(';').to_string();
        // DataFusion's join order: `early_filter_rewrites` joins `nation` with
        // `supplier` first, and that small join is then broadcast too.
        let datafusion_order = SessionProperties { early_filter_rewrites: false, ..Default::default() };
        let ctx = session_context(&SessionSpec::default(), &datafusion_order, 2, &Connectors::builtin());
        let Ok(Planned::Query { fragments: Some(f), .. }) =
            plan(request(ctx), sql.clone(), Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let deps = f.dependencies();
        // q11's scalar subquery is the build of a join whose probe side is another
        // stage's aggregation.
        let (build, join) = deps.iter().find(|d| d.2 == BroadcastJoinBuild).map(|d| (d.0, d.1)).expect("{deps:?}");
        let probe: Vec<usize> = f.fragments[join].inputs.iter().copied().filter(|i| *i != build).collect();
        assert!(!probe.is_empty(), "the join reads its probe side from a stage: {deps:?}");
        assert!(deps.iter().all(|d| d.2 != PartitionedJoinBuild || !probe.contains(&d.1)), "{deps:?}");
        let props = SessionProperties { join_max_broadcast_table_size: 0, ..datafusion_order };
        let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::builtin());
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        assert!(f.dependencies().iter().any(|d| d.2 == PartitionedJoinBuild), "{:?}", f.dependencies());
    }

    /// With every join partitioned, the stages feeding a join's probe side wait for its
    /// build only when they gather state; a stage that only scans and repartitions
    /// (q22's `orders`) starts at once. Both kinds occur over these queries.
    #[tokio::test]
    async fn partitioned_probe_stages_wait_only_when_they_gather_state() {
        use crate::plan::fragmenter::{remote_sources, streams_only};
        use crate::plan::DependencyKind::PartitionedJoinBuild;
        // DataFusion's join orders: under `early_filter_rewrites` (q11 joins `nation`
        // with `supplier` first) no probe-side stage of these queries gathers state.
        let props =
            SessionProperties { join_max_broadcast_table_size: 0, early_filter_rewrites: false, ..Default::default() };
        let (mut waiting, mut streaming_probes) = (0, 0);
        for q in [include_str!("../../queries/tpch/q11.sql"), include_str!("../../queries/tpch/q22.sql")] {
            let sql = q.trim().trim_end_matches(';').to_string();
            let ctx = session_context(&SessionSpec::default(), &props, 2, &Connectors::builtin());
            let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
            else {
                panic!("a distributed plan")
            };
            let deps = f.dependencies();
            for (_, probe, kind) in &deps {
                if *kind == PartitionedJoinBuild {
                    assert!(!streams_only(&f.fragments[*probe].plan), "fragment {probe} streams but waits: {deps:?}");
                    waiting += 1;
                }
            }
            // Stages that only stream and feed a partitioned join's probe side.
            for join in &f.fragments {
                let Some(hj) = find_partitioned_join(&join.plan) else { continue };
                let mut probe = std::collections::BTreeSet::new();
                remote_sources(hj.right(), &mut probe);
                for p in probe.into_iter().filter(|p| streams_only(&f.fragments[*p].plan)) {
                    assert!(deps.iter().all(|d| d.1 != p), "fragment {p} only streams but waits: {deps:?}");
                    streaming_probes += 1;
                }
            }
        }
        assert!(waiting > 0 && streaming_probes > 0, "{waiting} waiting, {streaming_probes} streaming probe stages");
    }

    /// A join whose probe side is an aggregation already partitioned on the join key
    /// (DataFusion alone builds on all of `orders` in every task): the build side is
    /// repartitioned on its key, not broadcast.
    #[tokio::test]
    async fn a_join_over_a_partitioned_probe_side_repartitions_its_build_side() {
        use crate::plan::fragmenter::FragmentOutput;
        use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
        fn join(p: &Arc<dyn ExecutionPlan>) -> Option<&HashJoinExec> {
            match (p.as_ref() as &dyn std::any::Any).downcast_ref::<HashJoinExec>() {
                Some(j) => Some(j),
                _ => p.children().into_iter().find_map(join),
            }
        }
        let spec = SessionSpec { schema: "sf0_1".into(), ..Default::default() };
        let ctx = session_context(&spec, &SessionProperties::default(), 4, &Connectors::builtin());
        let sql = "SELECT o_orderpriority, sum(q) FROM orders JOIN \
                   (SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_orderkey) ON o_orderkey = l_orderkey \
                   GROUP BY o_orderpriority"
            .to_string();
        let Ok(Planned::Query { fragments: Some(f), .. }) = plan(request(ctx), sql, Duration::from_secs(60)).await
        else {
            panic!("a distributed plan")
        };
        let join = f.fragments.iter().find_map(|fr| join(&fr.plan)).expect("a join");
        assert_eq!(*join.partition_mode(), PartitionMode::Partitioned);
        let mut build = std::collections::BTreeSet::new();
        crate::plan::fragmenter::remote_sources(join.left(), &mut build);
        let outputs: Vec<_> = build.iter().map(|s| f.fragments[*s].output).collect();
        assert!(
            !outputs.is_empty() && outputs.iter().all(|o| matches!(o, FragmentOutput::Repartition { .. })),
            "the build side comes through {outputs:?}"
        );
    }

    fn find_partitioned_join(
        plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> Option<&datafusion::physical_plan::joins::HashJoinExec> {
        use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
        match (plan.as_ref() as &dyn std::any::Any).downcast_ref::<HashJoinExec>() {
            Some(j) if *j.partition_mode() == PartitionMode::Partitioned => Some(j),
            _ => plan.children().into_iter().find_map(find_partitioned_join),
        }
    }

    #[tokio::test]
    async fn nested_parentheses_are_a_syntax_error() {
        let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &Connectors::builtin());
        let sql = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        let e = plan(request(ctx), sql, Duration::from_secs(60)).await.err().expect("refused");
        assert_eq!(e.error_name, "SYNTAX_ERROR", "{e:?}");
    }
}
