//! Filters DataFusion may hand to PostgreSQL: each one that has an exact SQL
//! equivalent becomes part of the `WHERE` sent to the server, and DataFusion drops it
//! from its own plan. What cannot be said exactly stays with DataFusion.
//!
//! Not pushed: range comparisons of text (PostgreSQL orders by its collation,
//! DataFusion by bytes), casts, functions, and anything over a column PostgreSQL
//! hands over converted (numeric, dates and timestamps are compared in their own
//! types, so their comparisons with literals of the same type are pushed).

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;

use super::ColumnKind;

/// A column of the table as the pushdown sees it.
pub struct PushdownColumn<'a> {
    pub name: &'a str,
    pub kind: ColumnKind,
}

pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn literal(v: &ScalarValue) -> Option<String> {
    if v.is_null() {
        return None;
    }
    Some(match v {
        ScalarValue::Boolean(Some(b)) => b.to_string(),
        ScalarValue::Int8(Some(x)) => x.to_string(),
        ScalarValue::Int16(Some(x)) => x.to_string(),
        ScalarValue::Int32(Some(x)) => x.to_string(),
        ScalarValue::Int64(Some(x)) => x.to_string(),
        ScalarValue::UInt8(Some(x)) => x.to_string(),
        ScalarValue::UInt16(Some(x)) => x.to_string(),
        ScalarValue::UInt32(Some(x)) => x.to_string(),
        ScalarValue::UInt64(Some(x)) => x.to_string(),
        ScalarValue::Float32(Some(x)) if x.is_finite() => format!("{x:?}::real"),
        ScalarValue::Float64(Some(x)) if x.is_finite() => format!("{x:?}::double precision"),
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => quote_str(s),
        ScalarValue::Decimal128(Some(_), _, _) => v.to_string(),
        ScalarValue::Date32(Some(_)) => format!("DATE {}", quote_str(&v.to_string())),
        _ => return None,
    })
}

fn is_text(v: &ScalarValue) -> bool {
    matches!(v.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

struct Translator<'a> {
    columns: &'a [PushdownColumn<'a>],
}

impl Translator<'_> {
    fn column(&self, e: &Expr) -> Option<&PushdownColumn<'_>> {
        match e {
            Expr::Column(c) => self.columns.iter().find(|k| k.name == c.name),
            _ => None,
        }
    }

    /// An operand: a column or a literal, with whether it is text.
    fn operand(&self, e: &Expr) -> Option<(String, bool)> {
        if let Some(c) = self.column(e) {
            // Types read as their text form compare by their own rules there.
            if c.kind == ColumnKind::Other {
                return None;
            }
            return Some((quote_ident(c.name), c.kind == ColumnKind::Text));
        }
        match e {
            Expr::Literal(v, _) => literal(v).map(|s| (s, is_text(v))),
            _ => None,
        }
    }

    fn sql(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And | Operator::Or => {
                    let word = if *op == Operator::And { "AND" } else { "OR" };
                    Some(format!("({} {word} {})", self.sql(left)?, self.sql(right)?))
                }
                Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => {
                    let (l, l_text) = self.operand(left)?;
                    let (r, r_text) = self.operand(right)?;
                    let range = !matches!(op, Operator::Eq | Operator::NotEq);
                    if range && (l_text || r_text) {
                        return None;
                    }
                    // One side must be a column: constant folding is DataFusion's.
                    self.column(left).or(self.column(right))?;
                    Some(format!("({l} {op} {r})"))
                }
                _ => None,
            },
            Expr::Not(inner) => Some(format!("(NOT {})", self.sql(inner)?)),
            Expr::IsNull(inner) => Some(format!("({} IS NULL)", quote_ident(self.column(inner)?.name))),
            Expr::IsNotNull(inner) => Some(format!("({} IS NOT NULL)", quote_ident(self.column(inner)?.name))),
            Expr::InList(l) => {
                let c = self.operand(&l.expr)?.0;
                self.column(&l.expr)?;
                let items: Option<Vec<String>> = l.list.iter().map(|i| self.operand(i).map(|(s, _)| s)).collect();
                let items = items?;
                if items.is_empty() || l.list.iter().any(|i| self.column(i).is_some()) {
                    return None;
                }
                let not = if l.negated { "NOT " } else { "" };
                Some(format!("({c} {not}IN ({}))", items.join(", ")))
            }
            Expr::Like(l) if l.escape_char.is_none() => {
                let c = self.column(&l.expr)?;
                if c.kind != ColumnKind::Text {
                    return None;
                }
                let Expr::Literal(v, _) = l.pattern.as_ref() else { return None };
                if !is_text(v) {
                    return None;
                }
                let op = match (l.negated, l.case_insensitive) {
                    (false, false) => "LIKE",
                    (true, false) => "NOT LIKE",
                    (false, true) => "ILIKE",
                    (true, true) => "NOT ILIKE",
                };
                // Both escape with '\\' when no ESCAPE is given.
                Some(format!("({} {op} {})", quote_ident(c.name), literal(v)?))
            }
            Expr::Between(b) => {
                let c = self.column(&b.expr)?;
                if c.kind == ColumnKind::Text {
                    return None;
                }
                let (low, _) = self.operand(&b.low)?;
                let (high, _) = self.operand(&b.high)?;
                let not = if b.negated { "NOT " } else { "" };
                Some(format!("({} {not}BETWEEN {low} AND {high})", quote_ident(c.name)))
            }
            _ => None,
        }
    }
}

/// The SQL of `filter` when PostgreSQL can evaluate it exactly.
pub fn filter_sql(filter: &Expr, columns: &[PushdownColumn<'_>]) -> Option<String> {
    Translator { columns }.sql(filter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn columns() -> Vec<PushdownColumn<'static>> {
        vec![
            PushdownColumn { name: "n_nationkey", kind: ColumnKind::Int64 },
            PushdownColumn { name: "n_name", kind: ColumnKind::Text },
            PushdownColumn { name: "price", kind: ColumnKind::Numeric { precision: 15, scale: 2 } },
        ]
    }

    #[test]
    fn exact_filters_become_sql_and_the_rest_stays() {
        let c = columns();
        let f = col("n_nationkey").gt(lit(3i64)).and(col("n_name").eq(lit("O'BRIEN")));
        assert_eq!(filter_sql(&f, &c).unwrap(), "((\"n_nationkey\" > 3) AND (\"n_name\" = 'O''BRIEN'))");
        assert_eq!(filter_sql(&col("n_name").gt(lit("M")), &c), None, "text ranges follow the collation");
        assert_eq!(
            filter_sql(&col("n_nationkey").in_list(vec![lit(1i64), lit(2i64)], true), &c).unwrap(),
            "(\"n_nationkey\" NOT IN (1, 2))"
        );
        assert_eq!(filter_sql(&col("n_name").like(lit("A%")), &c).unwrap(), "(\"n_name\" LIKE 'A%')");
        assert_eq!(filter_sql(&col("n_name").like(lit("a\\%")), &c).unwrap(), "(\"n_name\" LIKE 'a\\%')");
        let other = [PushdownColumn { name: "id", kind: ColumnKind::Other }];
        assert_eq!(filter_sql(&col("id").eq(lit("A0EE")), &other), None, "a uuid compares by its own rules");
        assert_eq!(filter_sql(&col("unknown").eq(lit(1i64)), &c), None);
        assert_eq!(filter_sql(&lit(1i64).eq(lit(1i64)), &c), None);
        assert_eq!(
            filter_sql(&std::ops::Not::not(col("n_nationkey").is_null()), &c).unwrap(),
            "(NOT (\"n_nationkey\" IS NULL))"
        );
        let or = col("n_nationkey").eq(lit(1i64)).or(col("n_name").gt(lit("M")));
        assert_eq!(filter_sql(&or, &c), None, "an OR is pushed whole or not at all");
    }
}
