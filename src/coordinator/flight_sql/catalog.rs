//! Flight SQL's metadata calls, answered from the same catalogs a query of the
//! caller's plans against (the built-in ones, the configured ones, `system`) and
//! filtered by the same access rules as `SHOW CATALOGS` and `information_schema`:
//! `GetCatalogs`, `GetDbSchemas`, `GetTables` (with each table's Arrow schema as its
//! queries return it), `GetTableTypes`, and the static `GetSqlInfo` and
//! `GetXdbcTypeInfo`. Called by the service; owns nothing.

use std::sync::Arc;

use arrow_flight::sql::metadata::{
    GetCatalogsBuilder, SqlInfoData, SqlInfoDataBuilder, XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder,
};
use arrow_flight::sql::{
    CommandGetDbSchemas, CommandGetTables, Nullable, Searchable, SqlInfo, SqlNullOrdering, SqlSupportedCaseSensitivity,
    XdbcDataType,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;
use tonic::Status;

use super::results::flight_schema;
use crate::coordinator::execution::{access_check, query_context};
use crate::coordinator::planner::SessionSpec;
use crate::coordinator::planning::AccessCheck;
use crate::coordinator::CoordinatorState;
use crate::security::{Access, Allow};

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(format!("GENERIC_INTERNAL_ERROR: {e}"))
}

/// The caller's catalogs and the access rules that apply to them.
struct Catalogs {
    ctx: SessionContext,
    access: Option<AccessCheck>,
}

impl Catalogs {
    fn new(coord: &Arc<CoordinatorState>, session: &SessionSpec) -> Self {
        let ctx = query_context(coord, session, &Default::default(), 1);
        Catalogs { ctx, access: access_check(coord, &session.user) }
    }

    /// The catalogs the caller may use, sorted; only `only` when given.
    fn catalog_names(&self, only: Option<&str>) -> Vec<String> {
        let mut names = self.ctx.catalog_names();
        names.retain(|c| only.is_none_or(|o| o == c));
        if let Some(a) = &self.access {
            names.retain(|c| a.rules.catalog_access(&a.who, c) != Allow::None);
        }
        names.sort();
        names
    }

    /// A catalog's schemas the caller may read (with `information_schema`, as
    /// `SHOW SCHEMAS` lists it), sorted, those matching `pattern`.
    fn schema_names(&self, catalog: &str, pattern: Option<&str>) -> Vec<String> {
        let Some(c) = self.ctx.catalog(catalog) else { return Vec::new() };
        let mut names = c.schema_names();
        if !names.iter().any(|n| n == "information_schema") {
            names.push("information_schema".into());
        }
        names.retain(|s| pattern.is_none_or(|p| like(p, s)));
        if let Some(a) = &self.access {
            let readable = |s: &String| {
                a.check(&[Access { catalog: catalog.to_string(), schema: s.clone(), write: false }]).is_ok()
            };
            names.retain(readable);
        }
        names.sort();
        names
    }
}

/// SQL's `LIKE` with `\` escaping the next character, as Flight SQL's filter
/// patterns are read (arrow's `like`, which the answer builders apply after this
/// pre-filter, reads them so; JDBC clients escape the `_` of a name they look up).
fn like(pattern: &str, text: &str) -> bool {
    let mut re = String::from("(?s)^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => re.push_str(".*"),
            '_' => re.push('.'),
            '\\' => re.push_str(&regex::escape(&chars.next().unwrap_or('\\').to_string())),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).is_ok_and(|r| r.is_match(text))
}

pub fn catalogs(coord: &Arc<CoordinatorState>, session: &SessionSpec) -> Result<RecordBatch, Status> {
    let mut builder = GetCatalogsBuilder::new();
    for name in Catalogs::new(coord, session).catalog_names(None) {
        builder.append(name);
    }
    builder.build().map_err(internal)
}

pub fn schemas(
    coord: &Arc<CoordinatorState>,
    session: &SessionSpec,
    query: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let catalogs = Catalogs::new(coord, session);
    let pattern = query.db_schema_filter_pattern.clone();
    let only = query.catalog.clone();
    let mut builder = query.into_builder();
    for catalog in catalogs.catalog_names(only.as_deref()) {
        for schema in catalogs.schema_names(&catalog, pattern.as_deref()) {
            builder.append(&catalog, schema);
        }
    }
    builder.build().map_err(internal)
}

pub async fn tables(
    coord: &Arc<CoordinatorState>,
    session: &SessionSpec,
    query: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let catalogs = Catalogs::new(coord, session);
    let table_pattern = query.table_name_filter_pattern.clone();
    // The builder applies every filter of the command to the rows; the catalog and the
    // patterns are also applied here, before any table is opened.
    let mut builder = query.clone().into_builder();
    for catalog in catalogs.catalog_names(query.catalog.as_deref()) {
        let Some(c) = catalogs.ctx.catalog(&catalog) else { continue };
        for schema_name in catalogs.schema_names(&catalog, query.db_schema_filter_pattern.as_deref()) {
            let Some(schema) = c.schema(&schema_name) else { continue };
            let mut names = schema.table_names();
            names.retain(|t| table_pattern.as_deref().is_none_or(|p| like(p, t)));
            names.sort();
            for name in names {
                // A table that cannot be read now (a broken view, a file gone) is left
                // out, as `information_schema` leaves it out.
                let Ok(Some(table)) = schema.table(&name).await else { continue };
                let kind = match table.table_type() {
                    TableType::View => "VIEW",
                    TableType::Temporary => "LOCAL TEMPORARY",
                    TableType::Base => "TABLE",
                };
                let arrow = flight_schema(&table.schema());
                builder.append(&catalog, &schema_name, &name, kind, &arrow).map_err(internal)?;
            }
        }
    }
    builder.build().map_err(internal)
}

pub fn table_types() -> Result<RecordBatch, Status> {
    let mut builder = arrow_flight::sql::CommandGetTableTypes {}.into_builder();
    for t in ["TABLE", "VIEW"] {
        builder.append(t);
    }
    builder.build().map_err(internal)
}

/// What the server is and does, for `GetSqlInfo`.
pub fn sql_info() -> SqlInfoData {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "flotilla");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "59");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    // Transactions are Trino's statements (`START TRANSACTION`), not Flight SQL's.
    b.append(SqlInfo::FlightSqlServerTransaction, 0i32);
    b.append(SqlInfo::FlightSqlServerCancel, true);
    b.append(SqlInfo::FlightSqlServerBulkIngestion, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, true);
    b.append(SqlInfo::SqlDdlTable, true);
    b.append(SqlInfo::SqlIdentifierCase, SqlSupportedCaseSensitivity::SqlCaseSensitivityLowercase as i32);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(SqlInfo::SqlQuotedIdentifierCase, SqlSupportedCaseSensitivity::SqlCaseSensitivityCaseInsensitive as i32);
    b.append(SqlInfo::SqlNullOrdering, SqlNullOrdering::SqlNullsSortedAtEnd as i32);
    b.append(SqlInfo::SqlAllTablesAreSelectable, false);
    b.build().expect("the server's SQL info is well formed")
}

/// The SQL types, for `GetXdbcTypeInfo` (JDBC's and ODBC's type list).
pub fn xdbc_types() -> XdbcTypeInfoData {
    let mut b = XdbcTypeInfoDataBuilder::new();
    // Name, type, column size, literal prefix, case sensitive.
    type SqlType = (&'static str, XdbcDataType, Option<i32>, Option<&'static str>, bool);
    let types: [SqlType; 13] = [
        ("boolean", XdbcDataType::XdbcBit, Some(1), None, false),
        ("tinyint", XdbcDataType::XdbcTinyint, Some(3), None, false),
        ("smallint", XdbcDataType::XdbcSmallint, Some(5), None, false),
        ("integer", XdbcDataType::XdbcInteger, Some(10), None, false),
        ("bigint", XdbcDataType::XdbcBigint, Some(19), None, false),
        ("real", XdbcDataType::XdbcReal, Some(24), None, false),
        ("double", XdbcDataType::XdbcDouble, Some(53), None, false),
        ("decimal", XdbcDataType::XdbcDecimal, Some(38), None, false),
        ("varchar", XdbcDataType::XdbcVarchar, None, Some("'"), true),
        ("varbinary", XdbcDataType::XdbcVarbinary, None, Some("X'"), false),
        ("date", XdbcDataType::XdbcDate, Some(10), Some("DATE '"), false),
        ("time", XdbcDataType::XdbcTime, Some(18), Some("TIME '"), false),
        ("timestamp", XdbcDataType::XdbcTimestamp, Some(29), Some("TIMESTAMP '"), false),
    ];
    for (name, data_type, size, prefix, case_sensitive) in types {
        let numeric = size.is_some() && prefix.is_none() && name != "boolean";
        b.append(XdbcTypeInfo {
            type_name: name.to_string(),
            data_type,
            column_size: size,
            literal_prefix: prefix.map(str::to_string),
            literal_suffix: prefix.map(|_| "'".to_string()),
            create_params: match name {
                "decimal" => Some(vec!["precision".into(), "scale".into()]),
                "varchar" => Some(vec!["length".into()]),
                _ => None,
            },
            nullable: Nullable::NullabilityNullable,
            case_sensitive,
            searchable: Searchable::Full,
            unsigned_attribute: numeric.then_some(false),
            fixed_prec_scale: name == "decimal",
            auto_increment: numeric.then_some(false),
            local_type_name: Some(name.to_string()),
            minimum_scale: (name == "decimal").then_some(0),
            maximum_scale: (name == "decimal").then_some(38),
            sql_data_type: data_type,
            datetime_subcode: None,
            num_prec_radix: numeric.then_some(if name == "decimal" { 10 } else { 2 }),
            interval_precision: None,
        });
    }
    b.build().expect("the server's type list is well formed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_patterns_are_like_with_backslash_escapes() {
        assert!(like("my\\_table", "my_table"));
        assert!(!like("my\\_table", "myxtable"));
        assert!(like("100\\%", "100%"));
        assert!(!like("100\\%", "1000"));
        assert!(like("line%", "lineitem"));
        assert!(like("s_1", "sf1"));
        assert!(!like("s_1", "sf10"));
        assert!(like("a.b", "a.b"));
        assert!(!like("a.b", "axb"));
        assert!(like("%", ""));
    }

    #[test]
    fn static_answers_build() {
        let info = sql_info();
        let batch = info.record_batch([SqlInfo::FlightSqlServerName as u32]).unwrap();
        assert_eq!(batch.num_rows(), 1);
        let types = xdbc_types();
        assert_eq!(types.record_batch(None).unwrap().num_rows(), 13);
        assert_eq!(types.record_batch(Some(XdbcDataType::XdbcBigint as i32)).unwrap().num_rows(), 1);
    }
}
