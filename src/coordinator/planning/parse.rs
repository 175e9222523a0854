//! A statement's text to the statement DataFusion plans: Trino's clauses the parser
//! does not read and no dialect hook reaches are taken out of the tokens first (`FOR
//! VERSION AS OF`, `CREATE VIEW`'s and `CREATE TABLE`'s comments and security), the text is parsed
//! in Trino's dialect with the session's values, its depth is bounded, and a `CREATE
//! TABLE`'s `WITH (...)` properties for a catalog of files or Iceberg are taken out
//! of the statement. Called by `planning::plan_here`.

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Visit, Visitor};

use super::{PlanRequest, MAX_EXPRESSION_DEPTH};
use crate::connector::Connectors;
use crate::coordinator::planner::{planning_error, QueryError};
use crate::coordinator::relations::ViewClauses;
use crate::error_code::ErrorCode;

/// The statement to plan, and what was taken out of it for flotilla to do.
pub(super) struct ParsedStatement {
    pub statement: DFStatement,
    /// `CREATE VIEW`'s `COMMENT` and `SECURITY`, kept for the view's metastore entry.
    pub view_clauses: Option<ViewClauses>,
    /// `CREATE TABLE`'s properties, for a table of files or of Iceberg.
    pub create: CreateProperties,
}

/// The `WITH (...)` properties (`(key in lower case, value)`) and comment of a
/// `CREATE TABLE` in a catalog whose connector writes: the connector reads them.
#[derive(Default)]
pub(super) struct CreateProperties {
    pub taken: Option<(TableProperties, Option<String>)>,
}

/// `WITH (...)` as written: (key in lower case, value).
pub(super) type TableProperties = Vec<(String, SqlExpr)>;

impl CreateProperties {
    pub fn any(&self) -> bool {
        self.taken.is_some()
    }
}

pub(super) fn parse(
    request: &PlanRequest,
    state: &datafusion::execution::SessionState,
    sql: &str,
) -> Result<ParsedStatement, QueryError> {
    let options = state.config().options();
    let normalize = options.sql_parser.enable_ident_normalization;
    let versioned = versioned_tables(sql, normalize, &request.connectors, state)?;
    let sql = versioned.as_deref().unwrap_or(sql);
    // Clauses taken off the tokens before the parser reads them, where no hook of the
    // parser reaches: `FOR VERSION AS OF` (above) follows a table name, where the
    // dialect has no hook (its own versioning reads Databricks' `VERSION AS OF`), and
    // it edits the text by its tokens' places, as the view's metastore entry keeps the
    // text; `CREATE VIEW`'s clauses sit between the name and `AS` of a statement
    // sqlparser parses itself, and the entry keeps its query as written, which the
    // parsed statement does not hold; `CREATE TABLE ... COMMENT` likewise (sqlparser
    // reads a comment there only in MySQL's places). The tokens read here are the
    // ones parsed.
    let mut tokens = crate::coordinator::dialect::tokenize(sql).map_err(|e| planning_error(&e))?;
    let view_clauses = crate::coordinator::relations::take_view_clauses(&mut tokens, sql).transpose()?;
    let table_comment = crate::coordinator::relations::take_table_comment(&mut tokens);
    let (catalog, _) = request.defaults();
    let session = session_values(state, &request.user, request.access.as_ref());
    let limit = options.sql_parser.recursion_limit.get();
    let mut statement =
        crate::coordinator::dialect::parse_tokens(tokens, limit, &session).map_err(|e| planning_error(&e))?;
    check_depth(&statement)?;
    let create = take_create_properties(&mut statement, &request.connectors, &catalog, normalize, table_comment)?;
    Ok(ParsedStatement { statement, view_clauses, create })
}

/// What the statement's session terms (`current_user`, ...) read: the planning
/// state's zone, catalog and schema, the user and their groups.
fn session_values(
    state: &datafusion::execution::SessionState,
    user: &str,
    access: Option<&super::AccessCheck>,
) -> crate::coordinator::dialect::SessionValues {
    let options = state.config().options();
    crate::coordinator::dialect::SessionValues {
        time_zone: options.execution.time_zone.clone().unwrap_or_else(|| "UTC".into()),
        user: Some(user.to_string()),
        catalog: Some(options.catalog.default_catalog.clone()),
        schema: Some(options.catalog.default_schema.clone()),
        groups: Some(access.map(|a| a.who.groups.iter().cloned().collect()).unwrap_or_default()),
    }
}

/// A `CREATE TABLE` in a catalog whose connector writes: its `WITH (...)` properties
/// (Trino's) are the connector's to read, DataFusion plans the rest.
fn take_create_properties(
    statement: &mut DFStatement,
    connectors: &Connectors,
    catalog: &str,
    normalize: bool,
    table_comment: Option<String>,
) -> Result<CreateProperties, QueryError> {
    use datafusion::sql::planner::object_name_to_table_reference;
    use datafusion::sql::sqlparser::ast::Statement;
    let mut create = CreateProperties::default();
    if let DFStatement::Statement(s) = statement {
        if let Statement::CreateTable(ct) = s.as_mut() {
            let name = object_name_to_table_reference(ct.name.clone(), normalize).map_err(|e| planning_error(&e))?;
            let writes = connectors.get(name.catalog().unwrap_or(catalog)).and_then(|c| c.writes());
            if writes.is_some() {
                create.taken = Some((take_with_properties(ct)?, table_comment.clone()));
            }
        }
    }
    if table_comment.is_some() && create.taken.is_none() {
        let m = "CREATE TABLE ... COMMENT: tables take comments only in catalogs of files";
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    Ok(create)
}

/// The `WITH (key = value, ...)` of a `CREATE TABLE`, taken off the statement so
/// that DataFusion plans the rest: (key in lower case, value) pairs.
fn take_with_properties(
    ct: &mut datafusion::sql::sqlparser::ast::CreateTable,
) -> Result<Vec<(String, SqlExpr)>, QueryError> {
    use datafusion::sql::sqlparser::ast::{CreateTableOptions, SqlOption};
    let options = match std::mem::take(&mut ct.table_options) {
        CreateTableOptions::None => return Ok(Vec::new()),
        CreateTableOptions::With(o) => o,
        other => {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table options '{other}': use WITH (...)")))
        }
    };
    options
        .into_iter()
        .map(|o| match o {
            SqlOption::KeyValue { key, value } => Ok((key.value.to_lowercase(), value)),
            o => Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{o}'"))),
        })
        .collect()
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
    let rewritten = time_travel::rewrite(sql, &crate::coordinator::dialect::TrinoDialect, normalize, &zone)
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
