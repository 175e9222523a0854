//! DuckDB as the differential tester's second engine: a Python process running
//! DuckDB's module (the PyPI package `.ci/run` installs) over the same tables, asked
//! every generated query whose meaning the two engines share (`same_meaning`). Unlike
//! single-node DataFusion, it plans subqueries anywhere and `IN` under `OR`, so it
//! checks the queries DataFusion cannot. `difftest::run` owns one for a run; dropping
//! it ends the process.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

/// The process's loop: a query as a JSON string per line in, its rows (or its error)
/// as a JSON object per line out; NaN as Trino's protocol writes it, decimals as
/// numbers.
const SCRIPT: &str = r#"
import decimal, json, math, sys
import duckdb
con = duckdb.connect()
def value(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [value(x) for x in v]
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    return str(v)
for line in sys.stdin:
    try:
        rows = con.execute(json.loads(line)).fetchall()
        out = {"rows": [[value(v) for v in r] for r in rows]}
    except Exception as e:
        out = {"error": (str(e).splitlines() or [type(e).__name__])[0]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

/// A running DuckDB holding the tester's tables.
pub struct DuckDb {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl DuckDb {
    /// DuckDB under `python` (which must import `duckdb`), with the tester's tables.
    pub fn start(python: &Path) -> Result<Self, String> {
        let mut child = Command::new(python)
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting DuckDB under {}: {e}", python.display()))?;
        let input = child.stdin.take().ok_or("DuckDB's input")?;
        let output = BufReader::new(child.stdout.take().ok_or("DuckDB's output")?);
        let mut duckdb = Self { child, input, output };
        for sql in super::table_statements("") {
            duckdb.rows(&sql).map_err(|e| format!("DuckDB: {sql}: {e}"))?;
        }
        Ok(duckdb)
    }

    /// The rows of `sql`, or DuckDB's error.
    pub fn rows(&mut self, sql: &str) -> Result<Vec<Vec<Value>>, String> {
        let line = serde_json::to_string(sql).map_err(|e| e.to_string())?;
        writeln!(self.input, "{line}").map_err(|e| format!("DuckDB's input: {e}"))?;
        let mut answer = String::new();
        self.output.read_line(&mut answer).map_err(|e| format!("DuckDB's output: {e}"))?;
        let answer: Value = serde_json::from_str(&answer).map_err(|e| format!("DuckDB's answer {answer:?}: {e}"))?;
        match (&answer["rows"], &answer["error"]) {
            (Value::Array(rows), _) => Ok(rows.iter().map(|r| r.as_array().cloned().unwrap_or_default()).collect()),
            (_, Value::String(e)) => Err(e.clone()),
            _ => Err(format!("DuckDB answered {answer}")),
        }
    }
}

impl Drop for DuckDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether DuckDB gives `sql` Trino's meaning: every generated form but a comparison
/// of the double column, where DuckDB orders NaN above every number and equal to
/// itself and Trino has it compare false.
pub fn same_meaning(sql: &str) -> bool {
    const COMPARISONS: [&str; 8] = [" = ", " <> ", " < ", " <= ", " > ", " >= ", " BETWEEN ", " IN "];
    !COMPARISONS.iter().any(|op| sql.contains(&format!(".d{op}")))
}

/// Rows as a sorted multiset, each value in a form both engines' answers share: a
/// number as a float to twelve digits (DuckDB's sums are 128-bit integers, its
/// decimals floats here), anything else as its JSON.
pub fn canonical(rows: &[Vec<Value>]) -> Vec<String> {
    let value = |v: &Value| match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{f:.0}"),
            Some(f) => format!("{f:.12e}"),
            None => n.to_string(),
        },
        other => other.to_string(),
    };
    let mut out: Vec<String> = rows.iter().map(|r| r.iter().map(value).collect::<Vec<_>>().join("|")).collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comparison_of_the_double_column_is_not_shared() {
        assert!(!same_meaning("SELECT x.k AS c0 FROM dt0 x WHERE x.d < 0.5"));
        assert!(same_meaning("SELECT x.d AS c0 FROM dt0 x WHERE x.k < 2"));
    }

    #[test]
    fn numbers_compare_across_integer_and_float() {
        let ours = vec![vec![serde_json::json!(3), serde_json::json!("a"), serde_json::json!(0.5)]];
        let theirs =
            vec![vec![serde_json::json!(3.0), serde_json::json!("a"), serde_json::json!(0.500_000_000_000_01)]];
        assert_eq!(canonical(&ours), canonical(&theirs));
    }
}
