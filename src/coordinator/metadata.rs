//! Trino's metadata statements, answered by the coordinator the way Trino answers
//! them: `SHOW CATALOGS | SCHEMAS | TABLES | COLUMNS | SESSION` with their `LIKE`
//! filters, `DESCRIBE t`, `SHOW FUNCTIONS` (`show_functions`) and `SHOW CREATE`
//! (`show_create`). DataFusion either lacks them or
//! answers in its own shape (Arrow type names, extra columns), which Trino's clients
//! and BI tools do not expect. Parsed by `sql_parser`; run by the query execution.

use crate::error_code::ErrorCode;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::TableReference;
use datafusion::prelude::SessionContext;

use super::planner::{planning_error, QueryError, SessionSpec};
use super::planning::AccessCheck;
use super::sql_parser::Like;
use crate::format::field_type;
use crate::security::Access;

/// A statement answered from the catalogs (parsed by `sql_parser::show`).
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataStatement {
    ShowCatalogs {
        like: Option<Like>,
    },
    ShowSchemas {
        catalog: Option<String>,
        like: Option<Like>,
    },
    ShowTables {
        catalog: Option<String>,
        schema: Option<String>,
        like: Option<Like>,
    },
    /// `SHOW COLUMNS FROM t` and `DESCRIBE t`.
    ShowColumns {
        table: TableReference,
        like: Option<Like>,
    },
    /// The session properties with their values here, defaults and descriptions.
    ShowSession {
        like: Option<Like>,
    },
    /// The functions of the registry, optionally those whose name is `LIKE` a pattern.
    ShowFunctions {
        like: Option<Like>,
    },
    /// `SHOW CREATE SCHEMA|TABLE|VIEW name` (`show_create`).
    ShowCreate {
        kind: CreateKind,
        name: Vec<String>,
    },
}

/// What `SHOW CREATE` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateKind {
    Schema,
    Table,
    View,
}

pub(super) fn text_batch(columns: &[&str], rows: Vec<Vec<String>>) -> Result<RecordBatch, QueryError> {
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
    let scope = Scope { ctx, connectors, spec, access };
    match stmt {
        MetadataStatement::ShowSession { like } => show_session(spec, like.as_ref()),
        MetadataStatement::ShowFunctions { like } => super::show_functions::show_functions(ctx, like.as_ref()),
        MetadataStatement::ShowCatalogs { like } => {
            let mut names = ctx.catalog_names();
            // Catalogs the user may not use are not shown, as in Trino.
            if let Some(a) = access {
                names.retain(|c| a.rules.catalog_access(&a.who, c) != crate::security::Allow::None);
            }
            names.sort();
            text_batch(&["Catalog"], one_column(filtered(names, like.as_ref())?))
        }
        MetadataStatement::ShowSchemas { catalog, like } => {
            let c = scope.catalog(catalog.as_deref().unwrap_or(&spec.catalog))?;
            let mut names = c.schema_names();
            if !names.iter().any(|n| n == "information_schema") {
                names.push("information_schema".into());
            }
            names.sort();
            text_batch(&["Schema"], one_column(filtered(names, like.as_ref())?))
        }
        MetadataStatement::ShowTables { catalog, schema, like } => {
            let cname = catalog.as_deref().unwrap_or(&spec.catalog);
            let sname = schema.as_deref().unwrap_or(&spec.schema);
            let s = scope.catalog(cname)?.schema(sname).ok_or_else(|| {
                QueryError::new(ErrorCode::SchemaNotFound, format!("Schema '{cname}.{sname}' does not exist"))
            })?;
            let mut names = s.table_names();
            names.sort();
            text_batch(&["Table"], one_column(filtered(names, like.as_ref())?))
        }
        MetadataStatement::ShowColumns { table, like } => scope.show_columns(table, like.as_ref()).await,
        MetadataStatement::ShowCreate { kind: CreateKind::Schema, name } => {
            let (catalog, schema) = match name.as_slice() {
                [schema] => (spec.catalog.as_str(), schema.as_str()),
                [catalog, schema] => (catalog.as_str(), schema.as_str()),
                _ => return Err(QueryError::new(ErrorCode::SyntaxError, "a schema's name is [catalog.]schema")),
            };
            let found = scope.catalog(catalog)?.schema(schema).is_some() || schema == "information_schema";
            if !found {
                let m = format!("Schema '{catalog}.{schema}' does not exist");
                return Err(QueryError::new(ErrorCode::SchemaNotFound, m));
            }
            let text = format!("CREATE SCHEMA {}.{}", quoted(catalog), quoted(schema));
            text_batch(&["Create Schema"], vec![vec![text]])
        }
        MetadataStatement::ShowCreate { kind, name } => {
            let table = scope.qualified(&super::sql_parser::table_reference(name.clone())?);
            scope.check_read(&table)?;
            let view = *kind == CreateKind::View;
            let text = super::show_create::show_create(ctx, connectors, &table, view).await?;
            text_batch(&[if view { "Create View" } else { "Create Table" }], vec![vec![text]])
        }
    }
}

/// What a metadata statement reads, and who asks.
pub(super) struct Scope<'a> {
    pub ctx: &'a SessionContext,
    pub connectors: &'a crate::connector::Connectors,
    pub spec: &'a SessionSpec,
    pub access: Option<&'a AccessCheck>,
}

impl Scope<'_> {
    /// `table` with the session's catalog and schema where it names none.
    pub fn qualified(&self, table: &TableReference) -> TableReference {
        let catalog = table.catalog().unwrap_or(&self.spec.catalog);
        TableReference::full(catalog, table.schema().unwrap_or(&self.spec.schema), table.table())
    }

    pub fn check_read(&self, table: &TableReference) -> Result<(), QueryError> {
        let Some(a) = self.access else { return Ok(()) };
        let (catalog, schema) =
            (table.catalog().unwrap_or(&self.spec.catalog), table.schema().unwrap_or(&self.spec.schema));
        a.check(&[Access { catalog: catalog.to_string(), schema: schema.to_string(), write: false }])
    }

    /// The catalog `name`, if the user may see it and it lists.
    fn catalog(&self, name: &str) -> Result<Arc<dyn datafusion::catalog::CatalogProvider>, QueryError> {
        if let Some(a) = self.access {
            a.check(&[Access { catalog: name.to_string(), schema: String::new(), write: false }])?;
        }
        if let Some(failure) = self.connectors.get(name).and_then(|c| c.listing_failure()) {
            return Err(failure);
        }
        self.ctx
            .catalog(name)
            .ok_or_else(|| QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{name}' does not exist")))
    }

    /// Trino's `SHOW COLUMNS` (and `DESCRIBE`): name, type, extra, comment.
    async fn show_columns(&self, table: &TableReference, like: Option<&Like>) -> Result<RecordBatch, QueryError> {
        let table = self.qualified(table);
        self.check_read(&table)?;
        let provider = self.ctx.table_provider(table.clone()).await.map_err(|e| planning_error(&e))?;
        let comments = self
            .connectors
            .get(table.catalog().unwrap_or_default())
            .and_then(|c| c.files())
            .and_then(|f| f.metastore())
            .map(|m| m.column_comments(table.schema().unwrap_or_default(), table.table()))
            .unwrap_or_default();
        let mut rows = Vec::new();
        for f in provider.schema().fields() {
            if let Some(like) = like {
                if !like.matches(f.name())? {
                    continue;
                }
            }
            let comment = comments.get(f.name()).cloned().unwrap_or_default();
            rows.push(vec![f.name().clone(), field_type(f), String::new(), comment]);
        }
        text_batch(&["Column", "Type", "Extra", "Comment"], rows)
    }
}

/// `names` that match `like`.
fn filtered(names: Vec<String>, like: Option<&Like>) -> Result<Vec<String>, QueryError> {
    let Some(like) = like else { return Ok(names) };
    let mut kept = Vec::new();
    for n in names {
        if like.matches(&n)? {
            kept.push(n);
        }
    }
    Ok(kept)
}

fn one_column(names: Vec<String>) -> Vec<Vec<String>> {
    names.into_iter().map(|n| vec![n]).collect()
}

/// A name as Trino prints it: quoted only when it must be.
pub(super) fn quoted(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match plain {
        true => name.to_string(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// Trino's `SHOW SESSION`: each property's value in this session, its default, type
/// and description.
fn show_session(spec: &SessionSpec, like: Option<&Like>) -> Result<RecordBatch, QueryError> {
    let mut properties = Vec::new();
    for d in crate::config::SESSION_PROPERTIES.iter() {
        if like.map_or(Ok(true), |l| l.matches(d.name))? {
            properties.push(d);
        }
    }
    let rows = properties
        .into_iter()
        .map(|d| {
            let value = spec.properties.get(d.name).cloned().unwrap_or_else(|| d.default.to_string());
            vec![d.name.to_string(), value, d.default.to_string(), "varchar".to_string(), d.description.to_string()]
        })
        .collect();
    text_batch(&["Name", "Value", "Default", "Type", "Description"], rows)
}
