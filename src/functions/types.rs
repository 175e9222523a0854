//! Trino's types that DataFusion's SQL planner does not know, planned to Arrow
//! fields: `JSON` (a string field with the canonical `arrow.json` extension name),
//! `MAP(K, V)` and `TIME(p)`. The sessions' template (`connector`) installs it as the
//! type planner; DataFusion asks it first, also for the elements of `ARRAY(...)`.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, TimeUnit};
use datafusion::common::{not_impl_err, Result};
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast::{self, ArrayElemTypeDef, ExactNumberInfo};

use super::json::json_field;

#[derive(Debug, Default)]
pub struct TrinoTypes;

impl TypePlanner for TrinoTypes {
    fn plan_type_field(&self, sql_type: &ast::DataType) -> Result<Option<FieldRef>> {
        Ok(match sql_type {
            ast::DataType::JSON => Some(Arc::new(json_field(""))),
            ast::DataType::Map(key, value) => {
                let key = field(key)?.with_name("key").with_nullable(false);
                let value = field(value)?.with_name("value");
                let entries = Field::new("entries", DataType::Struct(Fields::from(vec![key, value])), false);
                Some(Arc::new(Field::new("", DataType::Map(Arc::new(entries), false), true)))
            }
            // Trino's `TIME(p)`: milliseconds up to 3 digits, then micro- and nanoseconds.
            ast::DataType::Time(Some(p), ast::TimezoneInfo::None) => {
                let data_type = match p {
                    0..=3 => DataType::Time32(TimeUnit::Millisecond),
                    4..=6 => DataType::Time64(TimeUnit::Microsecond),
                    _ => DataType::Time64(TimeUnit::Nanosecond),
                };
                Some(Arc::new(Field::new("", data_type, true)))
            }
            _ => None,
        })
    }
}

/// The field of a map's key or value type: planned here, or one of the plain types.
fn field(sql_type: &ast::DataType) -> Result<Field> {
    if let Some(f) = TrinoTypes.plan_type_field(sql_type)? {
        return Ok(f.as_ref().clone());
    }
    let data_type = match sql_type {
        ast::DataType::Array(ArrayElemTypeDef::AngleBracket(inner) | ArrayElemTypeDef::SquareBracket(inner, None)) => {
            DataType::List(Arc::new(field(inner)?.with_name("item")))
        }
        ast::DataType::Boolean | ast::DataType::Bool => DataType::Boolean,
        ast::DataType::TinyInt(_) => DataType::Int8,
        ast::DataType::SmallInt(_) => DataType::Int16,
        ast::DataType::Int(_) | ast::DataType::Integer(_) => DataType::Int32,
        ast::DataType::BigInt(_) => DataType::Int64,
        ast::DataType::Real | ast::DataType::Float(_) => DataType::Float32,
        ast::DataType::Double(_) | ast::DataType::DoublePrecision => DataType::Float64,
        ast::DataType::Varchar(_) | ast::DataType::Char(_) | ast::DataType::Text | ast::DataType::String(_) => {
            DataType::Utf8
        }
        ast::DataType::Varbinary(_) | ast::DataType::Bytea => DataType::Binary,
        ast::DataType::Date => DataType::Date32,
        ast::DataType::Timestamp(_, ast::TimezoneInfo::None) => DataType::Timestamp(TimeUnit::Millisecond, None),
        ast::DataType::Decimal(info) | ast::DataType::Numeric(info) => match info {
            ExactNumberInfo::PrecisionAndScale(p, s) => DataType::Decimal128(*p as u8, *s as i8),
            ExactNumberInfo::Precision(p) => DataType::Decimal128(*p as u8, 0),
            ExactNumberInfo::None => DataType::Decimal128(38, 0),
        },
        // A row inside a map: its fields named as the planner names a row's.
        ast::DataType::Struct(fields, _) => DataType::Struct(
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let name = match &f.field_name {
                        Some(n) if n.quote_style.is_some() => n.value.clone(),
                        Some(n) => n.value.to_lowercase(),
                        None => format!("c{i}"),
                    };
                    Ok(field(&f.field_type)?.with_name(name))
                })
                .collect::<Result<Fields>>()?,
        ),
        other => return not_impl_err!("the type {other} as a map's key or value"),
    };
    Ok(Field::new("", data_type, true))
}

/// Whether a row's fields are anonymous, as in `ROW(1, 'a')`: DataFusion names them
/// `c0`, `c1`, ... in order, where Trino gives them no name. A user's row whose fields
/// are literally named so is taken as anonymous too; DataFusion has no other mark.
pub fn anonymous_fields(fields: &Fields) -> bool {
    fields.iter().enumerate().all(|(i, f)| *f.name() == format!("c{i}"))
}
