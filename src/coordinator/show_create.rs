//! `SHOW CREATE TABLE` and `SHOW CREATE VIEW`, in Trino's shape: one row, one
//! column (`Create Table` / `Create View`), the statement that would make the
//! relation again, with its comments and, for a table of files, its `WITH`
//! properties. Called by `metadata::run`; reads the catalog and its metastore.

use crate::connector::view::as_view;
use datafusion::common::TableReference;
use datafusion::logical_expr::TableType;
use datafusion::prelude::SessionContext;

use super::planner::QueryError;
use crate::connector::Connectors;
use crate::error_code::ErrorCode;
use crate::format::field_type;

/// A string as a SQL literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The statement making `name` again; `view` says which was asked for.
pub async fn show_create(
    ctx: &SessionContext,
    connectors: &Connectors,
    full: &TableReference,
    view: bool,
) -> Result<String, QueryError> {
    let (catalog, schema, table) =
        (full.catalog().unwrap_or_default(), full.schema().unwrap_or_default(), full.table());
    let kind = if view { "View" } else { "Table" };
    let provider = match ctx.table_provider(full.clone()).await {
        Ok(p) => p,
        Err(_) => return Err(QueryError::new(ErrorCode::TableNotFound, format!("{kind} '{full}' does not exist"))),
    };
    let is_view = provider.table_type() == TableType::View && as_view(provider.as_ref()).is_some();
    if is_view != view {
        let (is, not) = if is_view { ("a view", "table") } else { ("a table", "view") };
        let m = format!("Relation '{full}' is {is}, not a {not}");
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let metastore = connectors.get(catalog).and_then(|c| c.files()).and_then(|f| f.metastore());
    if view {
        let entry = metastore.and_then(|m| m.view(schema, table));
        return Ok(match entry {
            Some(v) => {
                let comment = v.comment.as_deref().map(|c| format!(" COMMENT {}", literal(c))).unwrap_or_default();
                format!("CREATE VIEW {full}{comment} SECURITY {} AS\n{}", v.security, v.query)
            }
            // A view no metastore keeps (in a memory catalog): DataFusion's text.
            None => as_view(provider.as_ref())
                .and_then(|v| v.definition().cloned())
                .unwrap_or_else(|| format!("CREATE VIEW {full}")),
        });
    }
    let comments = metastore.map(|m| m.column_comments(schema, table)).unwrap_or_default();
    let columns: Vec<String> = provider
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let comment = comments.get(f.name()).map(|c| format!(" COMMENT {}", literal(c))).unwrap_or_default();
            let not_null = if f.is_nullable() { "" } else { " NOT NULL" };
            format!("   {} {}{not_null}{comment}", super::metadata::quoted(f.name()), field_type(f))
        })
        .collect();
    let mut text = format!("CREATE TABLE {full} (\n{}\n)", columns.join(",\n"));
    let entry = metastore.and_then(|m| m.table(schema, table));
    if let Some(c) = metastore.and_then(|m| m.comment(schema, table)) {
        text.push_str(&format!("\nCOMMENT {}", literal(&c)));
    }
    if let Some(e) = entry {
        let mut props = vec![format!("   format = {}", literal(&e.format.to_uppercase()))];
        if !e.partition_columns.is_empty() {
            let cols: Vec<String> = e.partition_columns.iter().map(|c| literal(c)).collect();
            props.push(format!("   partitioned_by = ARRAY[{}]", cols.join(", ")));
        }
        if !e.managed {
            props.push(format!("   external_location = {}", literal(&e.location)));
        }
        text.push_str(&format!("\nWITH (\n{}\n)", props.join(",\n")));
    }
    Ok(text)
}
