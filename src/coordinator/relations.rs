//! Statements on tables and views that DataFusion does not plan, kept in a catalog's
//! metastore: `ALTER TABLE|VIEW ... RENAME TO`, `COMMENT ON TABLE|VIEW|COLUMN`, and
//! Trino's clauses of `CREATE VIEW` (`COMMENT '...'`, `SECURITY DEFINER|INVOKER`),
//! which are taken off the statement before DataFusion plans the rest. The planning
//! phase (`planning::plan_here`) calls `take_view_clauses` on the tokens, then `parse`
//! and `run` on the parsed statement (`ALTER VIEW ... RENAME TO` is parsed as `ALTER
//! TABLE ... RENAME TO` by the dialect's `view_rename`).

use std::sync::Arc;

use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::logical_expr::{DdlStatement, LogicalPlan, TableType};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, CommentObject, ObjectName, ObjectNamePart, RenameTableNameKind, Statement,
};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::planner::{planning_error, QueryError};
use super::planning::AccessCheck;
use crate::connector::metastore::{CommentTarget, Metastore, TableEntry};
use crate::connector::Connectors;
use crate::error_code::ErrorCode;
use crate::security::Access;

/// `SECURITY` and `COMMENT` of a `CREATE VIEW`, and its query as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ViewClauses {
    /// `DEFINER` (Trino's default) or `INVOKER`.
    pub security: String,
    /// The statement wrote a `SECURITY` clause (rather than taking the default).
    pub security_written: bool,
    pub comment: Option<String>,
    /// The text after `AS`.
    pub query: String,
}

fn word_is(t: &Token, w: &str) -> bool {
    matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
}

/// Positions of the tokens that are not white space or comments.
fn significant(tokens: &[TokenWithSpan]) -> Vec<usize> {
    (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_) | Token::EOF)).collect()
}

/// The position (among the significant tokens) after `CREATE [OR REPLACE] <what>`,
/// when the statement starts so.
fn after_create<'a>(at: &dyn Fn(usize) -> Option<&'a Token>, what: &str) -> Option<usize> {
    if !at(0).is_some_and(|t| word_is(t, "create")) {
        return None;
    }
    let mut k = 1;
    if at(k).is_some_and(|t| word_is(t, "or")) && at(k + 1).is_some_and(|t| word_is(t, "replace")) {
        k += 2;
    }
    at(k).is_some_and(|t| word_is(t, what)).then_some(k + 1)
}

/// Past a name's words and periods from `k`.
fn past_name<'a>(at: &dyn Fn(usize) -> Option<&'a Token>, mut k: usize) -> usize {
    while at(k).is_some_and(|t| matches!(t, Token::Word(_))) {
        k += 1;
        if !at(k).is_some_and(|t| matches!(t, Token::Period)) {
            break;
        }
        k += 1;
    }
    k
}

/// Trino's clauses of `CREATE [OR REPLACE] VIEW name [COMMENT '...'] [SECURITY ...] AS
/// query`, taken off the statement's tokens, with the view's query as written in
/// `sql`, the text the tokens were read from; None for any other statement.
pub fn take_view_clauses(tokens: &mut Vec<TokenWithSpan>, sql: &str) -> Option<Result<ViewClauses, QueryError>> {
    let sig = significant(tokens);
    let at = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    let mut k = past_name(&at, after_create(&at, "view")?);
    let mut clauses =
        ViewClauses { security: "DEFINER".into(), security_written: false, comment: None, query: String::new() };
    let mut removed = Vec::new();
    loop {
        match (at(k), at(k + 1)) {
            (Some(c), Some(Token::SingleQuotedString(text))) if word_is(c, "comment") => {
                clauses.comment = Some(text.clone());
            }
            (Some(s), Some(mode)) if word_is(s, "security") => {
                if !(word_is(mode, "definer") || word_is(mode, "invoker")) {
                    let m = format!("expected SECURITY DEFINER or SECURITY INVOKER, got SECURITY {mode}");
                    return Some(Err(QueryError::new(ErrorCode::SyntaxError, m)));
                }
                clauses.security = mode.to_string().to_uppercase();
                clauses.security_written = true;
            }
            _ => break,
        }
        removed.extend([sig[k], sig[k + 1]]);
        k += 2;
    }
    if at(k).is_some_and(|t| word_is(t, "as")) {
        // The text after `AS`, as written: literals and quoted names keep their quotes.
        let after = crate::util::SqlText::new(sql).offset(tokens[sig[k]].span.end);
        clauses.query = sql[after..].trim().trim_end_matches(';').trim_end().to_string();
    }
    for i in removed.into_iter().rev() {
        tokens.remove(i);
    }
    Some(Ok(clauses))
}

/// Trino's `CREATE TABLE name [(columns)] COMMENT '...' ...`: the comment, taken off
/// the statement's tokens; None for any other statement. (Trino writes it before
/// `WITH`, where the parser takes no comment.)
pub fn take_table_comment(tokens: &mut Vec<TokenWithSpan>) -> Option<String> {
    let sig = significant(tokens);
    let at = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    let mut k = after_create(&at, "table")?;
    if at(k).is_some_and(|t| word_is(t, "if")) {
        k += 3;
    }
    k = past_name(&at, k);
    // The column list.
    if at(k).is_some_and(|t| matches!(t, Token::LParen)) {
        let mut depth = 0usize;
        while let Some(t) = at(k) {
            match t {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                _ => {}
            }
            k += 1;
            if depth == 0 {
                break;
            }
        }
    }
    let (Some(c), Some(Token::SingleQuotedString(text))) = (at(k), at(k + 1)) else { return None };
    if !word_is(c, "comment") {
        return None;
    }
    let comment = text.clone();
    let (from, to) = (sig[k], sig[k + 1]);
    tokens.drain(from..=to);
    Some(comment)
}

/// A statement this module runs.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationStatement {
    Rename { if_exists: bool, from: ObjectName, to: ObjectName },
    Comment { object: CommentObject, name: ObjectName, comment: Option<String> },
}

pub fn parse(statement: &DFStatement) -> Option<Result<RelationStatement, QueryError>> {
    let DFStatement::Statement(s) = statement else { return None };
    match s.as_ref() {
        Statement::AlterTable(alter) => match alter.operations.as_slice() {
            [AlterTableOperation::RenameTable {
                table_name: RenameTableNameKind::To(to) | RenameTableNameKind::As(to),
            }] => Some(Ok(RelationStatement::Rename {
                if_exists: alter.if_exists,
                from: alter.name.clone(),
                to: to.clone(),
            })),
            _ => None,
        },
        Statement::Comment { object_type, object_name, comment, .. } => match object_type {
            CommentObject::Table | CommentObject::View | CommentObject::Column => {
                Some(Ok(RelationStatement::Comment {
                    object: *object_type,
                    name: object_name.clone(),
                    comment: comment.clone(),
                }))
            }
            other => {
                Some(Err(QueryError::new(ErrorCode::NotSupported, format!("COMMENT ON {other} is not supported"))))
            }
        },
        _ => None,
    }
}

/// A name resolved against the session's catalog and schema.
#[derive(Debug, Clone, PartialEq)]
struct Resolved {
    catalog: String,
    schema: String,
    name: String,
}

impl std::fmt::Display for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.catalog, self.schema, self.name)
    }
}

fn resolve(name: &ObjectName, catalog: &str, schema: &str) -> Result<Resolved, QueryError> {
    let r =
        datafusion::sql::planner::object_name_to_table_reference(name.clone(), true).map_err(|e| planning_error(&e))?;
    let (c, s) = (r.catalog().unwrap_or(catalog).to_string(), r.schema().unwrap_or(schema).to_string());
    Ok(Resolved { catalog: c, schema: s, name: r.table().to_string() })
}

/// Where the statement's relations are: the session's context and defaults.
pub struct Scope<'a> {
    pub ctx: &'a SessionContext,
    pub connectors: &'a Connectors,
    pub catalog: &'a str,
    pub schema: &'a str,
    pub access: Option<&'a AccessCheck>,
}

impl Scope<'_> {
    fn schema_of(&self, r: &Resolved) -> Result<Arc<dyn SchemaProvider>, QueryError> {
        let catalog = self.ctx.catalog(&r.catalog).ok_or_else(|| {
            QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{}' does not exist", r.catalog))
        })?;
        catalog.schema(&r.schema).ok_or_else(|| {
            QueryError::new(ErrorCode::SchemaNotFound, format!("Schema '{}.{}' does not exist", r.catalog, r.schema))
        })
    }

    async fn relation(&self, r: &Resolved) -> Result<Option<Arc<dyn TableProvider>>, QueryError> {
        self.schema_of(r)?.table(&r.name).await.map_err(|e| planning_error(&e))
    }

    /// The metastore of the catalog, which must be one of files.
    fn metastore(&self, r: &Resolved, what: &str) -> Result<&Arc<Metastore>, QueryError> {
        let connector = self.connectors.get(&r.catalog).ok_or_else(|| {
            QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{}' does not exist", r.catalog))
        })?;
        connector.files().and_then(|f| f.metastore()).ok_or_else(|| {
            let m = format!(
                "{what} is not supported in catalog '{}' (connector {})",
                r.catalog,
                connector.connector_name()
            );
            QueryError::new(ErrorCode::NotSupported, m)
        })
    }

    fn check_write(&self, relations: &[&Resolved]) -> Result<(), QueryError> {
        let Some(access) = self.access else { return Ok(()) };
        let accesses: Vec<Access> = relations
            .iter()
            .map(|r| Access { catalog: r.catalog.clone(), schema: r.schema.clone(), write: true })
            .collect();
        access.check(&accesses)
    }
}

fn recording_error(m: &Metastore, e: std::io::Error) -> QueryError {
    QueryError::new(ErrorCode::GenericInternalError, format!("cannot update {}: {e}", m.describe()))
}

/// Runs the statement; its `updateType`.
pub async fn run(statement: &RelationStatement, scope: &Scope<'_>) -> Result<&'static str, QueryError> {
    match statement {
        RelationStatement::Rename { if_exists, from, to } => {
            let renamed = rename(scope, from, to, *if_exists).await?;
            // Views read tables by name: one over either name now reads another table.
            super::ddl::rebind_views(scope.connectors).await;
            Ok(renamed)
        }
        RelationStatement::Comment { object, name, comment } => set_comment(scope, *object, name, comment).await,
    }
}

async fn rename(
    scope: &Scope<'_>,
    from: &ObjectName,
    to: &ObjectName,
    if_exists: bool,
) -> Result<&'static str, QueryError> {
    let from = resolve(from, scope.catalog, scope.schema)?;
    // A bare new name stays in the old one's schema (dbt renames with full names).
    let to = match to.0.len() {
        1 => resolve(to, &from.catalog, &from.schema)?,
        _ => resolve(to, scope.catalog, scope.schema)?,
    };
    scope.check_write(&[&from, &to])?;
    // A write into either name commits before the rename or after it, never across.
    let _tables = super::table_locks::lock([from.to_string(), to.to_string()]).await;
    let Some(relation) = scope.relation(&from).await? else {
        if if_exists {
            return Ok("RENAME TABLE");
        }
        return Err(QueryError::new(ErrorCode::TableNotFound, format!("Table '{from}' does not exist")));
    };
    let view = relation.table_type() == TableType::View;
    let kind = if view { "View" } else { "Table" };
    if to.catalog != from.catalog {
        let m = format!("{kind} rename across catalogs is not supported ('{from}' to '{to}')");
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let m = scope.metastore(&from, "Renaming")?;
    let target = scope.schema_of(&to)?;
    if target.table_exist(&to.name) {
        return Err(QueryError::new(ErrorCode::TableAlreadyExists, format!("Target table '{to}' already exists")));
    }
    let definition = match m.table(&from.schema, &from.name) {
        Some(entry) => Some(renamed_definition(scope.ctx, &entry, &to)?),
        None => None,
    };
    let recorded =
        m.rename((&from.schema, &from.name), (&to.schema, &to.name), definition).map_err(|e| recording_error(m, e))?;
    if !recorded {
        let m = format!("{kind} '{from}' is not kept in the catalog's metastore and cannot be renamed");
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let source = scope.schema_of(&from)?;
    source.deregister_table(&from.name).map_err(|e| planning_error(&e))?;
    target.register_table(to.name.clone(), relation).map_err(|e| planning_error(&e))?;
    Ok(if view { "RENAME VIEW" } else { "RENAME TABLE" })
}

/// The entry's `CREATE EXTERNAL TABLE`, under its new name.
fn renamed_definition(ctx: &SessionContext, entry: &TableEntry, to: &Resolved) -> Result<String, QueryError> {
    let LogicalPlan::Ddl(DdlStatement::CreateExternalTable(mut create)) =
        entry.plan(&ctx.task_ctx()).map_err(|e| planning_error(&e))?
    else {
        return Err(QueryError::new(
            ErrorCode::GenericInternalError,
            "a metastore table is not a CREATE EXTERNAL TABLE",
        ));
    };
    create.name = TableReference::full(to.catalog.as_str(), to.schema.as_str(), to.name.as_str());
    Ok(TableEntry::new(&to.schema, &create, entry.managed).map_err(|e| planning_error(&e))?.definition)
}

async fn set_comment(
    scope: &Scope<'_>,
    object: CommentObject,
    name: &ObjectName,
    comment: &Option<String>,
) -> Result<&'static str, QueryError> {
    let (relation_name, target) = match object {
        CommentObject::Column => {
            let mut parts = name.0.clone();
            let column = match parts.pop() {
                Some(ObjectNamePart::Identifier(i)) if i.quote_style.is_some() => i.value,
                Some(ObjectNamePart::Identifier(i)) => i.value.to_lowercase(),
                _ => String::new(),
            };
            if parts.is_empty() || column.is_empty() {
                return Err(QueryError::new(ErrorCode::SyntaxError, "COMMENT ON COLUMN needs table.column"));
            }
            (ObjectName(parts), CommentTarget::Column(column))
        }
        _ => (name.clone(), CommentTarget::Relation),
    };
    let r = resolve(&relation_name, scope.catalog, scope.schema)?;
    scope.check_write(&[&r])?;
    let Some(relation) = scope.relation(&r).await? else {
        return Err(QueryError::new(ErrorCode::TableNotFound, format!("Table '{r}' does not exist")));
    };
    if let CommentTarget::Column(c) = &target {
        if relation.schema().field_with_name(c).is_err() {
            return Err(QueryError::new(ErrorCode::ColumnNotFound, format!("Column '{c}' does not exist in '{r}'")));
        }
    }
    let m = scope.metastore(&r, "COMMENT ON")?;
    let found = m.set_comment(&r.schema, &r.name, &target, comment.clone()).map_err(|e| recording_error(m, e))?;
    if !found {
        let m = format!("'{r}' is not kept in the catalog's metastore: it takes no comment");
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    Ok("COMMENT")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::coordinator::dialect::tokenize;

    /// The clauses of `sql`, and its tokens without them as text.
    fn view(sql: &str) -> Option<Result<(String, ViewClauses), QueryError>> {
        let mut tokens = tokenize(sql).unwrap();
        let clauses = take_view_clauses(&mut tokens, sql)?;
        Some(clauses.map(|c| (tokens.iter().map(|t| t.token.to_string()).collect(), c)))
    }

    fn table_comment(sql: &str) -> Option<(String, String)> {
        let mut tokens = tokenize(sql).unwrap();
        let comment = take_table_comment(&mut tokens)?;
        Some((tokens.iter().map(|t| t.token.to_string()).collect(), comment))
    }

    #[test]
    fn trino_view_clauses_are_taken_off() {
        let (sql, c) = view("create or replace view \"f\".\"s\".\"v\" COMMENT 'it''s' security invoker as select 1")
            .unwrap()
            .unwrap();
        assert_eq!(sql, "create or replace view \"f\".\"s\".\"v\"     as select 1");
        let query = "select 1".to_string();
        assert_eq!(
            c,
            ViewClauses { security: "INVOKER".into(), security_written: true, comment: Some("it's".into()), query }
        );
        let (sql, c) = view("CREATE VIEW v AS SELECT 'security definer'").unwrap().unwrap();
        assert_eq!((sql.as_str(), c.security.as_str()), ("CREATE VIEW v AS SELECT 'security definer'", "DEFINER"));
        assert!(view("CREATE VIEW v SECURITY nobody AS SELECT 1").unwrap().is_err());
        assert!(view("CREATE TABLE t AS SELECT 1").is_none());
    }

    /// The view's query is kept as written: a quote doubled in a literal or a name
    /// stays doubled (printing the tokens would undo it).
    #[test]
    fn the_view_query_keeps_its_text() {
        let sql = "CREATE VIEW v COMMENT 'c' AS SELECT 'it''s' AS \"a\"\"b\" FROM t;";
        let (_, c) = view(sql).unwrap().unwrap();
        assert_eq!(c.query, "SELECT 'it''s' AS \"a\"\"b\" FROM t");
    }

    #[test]
    fn table_comments_are_taken_off() {
        let sql = "create table \"l\".\"s\".\"t\" comment 'per customer' WITH (format = 'PARQUET') as (select 1)";
        let (rest, comment) = table_comment(sql).unwrap();
        assert_eq!(rest, "create table \"l\".\"s\".\"t\"  WITH (format = 'PARQUET') as (select 1)");
        assert_eq!(comment, "per customer");
        let (rest, _) = table_comment("CREATE TABLE t (a int COMMENT 'x') COMMENT 'y'").unwrap();
        assert_eq!(rest, "CREATE TABLE t (a int COMMENT 'x') ");
        assert!(table_comment("CREATE TABLE t AS SELECT 'comment'").is_none());
    }

    #[test]
    fn leading_comments_are_skipped() {
        let sql = "/* {\"app\": \"dbt\"} */\n-- model\n  create or replace view v security definer as select 1";
        let (_, c) = view(sql).unwrap().unwrap();
        assert_eq!((c.security.as_str(), c.query.as_str()), ("DEFINER", "select 1"));
        assert!(view("-- only a comment").is_none());
    }
}
