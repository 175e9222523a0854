//! Flight SQL's prepared statements: the statement's text kept under a handle for
//! the user who made it, and the parameters a client binds (`DoPut` with a batch of
//! values, one row per execution) turned into SQL literals that replace its `?`s, as
//! `EXECUTE ... USING` does for Trino's clients. Called by the service; owns the
//! handles, which go when closed or unused for `PREPARED_IDLE`.
//!
//! A `DoPut` of many rows is bounded and batched (`executions`): an `INSERT ...
//! VALUES` of one row of `?`s runs as one `INSERT` per 1,000 rows, not one distributed
//! write per row; any other statement runs once per row, for at most 1,000 rows.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Expr;
use parking_lot::Mutex;
use tonic::Status;

use super::status::invalid;

/// A handle unused this long is forgotten.
const PREPARED_IDLE: Duration = Duration::from_secs(3600);

/// One row of parameters, as SQL literals.
pub type ParameterRow = Vec<String>;

struct Prepared {
    sql: String,
    user: String,
    /// The parameter rows bound last (none bound: empty).
    bound: Vec<ParameterRow>,
    last_used: Instant,
}

#[derive(Default)]
pub struct PreparedStatements {
    entries: Mutex<HashMap<String, Prepared>>,
}

impl PreparedStatements {
    /// Keeps `sql` for `user`; returns its handle.
    pub fn create(&self, sql: String, user: &str) -> String {
        let handle = format!("p{}", crate::util::random_suffix(24));
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.retain(|_, p| now.duration_since(p.last_used) < PREPARED_IDLE);
        entries.insert(handle.clone(), Prepared { sql, user: user.to_string(), bound: Vec::new(), last_used: now });
        handle
    }

    fn with<T>(&self, handle: &[u8], user: &str, f: impl FnOnce(&mut Prepared) -> T) -> Result<T, Status> {
        let key = std::str::from_utf8(handle).map_err(|_| invalid("an unknown prepared statement handle"))?;
        let mut entries = self.entries.lock();
        match entries.get_mut(key) {
            Some(p) if p.user == user => {
                p.last_used = Instant::now();
                Ok(f(p))
            }
            _ => Err(invalid("an unknown prepared statement handle (closed, expired or another user's)")),
        }
    }

    /// Binds parameter rows for the next execution.
    pub fn bind(&self, handle: &[u8], user: &str, rows: Vec<ParameterRow>) -> Result<(), Status> {
        self.with(handle, user, |p| p.bound = rows)
    }

    /// The statement and its bound parameter rows.
    pub fn statement(&self, handle: &[u8], user: &str) -> Result<(String, Vec<ParameterRow>), Status> {
        self.with(handle, user, |p| (p.sql.clone(), p.bound.clone()))
    }

    pub fn close(&self, handle: &[u8], user: &str) -> Result<(), Status> {
        self.with(handle, user, |_| ())?;
        let key = String::from_utf8_lossy(handle).into_owned();
        self.entries.lock().remove(&key);
        Ok(())
    }
}

/// Most parameter rows one `DoPut` of an `INSERT ... VALUES` may carry.
pub const MAX_PARAMETER_ROWS: usize = 100_000;
/// Rows of one `INSERT` that parameter rows are batched into.
const ROWS_PER_INSERT: usize = 1_000;
/// Most parameter rows of any other statement, each an execution of its own.
pub const MAX_EXECUTIONS: usize = 1_000;

/// The statements that run `sql` for each of `rows`: batched into multi-row
/// `INSERT`s where `sql` is an `INSERT ... VALUES` of one row, else one per row.
/// Refused past the limits above, before anything runs.
pub fn executions(sql: &str, rows: &[ParameterRow]) -> Result<Vec<String>, Status> {
    let Some(template) = single_row_insert(sql) else {
        if rows.len() > MAX_EXECUTIONS {
            let m = format!("{} parameter rows: a statement other than INSERT ... VALUES runs once per row, for at most {MAX_EXECUTIONS}", rows.len());
            return Err(invalid(m));
        }
        return rows.iter().map(|row| bind_row(sql, Some(row))).collect();
    };
    if rows.len() > MAX_PARAMETER_ROWS {
        return Err(invalid(format!("{} parameter rows: one DoPut takes at most {MAX_PARAMETER_ROWS}", rows.len())));
    }
    rows.chunks(ROWS_PER_INSERT)
        .map(|chunk| {
            let mut values = Vec::with_capacity(chunk.len());
            for row in chunk {
                let bound = single_row_insert(&bind_row(sql, Some(row))?);
                let mut bound = bound.ok_or_else(|| invalid("a parameter that is not a value"))?;
                values.append(&mut values_of(&mut bound).rows);
            }
            let mut statement = template.clone();
            values_of(&mut statement).rows = values;
            Ok(statement.to_string())
        })
        .collect()
}

/// `sql` parsed, when it is an `INSERT ... VALUES` of exactly one row.
fn single_row_insert(sql: &str) -> Option<datafusion::sql::sqlparser::ast::Statement> {
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement};
    let mut parsed =
        datafusion::sql::sqlparser::parser::Parser::parse_sql(&crate::coordinator::dialect::TrinoDialect, sql).ok()?;
    let statement = (parsed.len() == 1).then(|| parsed.remove(0))?;
    let Statement::Insert(insert) = &statement else { return None };
    let query = insert.source.as_ref()?;
    let plain = query.with.is_none() && query.order_by.is_none() && query.limit_clause.is_none();
    match query.body.as_ref() {
        SetExpr::Values(v) if plain && v.rows.len() == 1 => Some(statement),
        _ => None,
    }
}

/// The `VALUES` of a statement `single_row_insert` took.
fn values_of(
    statement: &mut datafusion::sql::sqlparser::ast::Statement,
) -> &mut datafusion::sql::sqlparser::ast::Values {
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement};
    match statement {
        Statement::Insert(insert) => match insert.source.as_mut().map(|q| q.body.as_mut()) {
            Some(SetExpr::Values(v)) => v,
            _ => unreachable!("single_row_insert took an INSERT ... VALUES"),
        },
        _ => unreachable!("single_row_insert took an INSERT"),
    }
}

/// The statement with one row's parameters in place of its `?`s (none: as written).
pub fn bind_row(sql: &str, row: Option<&ParameterRow>) -> Result<String, Status> {
    crate::coordinator::sql_parser::bind(sql, row.map_or(&[][..], |r| r.as_slice())).map_err(|e| invalid(e.message))
}

/// A batch of parameter values as rows of SQL literals.
pub fn parameter_rows(batches: &[RecordBatch]) -> Result<Vec<ParameterRow>, Status> {
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            let values = batch
                .columns()
                .iter()
                .map(|column| {
                    let value = ScalarValue::try_from_array(column, row).map_err(|e| invalid(e.to_string()))?;
                    literal(value)
                })
                .collect::<Result<Vec<_>, Status>>()?;
            rows.push(values);
        }
    }
    Ok(rows)
}

/// A value as SQL text that reads back as the same value and type.
fn literal(value: ScalarValue) -> Result<String, Status> {
    let value = match value {
        ScalarValue::Utf8View(s) | ScalarValue::LargeUtf8(s) => ScalarValue::Utf8(s),
        ScalarValue::Dictionary(_, inner) => *inner,
        other => other,
    };
    let sql = datafusion::sql::unparser::expr_to_sql(&Expr::Literal(value.clone(), None))
        .map_err(|e| invalid(format!("a parameter of type {} cannot be bound: {e}", value.data_type())))?;
    Ok(sql.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn parameters_become_literals_that_bind_in_order() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("0", DataType::Int64, true),
            Field::new("1", DataType::Utf8, true),
            Field::new("2", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(7), None])),
                Arc::new(StringArray::from(vec![Some("O'Brien"), Some("x")])),
                Arc::new(Float64Array::from(vec![Some(1.5), Some(-2.0)])),
            ],
        )
        .unwrap();
        let rows = parameter_rows(&[batch]).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], vec!["7".to_string(), "'O''Brien'".to_string(), "1.5".to_string()]);
        assert_eq!(rows[1][0], "NULL");
        let sql = bind_row("SELECT ? AS a, '?' AS q, ? || 'x', ?", Some(&rows[0])).unwrap();
        assert_eq!(sql, "SELECT 7 AS a, '?' AS q, 'O''Brien' || 'x', 1.5");
        assert!(bind_row("SELECT ?", None).is_err());
    }

    #[test]
    fn parameter_rows_of_an_insert_are_batched_and_others_bounded() {
        let rows: Vec<ParameterRow> = (0..2500).map(|i| vec![i.to_string(), format!("'r{i}'")]).collect();
        let runs = executions("INSERT INTO m.s.t VALUES (?, ?)", &rows).unwrap();
        assert_eq!(runs.len(), 3, "1,000 rows an INSERT");
        assert!(runs[0].starts_with("INSERT INTO m.s.t VALUES (0, 'r0'), (1, 'r1'),"), "{}", &runs[0][..80]);
        assert!(runs[2].ends_with("(2499, 'r2499')"), "{}", &runs[2][runs[2].len() - 40..]);
        let count = |sql: &String| sql.matches("'r").count();
        assert_eq!(runs.iter().map(count).sum::<usize>(), 2500, "every row once");
        // A statement of another shape runs once per row, for at most 1,000 rows.
        let update = "DELETE FROM m.s.t WHERE a = ? AND b = ?";
        assert_eq!(
            executions(update, &rows[..2]).unwrap(),
            ["DELETE FROM m.s.t WHERE a = 0 AND b = 'r0'", "DELETE FROM m.s.t WHERE a = 1 AND b = 'r1'"]
        );
        assert!(executions(update, &rows).unwrap_err().message().contains("at most 1000"));
        let many: Vec<ParameterRow> = (0..MAX_PARAMETER_ROWS + 1).map(|i| vec![i.to_string()]).collect();
        assert!(executions("INSERT INTO t VALUES (?)", &many).unwrap_err().message().contains("at most 100000"));
    }

    #[test]
    fn handles_belong_to_their_user() {
        let p = PreparedStatements::default();
        let h = p.create("SELECT ?".into(), "alice");
        p.bind(h.as_bytes(), "alice", vec![vec!["1".into()]]).unwrap();
        assert_eq!(p.statement(h.as_bytes(), "alice").unwrap().1.len(), 1);
        assert!(p.statement(h.as_bytes(), "bob").is_err());
        assert!(p.close(h.as_bytes(), "bob").is_err());
        p.close(h.as_bytes(), "alice").unwrap();
        assert!(p.statement(h.as_bytes(), "alice").is_err());
    }
}
