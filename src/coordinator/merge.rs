//! `MERGE INTO target USING source ON condition WHEN ...`, planned as the rows of
//! the target after it (the merge paradigm of `connector::writes`): an ordinary
//! query DataFusion plans and the cluster runs in stages, whose last column is each
//! row's `RowOperation`. Called by `planning::plan_here` before DataFusion, which
//! plans no `MERGE`.
//!
//! The query is the union of up to three parts, written as SQL around the
//! statement's own (already parsed) expressions and source:
//!
//! - the target's rows no source row matches, kept (an anti join);
//! - the matched pairs (an inner join), each target row named by a row id
//!   (`functions::merge_rows`); for each pair the first `WHEN MATCHED` clause whose
//!   condition holds, then per target row the pair whose clause applies, if any:
//!   updated, deleted, or else kept once. A target row with two pairs whose clauses
//!   apply fails the statement, as Trino's does
//!   (`MERGE_TARGET_ROW_MULTIPLE_MATCHES`);
//! - the source's rows that match no target row (an anti join), inserted by the
//!   first `WHEN NOT MATCHED` clause whose condition holds.
//!
//! Only the matched pairs are numbered and ranked (a window over the row id), so a
//! change of a few rows of a big table sorts only those. The values are cast to the
//! table's column types, as Trino's assignment casts them.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{cast, DmlStatement, Expr, LogicalPlan, LogicalPlanBuilder, WriteOp};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Expr as SqlExpr, Ident, Merge, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    ObjectNamePart, Statement, TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::parser::Parser;

use super::planner::{planning_error, QueryError};
use crate::connector::writes::OPERATION_COLUMN;
use crate::error_code::ErrorCode;
use crate::functions::merge_rows::{MERGE_CHECK, ROW_ID};

/// The `MERGE` of `statement`, planned as a write of the target's rows after it
/// (an `UPDATE`-shaped `Dml` whose input is those rows), or None for another
/// statement.
pub(super) async fn plan(
    state: &SessionState,
    statement: &DFStatement,
    normalize: bool,
) -> Result<Option<LogicalPlan>, QueryError> {
    let DFStatement::Statement(s) = statement else { return Ok(None) };
    let Statement::Merge(merge) = s.as_ref() else { return Ok(None) };
    let TableFactor::Table { name, alias, .. } = &merge.table else {
        return Err(QueryError::new(ErrorCode::NotSupported, "MERGE INTO takes a table"));
    };
    let table = object_name_to_table_reference(name.clone(), normalize).map_err(|e| planning_error(&e))?;
    let provider = state
        .schema_for_ref(table.clone())
        .map_err(|e| planning_error(&e))?
        .table(table.table())
        .await
        .map_err(|e| planning_error(&e))?
        .ok_or_else(|| QueryError::new(ErrorCode::TableNotFound, format!("Table '{table}' does not exist")))?;
    let schema = provider.schema();
    let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let target_alias = match alias {
        Some(a) => a.name.clone(),
        None => last_ident(name),
    };
    let mut text = MergeText { exprs: Vec::new() };
    let sql = text.query(merge, name, &target_alias, &columns)?;
    let mut query = Parser::new(&crate::coordinator::dialect::TrinoDialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, format!("MERGE's query: {e}: {sql}")))?;
    let mut splice = Splice { exprs: text.exprs, source: &merge.source };
    let _ = query.visit(&mut splice);
    let rows = state
        .statement_to_plan(DFStatement::Statement(Box::new(Statement::Query(query))))
        .await
        .map_err(|e| planning_error(&e))?;
    // The table's types, and the operation's.
    let mut produced = rows.schema().columns();
    let Some(operation) = produced.pop().filter(|_| produced.len() == schema.fields().len()) else {
        return Err(QueryError::new(ErrorCode::GenericInternalError, "MERGE's query has other columns than its table"));
    };
    let mut exprs: Vec<Expr> = schema
        .fields()
        .iter()
        .zip(produced)
        .map(|(f, c)| cast(Expr::Column(c), f.data_type().clone()).alias(f.name()))
        .collect();
    exprs.push(cast(Expr::Column(operation), DataType::Int8).alias(OPERATION_COLUMN));
    let rows = LogicalPlanBuilder::from(rows).project(exprs).and_then(|b| b.build()).map_err(|e| planning_error(&e))?;
    let source = datafusion::datasource::provider_as_source(provider);
    Ok(Some(LogicalPlan::Dml(DmlStatement::new(table, source, WriteOp::Update, std::sync::Arc::new(rows)))))
}

fn last_ident(name: &ObjectName) -> Ident {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => i.clone(),
        _ => Ident::new("t"),
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The query's text, with the statement's expressions as placeholders `"$pN"`.
struct MergeText {
    exprs: Vec<SqlExpr>,
}

/// One `WHEN` clause, read.
enum Action {
    /// New values by target column.
    Update(HashMap<usize, SqlExpr>),
    Delete,
    Insert(HashMap<usize, SqlExpr>),
}

impl MergeText {
    fn placeholder(&mut self, e: &SqlExpr) -> String {
        self.exprs.push(e.clone());
        format!("\"$p{}\"", self.exprs.len() - 1)
    }

    fn query(
        &mut self,
        merge: &Merge,
        target: &ObjectName,
        alias: &Ident,
        columns: &[String],
    ) -> Result<String, QueryError> {
        let index: HashMap<String, usize> = columns.iter().enumerate().map(|(i, c)| (c.to_lowercase(), i)).collect();
        let find = |name: &Ident| {
            index.get(&name.value.to_lowercase()).copied().ok_or_else(|| {
                QueryError::new(
                    ErrorCode::ColumnNotFound,
                    format!("Column '{}' does not exist in the MERGE target", name.value),
                )
            })
        };
        let mut matched = Vec::new();
        let mut not_matched = Vec::new();
        for (k, clause) in merge.clauses.iter().enumerate() {
            let action = match &clause.action {
                MergeAction::Update(u) => {
                    let mut values = HashMap::new();
                    for a in &u.assignments {
                        let AssignmentTarget::ColumnName(name) = &a.target else {
                            return Err(QueryError::new(ErrorCode::NotSupported, "MERGE ... SET (a, b) = ..."));
                        };
                        let i = find(&last_ident(name))?;
                        if values.insert(i, a.value.clone()).is_some() {
                            let m = format!("MERGE sets column '{}' twice", columns[i]);
                            return Err(QueryError::new(ErrorCode::GenericUserError, m));
                        }
                    }
                    Action::Update(values)
                }
                MergeAction::Delete { .. } => Action::Delete,
                MergeAction::Insert(insert) => {
                    let MergeInsertKind::Values(values) = &insert.kind else {
                        return Err(QueryError::new(ErrorCode::NotSupported, "MERGE ... INSERT ROW"));
                    };
                    let [row] = values.rows.as_slice() else {
                        return Err(QueryError::new(
                            ErrorCode::GenericUserError,
                            "MERGE's INSERT takes one row of VALUES",
                        ));
                    };
                    let targets: Vec<usize> = match insert.columns.is_empty() {
                        true => (0..columns.len()).collect(),
                        false => insert.columns.iter().map(|c| find(&last_ident(c))).collect::<Result<_, _>>()?,
                    };
                    if targets.len() != row.len() {
                        let m =
                            format!("MERGE's INSERT names {} columns and gives {} values", targets.len(), row.len());
                        return Err(QueryError::new(ErrorCode::GenericUserError, m));
                    }
                    Action::Insert(targets.into_iter().zip(row.iter().cloned()).collect())
                }
            };
            let condition = clause.predicate.as_ref().map(|p| self.placeholder(p)).unwrap_or_else(|| "TRUE".into());
            match (&clause.clause_kind, action) {
                (MergeClauseKind::Matched, a @ (Action::Update(_) | Action::Delete)) => matched.push((k, condition, a)),
                (MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget, a @ Action::Insert(_)) => {
                    not_matched.push((k, condition, a))
                }
                (MergeClauseKind::NotMatchedBySource, _) => {
                    return Err(QueryError::new(ErrorCode::NotSupported, "MERGE ... WHEN NOT MATCHED BY SOURCE"))
                }
                (kind, _) => {
                    let m = format!(
                        "WHEN {kind} takes {}",
                        if matches!(kind, MergeClauseKind::Matched) { "UPDATE or DELETE" } else { "INSERT" }
                    );
                    return Err(QueryError::new(ErrorCode::SyntaxError, m));
                }
            }
        }
        let on = self.placeholder(&merge.on);
        let source = "\"$source\"";
        let mut parts = Vec::new();
        let kept: Vec<String> = columns.iter().map(|c| format!("{alias}.{}", quoted(c))).collect();
        parts.push(match matched.is_empty() {
            true => format!("SELECT {}, 0 AS \"{OPERATION_COLUMN}\" FROM {target} AS {alias}", kept.join(", ")),
            false => format!(
                "SELECT {}, 0 AS \"{OPERATION_COLUMN}\" FROM {target} AS {alias} LEFT ANTI JOIN {source} ON {on}",
                kept.join(", ")
            ),
        });
        if !matched.is_empty() {
            parts.push(self.matched_part(&matched, target, alias, columns, &on));
        }
        if !not_matched.is_empty() {
            parts.push(self.inserted_part(&not_matched, target, alias, columns, &on));
        }
        Ok(parts.join(" UNION ALL "))
    }

    /// The matched pairs: each target row once, updated, deleted or kept.
    fn matched_part(
        &mut self,
        clauses: &[(usize, String, Action)],
        target: &ObjectName,
        alias: &Ident,
        columns: &[String],
        on: &str,
    ) -> String {
        let mut inner = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            inner.push(format!("{alias}.{} AS \"$t{i}\"", quoted(c)));
        }
        let chooser: Vec<String> = clauses.iter().map(|(k, cond, _)| format!("WHEN {cond} THEN {k}")).collect();
        inner.push(format!("CASE {} END AS \"$clause\"", chooser.join(" ")));
        let mut outer = Vec::new();
        let mut deletes = Vec::new();
        for (k, _, action) in clauses {
            match action {
                Action::Update(values) => {
                    for (i, value) in values {
                        let p = self.placeholder(value);
                        inner.push(format!("{p} AS \"$u{k}_{i}\""));
                    }
                }
                _ => deletes.push(k.to_string()),
            }
        }
        for (i, c) in columns.iter().enumerate() {
            let whens = clause_values(clauses, i, "u", |a| matches!(a, Action::Update(_)));
            outer.push(match whens.is_empty() {
                true => format!("\"$t{i}\" AS {}", quoted(c)),
                false => format!("CASE \"$clause\" {whens} ELSE \"$t{i}\" END AS {}", quoted(c)),
            });
        }
        let deleted = match deletes.is_empty() {
            true => String::new(),
            false => format!("WHEN \"$clause\" IN ({}) THEN 2 ", deletes.join(", ")),
        };
        let operation = format!("CASE WHEN \"$clause\" IS NULL THEN 0 {deleted}ELSE 1 END");
        outer.push(format!("{MERGE_CHECK}(\"$fired\", CAST({operation} AS TINYINT)) AS \"{OPERATION_COLUMN}\""));
        format!(
            "SELECT {} FROM (SELECT *, count(\"$clause\") OVER (PARTITION BY \"$row_id\") AS \"$fired\", \
             row_number() OVER (PARTITION BY \"$row_id\" ORDER BY \"$clause\" NULLS LAST) AS \"$rank\" \
             FROM (SELECT {}, {alias}.\"$row_id\" AS \"$row_id\" FROM (SELECT *, {ROW_ID}() AS \"$row_id\" FROM {target}) \
             AS {alias} JOIN \"$source\" ON {on}) AS \"$pairs\") AS \"$ranked\" WHERE \"$rank\" = 1",
            outer.join(", "),
            inner.join(", ")
        )
    }

    /// The source's rows no target row matches, inserted by the first clause that
    /// applies.
    fn inserted_part(
        &mut self,
        clauses: &[(usize, String, Action)],
        target: &ObjectName,
        alias: &Ident,
        columns: &[String],
        on: &str,
    ) -> String {
        let chooser: Vec<String> = clauses.iter().map(|(k, cond, _)| format!("WHEN {cond} THEN {k}")).collect();
        let mut inner = vec![format!("CASE {} END AS \"$clause\"", chooser.join(" "))];
        for (k, _, action) in clauses {
            if let Action::Insert(values) = action {
                for (i, value) in values {
                    let p = self.placeholder(value);
                    inner.push(format!("{p} AS \"$i{k}_{i}\""));
                }
            }
        }
        let mut outer = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            let whens = clause_values(clauses, i, "i", |a| matches!(a, Action::Insert(_)));
            outer.push(match whens.is_empty() {
                true => format!("NULL AS {}", quoted(c)),
                false => format!("CASE \"$clause\" {whens} END AS {}", quoted(c)),
            });
        }
        outer.push(format!("1 AS \"{OPERATION_COLUMN}\""));
        format!(
            "SELECT {} FROM (SELECT {} FROM \"$source\" LEFT ANTI JOIN {target} AS {alias} ON {on}) AS \"$unmatched\" \
             WHERE \"$clause\" IS NOT NULL",
            outer.join(", "),
            inner.join(", ")
        )
    }
}

/// The `WHEN k THEN "$<prefix>k_i"` arms choosing column `i`'s value by the clause
/// that applied, for the clauses of the kind `is_kind` that give it one; empty when
/// none does.
fn clause_values(clauses: &[(usize, String, Action)], i: usize, prefix: &str, is_kind: fn(&Action) -> bool) -> String {
    let arms: Vec<String> = clauses
        .iter()
        .filter(|(_, _, a)| is_kind(a))
        .filter_map(|(k, _, a)| match a {
            Action::Update(values) | Action::Insert(values) if values.contains_key(&i) => {
                Some(format!("WHEN {k} THEN \"${prefix}{k}_{i}\""))
            }
            _ => None,
        })
        .collect();
    arms.join(" ")
}

/// Puts the statement's expressions and source in place of the placeholders.
struct Splice<'a> {
    exprs: Vec<SqlExpr>,
    source: &'a TableFactor,
}

impl VisitorMut for Splice<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if let SqlExpr::Identifier(id) = expr {
            let n = id.quote_style.and(id.value.strip_prefix("$p")).and_then(|n| n.parse::<usize>().ok());
            if let Some(e) = n.and_then(|n| self.exprs.get(n)) {
                *expr = e.clone();
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, .. } = factor {
            if matches!(name.0.as_slice(), [ObjectNamePart::Identifier(i)] if i.quote_style.is_some() && i.value == "$source")
            {
                *factor = self.source.clone();
            }
        }
        ControlFlow::Continue(())
    }
}
