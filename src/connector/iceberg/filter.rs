//! A query's filters as an Iceberg predicate, for iceberg-rust's scan planning to
//! drop manifests by partition values and data files by column bounds before any
//! file opens. Only what translates exactly is given to it: a comparison of a column
//! with a literal of the column's own type, IS [NOT] NULL, IN, and AND, OR, NOT of
//! those. A top-level conjunct that does not translate is left out (the predicate
//! then keeps more files, never fewer); inside OR and NOT everything must translate.
//! Pruning is a superset: the filters stay above the scan (`Inexact`).

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::Datum;

/// The conjunction of the filters that translate, or None when none does.
pub fn predicate(filters: &[Expr], schema: &Schema) -> Option<Predicate> {
    let mut conjuncts = Vec::new();
    for f in filters {
        for c in datafusion::logical_expr::utils::split_conjunction(f) {
            if let Some(p) = exact(c, schema) {
                conjuncts.push(p);
            }
        }
    }
    conjuncts.into_iter().reduce(Predicate::and)
}

/// `expr` as a predicate selecting exactly the rows it selects, or None.
fn exact(expr: &Expr, schema: &Schema) -> Option<Predicate> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
            Some(exact(left, schema)?.and(exact(right, schema)?))
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            Some(exact(left, schema)?.or(exact(right, schema)?))
        }
        Expr::Not(inner) => Some(!exact(inner, schema)?),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, literal, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, v, *op),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, v, op.swap()?),
                _ => return None,
            };
            let (reference, datum) = operand(&column.name, literal, schema)?;
            Some(match op {
                Operator::Eq => reference.equal_to(datum),
                Operator::NotEq => reference.not_equal_to(datum),
                Operator::Lt => reference.less_than(datum),
                Operator::LtEq => reference.less_than_or_equal_to(datum),
                Operator::Gt => reference.greater_than(datum),
                Operator::GtEq => reference.greater_than_or_equal_to(datum),
                _ => return None,
            })
        }
        Expr::IsNull(inner) => Some(Reference::new(column_of(inner, schema)?).is_null()),
        Expr::IsNotNull(inner) => Some(Reference::new(column_of(inner, schema)?).is_not_null()),
        Expr::InList(list) => {
            let name = column_of(&list.expr, schema)?;
            let datums = list
                .list
                .iter()
                .map(|e| match e {
                    Expr::Literal(v, _) => operand(name, v, schema).map(|(_, d)| d),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            let reference = Reference::new(name);
            Some(if list.negated { reference.is_not_in(datums) } else { reference.is_in(datums) })
        }
        _ => None,
    }
}

/// The name of a column `expr` is, when the table has it.
fn column_of<'a>(expr: &'a Expr, schema: &Schema) -> Option<&'a str> {
    match expr {
        Expr::Column(c) if schema.field_with_name(&c.name).is_ok() => Some(&c.name),
        _ => None,
    }
}

/// A column and a literal of exactly the column's type as Iceberg's reference and
/// datum. Floating-point columns are left out: their bounds say nothing of NaN in
/// the way DataFusion compares NaN.
fn operand(name: &str, value: &ScalarValue, schema: &Schema) -> Option<(Reference, Datum)> {
    let field = schema.field_with_name(name).ok()?;
    if &value.data_type() != field.data_type() || value.is_null() {
        return None;
    }
    let datum = match (field.data_type(), value) {
        (DataType::Boolean, ScalarValue::Boolean(Some(v))) => Datum::bool(*v),
        (DataType::Int32, ScalarValue::Int32(Some(v))) => Datum::int(*v),
        (DataType::Int64, ScalarValue::Int64(Some(v))) => Datum::long(*v),
        (DataType::Date32, ScalarValue::Date32(Some(v))) => Datum::date(*v),
        (DataType::Utf8, ScalarValue::Utf8(Some(v))) | (DataType::Utf8View, ScalarValue::Utf8View(Some(v))) => {
            Datum::string(v)
        }
        (DataType::Timestamp(_, None), ScalarValue::TimestampMicrosecond(Some(v), None)) => Datum::timestamp_micros(*v),
        (DataType::Timestamp(_, Some(_)), ScalarValue::TimestampMicrosecond(Some(v), Some(_))) => {
            Datum::timestamptz_micros(*v)
        }
        (DataType::Decimal128(p, s), ScalarValue::Decimal128(Some(v), _, _)) => {
            use datafusion::arrow::datatypes::{Decimal128Type, DecimalType};
            Datum::decimal_from_str(Decimal128Type::format_decimal(*v, *p, *s)).ok()?
        }
        _ => return None,
    };
    Some((Reference::new(name), datum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("label", DataType::Utf8View, true),
            Field::new("score", DataType::Float64, true),
        ])
    }

    #[test]
    fn what_translates_exactly_is_kept_and_the_rest_left_out() {
        let s = schema();
        let p = predicate(&[col("id").gt(lit(5i64)).and(col("score").gt(lit(1.0)))], &s).unwrap();
        assert_eq!(p.to_string(), "id > 5", "the float comparison is left out of the AND");
        let p = predicate(&[col("id").eq(lit(1i64)).or(col("label").is_null())], &s).unwrap();
        assert_eq!(p.to_string(), "(id = 1) OR (label IS NULL)");
        assert!(predicate(&[col("id").eq(lit(1i64)).or(col("score").lt(lit(0.0)))], &s).is_none(), "OR needs both");
        assert!(predicate(&[col("id").eq(lit(1i32))], &s).is_none(), "a literal of another type");
        let p = predicate(&[lit(3i64).lt_eq(col("id"))], &s).unwrap();
        assert_eq!(p.to_string(), "id >= 3", "a literal on the left is swapped");
        let view = |v: &str| lit(ScalarValue::Utf8View(Some(v.into())));
        let p = predicate(&[col("label").in_list(vec![view("a"), view("b")], false)], &s).unwrap();
        assert!(p.to_string().contains("IN"), "{p}");
    }
}
