//! Trino's metadata statements, answered by the coordinator the way Trino answers
//! them: `SHOW CATALOGS`, `SHOW SCHEMAS [FROM c]`, `SHOW TABLES [FROM [c.]s]`,
//! `DESCRIBE t` / `SHOW COLUMNS FROM t`, `SHOW SESSION`, `SHOW FUNCTIONS` (`show_functions`). DataFusion either lacks them or answers in
//! its own shape (Arrow type names, extra columns), which Trino's clients and BI tools
//! do not expect. Called by the query execution before planning.

use crate::error_code::ErrorCode;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::prelude::SessionContext;

use super::planner::{planning_error, QueryError, SessionSpec};
use super::planning::AccessCheck;
use crate::format::field_type;
use crate::security::Access;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataStatement {
    ShowCatalogs,
    ShowSchemas {
        catalog: Option<String>,
    },
    ShowTables {
        catalog: Option<String>,
        schema: Option<String>,
    },
    Describe {
        table: String,
    },
    /// The session properties with their values here, defaults and descriptions.
    ShowSession,
    /// The functions of the registry, optionally those whose name is `LIKE` a pattern.
    ShowFunctions {
        like: Option<super::show_functions::Like>,
    },
    /// `SHOW CREATE TABLE|VIEW name` (`show_create`).
    ShowCreate {
        name: String,
        view: bool,
    },
}

/// Recognizes a metadata statement; anything else is left to DataFusion.
pub fn parse(sql: &str) -> Option<MetadataStatement> {
    let words: Vec<&str> = sql.trim().trim_end_matches(';').split_whitespace().collect();
    let kw = |i: usize, w: &str| words.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
    let name = |i: usize| words.get(i).map(|w| w.trim_matches('"').to_string());
    let from = |i: usize| kw(i, "from") || kw(i, "in");
    if kw(0, "show") && kw(1, "functions") {
        let sql = sql.trim().trim_end_matches(';');
        let rest = &sql[sql.to_lowercase().find("functions")? + "functions".len()..];
        return match rest.trim().is_empty() {
            true => Some(MetadataStatement::ShowFunctions { like: None }),
            false => {
                super::show_functions::parse_like(rest).map(|l| MetadataStatement::ShowFunctions { like: Some(l) })
            }
        };
    }
    match words.len() {
        4 if kw(0, "show") && kw(1, "create") && (kw(2, "table") || kw(2, "view")) => {
            Some(MetadataStatement::ShowCreate { name: words[3].to_string(), view: kw(2, "view") })
        }
        2 if kw(0, "show") && kw(1, "catalogs") => Some(MetadataStatement::ShowCatalogs),
        2 if kw(0, "show") && kw(1, "session") => Some(MetadataStatement::ShowSession),
        2 if kw(0, "show") && kw(1, "schemas") => Some(MetadataStatement::ShowSchemas { catalog: None }),
        4 if kw(0, "show") && kw(1, "schemas") && from(2) => Some(MetadataStatement::ShowSchemas { catalog: name(3) }),
        2 if kw(0, "show") && kw(1, "tables") => Some(MetadataStatement::ShowTables { catalog: None, schema: None }),
        4 if kw(0, "show") && kw(1, "tables") && from(2) => {
            let target = name(3)?;
            Some(match target.split_once('.') {
                Some((c, s)) => {
                    MetadataStatement::ShowTables { catalog: Some(c.to_string()), schema: Some(s.to_string()) }
                }
                None => MetadataStatement::ShowTables { catalog: None, schema: Some(target) },
            })
        }
        2 if kw(0, "describe") || kw(0, "desc") => Some(MetadataStatement::Describe { table: name(1)? }),
        4 if kw(0, "show") && kw(1, "columns") && from(2) => Some(MetadataStatement::Describe { table: name(3)? }),
        _ => None,
    }
}

fn text_batch(columns: &[&str], rows: Vec<Vec<String>>) -> Result<RecordBatch, QueryError> {
    let schema =
        Arc::new(Schema::new(columns.iter().map(|c| Field::new(*c, DataType::Utf8, false)).collect::<Vec<_>>()));
    let arrays = (0..columns.len())
        .map(|i| Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r[i].as_str()))) as _)
        .collect();
    RecordBatch::try_new(schema, arrays).map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))
}

/// Answers a metadata statement from the planning context's catalogs.
pub async fn run(
    ctx: &SessionContext,
    connectors: &crate::connector::Connectors,
    spec: &SessionSpec,
    stmt: &MetadataStatement,
    access: Option<&AccessCheck>,
) -> Result<RecordBatch, QueryError> {
    let check_read = |table: &str| match access {
        Some(a) => {
            let t = datafusion::common::TableReference::from(table);
            let catalog = t.catalog().unwrap_or(&spec.catalog).to_string();
            a.check(&[Access { catalog, schema: t.schema().unwrap_or(&spec.schema).to_string(), write: false }])
        }
        None => Ok(()),
    };
    let catalog_named = |name: &str| {
        if let Some(a) = access {
            a.check(&[Access { catalog: name.to_string(), schema: String::new(), write: false }])?;
        }
        if let Some(failure) = connectors.get(name).and_then(|c| c.listing_failure()) {
            return Err(failure);
        }
        ctx.catalog(name)
            .ok_or_else(|| QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{name}' does not exist")))
    };
    match stmt {
        MetadataStatement::ShowSession => show_session(spec),
        MetadataStatement::ShowFunctions { like } => super::show_functions::show_functions(ctx, like.as_ref()),
        MetadataStatement::ShowCatalogs => {
            let mut names = ctx.catalog_names();
            // Catalogs the user may not use are not shown, as in Trino.
            if let Some(a) = access {
                names.retain(|c| a.rules.catalog_access(&a.who, c) != crate::security::Allow::None);
            }
            names.sort();
            text_batch(&["Catalog"], names.into_iter().map(|n| vec![n]).collect())
        }
        MetadataStatement::ShowSchemas { catalog } => {
            let c = catalog_named(catalog.as_deref().unwrap_or(&spec.catalog))?;
            let mut names = c.schema_names();
            if !names.iter().any(|n| n == "information_schema") {
                names.push("information_schema".into());
            }
            names.sort();
            text_batch(&["Schema"], names.into_iter().map(|n| vec![n]).collect())
        }
        MetadataStatement::ShowTables { catalog, schema } => {
            let cname = catalog.as_deref().unwrap_or(&spec.catalog);
            let sname = schema.as_deref().unwrap_or(&spec.schema);
            let s = catalog_named(cname)?.schema(sname).ok_or_else(|| {
                QueryError::new(ErrorCode::SchemaNotFound, format!("Schema '{cname}.{sname}' does not exist"))
            })?;
            let mut names = s.table_names();
            names.sort();
            text_batch(&["Table"], names.into_iter().map(|n| vec![n]).collect())
        }
        MetadataStatement::Describe { table } => {
            check_read(table)?;
            let provider = ctx.table_provider(table.as_str()).await.map_err(|e| planning_error(&e))?;
            let t = datafusion::common::TableReference::from(table.as_str());
            let comments = connectors
                .get(t.catalog().unwrap_or(&spec.catalog))
                .and_then(|c| c.files())
                .and_then(|f| f.metastore())
                .map(|m| m.column_comments(t.schema().unwrap_or(&spec.schema), t.table()))
                .unwrap_or_default();
            let rows = provider
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    let comment = comments.get(f.name()).cloned().unwrap_or_default();
                    vec![f.name().clone(), field_type(f), String::new(), comment]
                })
                .collect();
            text_batch(&["Column", "Type", "Extra", "Comment"], rows)
        }
        MetadataStatement::ShowCreate { name, view } => {
            check_read(name)?;
            let text = super::show_create::show_create(ctx, connectors, spec, name, *view).await?;
            text_batch(&[if *view { "Create View" } else { "Create Table" }], vec![vec![text]])
        }
    }
}

/// Trino's `SHOW SESSION`: each property's value in this session, its default, type
/// and description.
fn show_session(spec: &SessionSpec) -> Result<RecordBatch, QueryError> {
    let rows = crate::config::SESSION_PROPERTIES
        .iter()
        .map(|d| {
            let value = spec.properties.get(d.name).cloned().unwrap_or_else(|| d.default.to_string());
            vec![d.name.to_string(), value, d.default.to_string(), "varchar".to_string(), d.description.to_string()]
        })
        .collect();
    text_batch(&["Name", "Value", "Default", "Type", "Description"], rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MetadataStatement::*;

    #[test]
    fn statements_parse_as_trino_users_type_them() {
        assert_eq!(parse("SHOW CATALOGS"), Some(ShowCatalogs));
        assert_eq!(parse("show schemas from tpch;"), Some(ShowSchemas { catalog: Some("tpch".into()) }));
        assert_eq!(parse("SHOW TABLES"), Some(ShowTables { catalog: None, schema: None }));
        assert_eq!(
            parse("SHOW TABLES FROM tpch.sf1"),
            Some(ShowTables { catalog: Some("tpch".into()), schema: Some("sf1".into()) })
        );
        assert_eq!(parse("describe lineitem"), Some(Describe { table: "lineitem".into() }));
        assert_eq!(parse("SHOW COLUMNS FROM orders"), Some(Describe { table: "orders".into() }));
        assert_eq!(parse("show session"), Some(ShowSession));
        assert_eq!(parse("SHOW FUNCTIONS"), Some(ShowFunctions { like: None }));
        let like = Some(crate::coordinator::show_functions::Like { pattern: "array%".into(), escape: None });
        assert_eq!(parse("show functions like 'array%';"), Some(ShowFunctions { like }));
        assert_eq!(parse("show create view f.s.v"), Some(ShowCreate { name: "f.s.v".into(), view: true }));
        assert_eq!(parse("SELECT 1"), None);
        assert_eq!(parse("SHOW TABLES LIKE 'x'"), None);
    }
}
