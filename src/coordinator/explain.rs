//! Trino's `EXPLAIN` answers: `TYPE DISTRIBUTED` (the stages, Trino's default),
//! `LOGICAL` (one tree, before it is cut), `VALIDATE` (one row, `Valid`) and `IO` (the
//! tables read and written), each `FORMAT TEXT`, `GRAPHVIZ` or `JSON` in Trino's JSON
//! shapes: a node is `{id, name, descriptor, outputs, details, estimates, children}`,
//! a distributed plan a map of stage id to its root node, the IO plan
//! `{inputTableColumnInfos, outputTable, estimate}`. Called by `planning::plan_here`
//! with the statement's plans; runs nothing.

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::TableReference;
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::physical_plan::{displayable, ExecutionPlan};
use serde_json::{json, Map, Value};

use super::planner::QueryError;
use super::sql_parser::{ExplainFormat, ExplainType};
use crate::error_code::ErrorCode;
use crate::format::field_type;
use crate::plan::fragmenter::FragmentedPlan;

/// The plans an `EXPLAIN` shows.
pub struct Plans<'a> {
    pub logical: &'a LogicalPlan,
    pub physical: Arc<dyn ExecutionPlan>,
    /// The stages, when the statement reads tables (it runs on workers).
    pub fragments: Option<FragmentedPlan>,
    /// `EXPLAIN`'s text of the stages (`plan::explain`), when there are stages.
    pub distributed_text: Option<String>,
    /// The session's catalog and schema, for names the statement leaves unqualified.
    pub defaults: (&'a str, &'a str),
}

/// The answer: one row, `Query Plan` (or `Valid`).
pub fn answer(kind: ExplainType, format: ExplainFormat, plans: Plans) -> Result<RecordBatch, QueryError> {
    if kind == ExplainType::Validate {
        let schema = Schema::new(vec![Field::new("Valid", DataType::Boolean, false)]);
        return batch(schema, Arc::new(BooleanArray::from(vec![true])));
    }
    let text = match (kind, format) {
        (ExplainType::Io, _) => {
            serde_json::to_string_pretty(&io_plan(plans.logical, plans.defaults)).unwrap_or_default()
        }
        (ExplainType::Validate, _) => unreachable!("answered above"),
        (ExplainType::Distributed, ExplainFormat::Text) => match plans.distributed_text {
            Some(text) => text,
            None => format!("Fragment 0 [COORDINATOR ONLY]\n{}", displayable(plans.physical.as_ref()).indent(false)),
        },
        (ExplainType::Distributed, ExplainFormat::Graphviz) => match &plans.fragments {
            Some(f) => f.to_dot(),
            None => displayable(plans.physical.as_ref()).graphviz().to_string(),
        },
        (ExplainType::Distributed, ExplainFormat::Json) => {
            let mut stages = Map::new();
            let mut next = 0;
            match &plans.fragments {
                Some(f) => {
                    for fragment in &f.fragments {
                        stages.insert(fragment.id.to_string(), node(&fragment.plan, &mut next));
                    }
                }
                None => {
                    stages.insert("0".into(), node(&plans.physical, &mut next));
                }
            }
            serde_json::to_string_pretty(&Value::Object(stages)).unwrap_or_default()
        }
        (ExplainType::Logical, ExplainFormat::Text) => displayable(plans.physical.as_ref()).indent(false).to_string(),
        (ExplainType::Logical, ExplainFormat::Graphviz) => displayable(plans.physical.as_ref()).graphviz().to_string(),
        (ExplainType::Logical, ExplainFormat::Json) => {
            serde_json::to_string_pretty(&node(&plans.physical, &mut 0)).unwrap_or_default()
        }
    };
    let schema = Schema::new(vec![Field::new("Query Plan", DataType::Utf8, false)]);
    batch(schema, Arc::new(StringArray::from(vec![text])))
}

fn batch(schema: Schema, column: datafusion::arrow::array::ArrayRef) -> Result<RecordBatch, QueryError> {
    RecordBatch::try_new(Arc::new(schema), vec![column])
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))
}

/// One plan node and those under it, as Trino's JSON plan has them. Ids are given
/// depth first, from `next`.
fn node(plan: &Arc<dyn ExecutionPlan>, next: &mut usize) -> Value {
    let id = *next;
    *next += 1;
    let outputs: Vec<Value> =
        plan.schema().fields().iter().map(|f| json!({ "symbol": f.name(), "type": field_type(f) })).collect();
    let details = displayable(plan.as_ref()).one_line().to_string();
    let children: Vec<Value> = plan.children().into_iter().map(|c| node(c, next)).collect();
    json!({
        "id": id.to_string(),
        "name": plan.name(),
        "descriptor": {},
        "outputs": outputs,
        "details": [details.trim_end()],
        "estimates": [],
        "children": children,
    })
}

/// Trino's IO plan: the tables the statement reads (with their columns' constraints
/// where the scan has simple ones) and the one it writes.
fn io_plan(logical: &LogicalPlan, defaults: (&str, &str)) -> Value {
    let mut inputs: Vec<Value> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let _ = logical.apply_with_subqueries(|p| {
        if let LogicalPlan::TableScan(scan) = p {
            if seen.insert(scan.table_name.to_string()) {
                inputs.push(json!({
                    "table": table(&scan.table_name, defaults),
                    "constraint": { "none": false, "columnConstraints": constraints(&scan.filters, &scan.source.schema()) },
                    "estimate": unknown_estimate(),
                }));
            }
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    let output = match logical {
        LogicalPlan::Dml(dml) => Some(table(&dml.table_name, defaults)),
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) => Some(table(&c.name, defaults)),
        _ => None,
    };
    let mut io = json!({ "inputTableColumnInfos": inputs });
    if let Some(output) = output {
        io["outputTable"] = output;
    }
    io["estimate"] = unknown_estimate();
    io
}

fn table(name: &TableReference, (catalog, schema): (&str, &str)) -> Value {
    json!({
        "catalog": name.catalog().unwrap_or(catalog),
        "schemaTable": { "schema": name.schema().unwrap_or(schema), "table": name.table() },
    })
}

/// Trino's estimate with nothing known (its JSON writes an unknown figure as "NaN").
fn unknown_estimate() -> Value {
    json!({
        "outputRowCount": "NaN",
        "outputSizeInBytes": "NaN",
        "cpuCost": "NaN",
        "maxMemory": "NaN",
        "networkCost": "NaN",
    })
}

/// The domains of the scan's filters of the form `column op literal` (and `IS
/// NULL`), one per column, in Trino's shape; other filters narrow nothing here.
fn constraints(
    filters: &[datafusion::logical_expr::Expr],
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> Vec<Value> {
    use datafusion::logical_expr::{Expr, Operator};
    let mut out = Vec::new();
    for f in filters {
        let (column, low, high, nulls) = match f {
            Expr::BinaryExpr(b) => {
                let (column, op, value) = match (b.left.as_ref(), b.right.as_ref()) {
                    (Expr::Column(c), Expr::Literal(v, _)) => (c, b.op, v),
                    (Expr::Literal(v, _), Expr::Column(c)) => match b.op.swap() {
                        Some(op) => (c, op, v),
                        None => continue,
                    },
                    _ => continue,
                };
                if value.is_null() {
                    continue;
                }
                let v = value.to_string();
                let bound = |kind: &str| Some(json!({ "value": v, "bound": kind }));
                match op {
                    Operator::Eq => (column, bound("EXACTLY"), bound("EXACTLY"), false),
                    Operator::Lt => (column, None, bound("BELOW"), false),
                    Operator::LtEq => (column, None, bound("EXACTLY"), false),
                    Operator::Gt => (column, bound("ABOVE"), None, false),
                    Operator::GtEq => (column, bound("EXACTLY"), None, false),
                    _ => continue,
                }
            }
            Expr::IsNull(e) => match e.as_ref() {
                Expr::Column(c) => (c, None, None, true),
                _ => continue,
            },
            _ => continue,
        };
        let Ok(field) = schema.field_with_name(&column.name) else { continue };
        let ranges = match nulls {
            true => vec![],
            false => vec![
                json!({ "low": low.unwrap_or(json!({"bound": "ABOVE"})), "high": high.unwrap_or(json!({"bound": "BELOW"})) }),
            ],
        };
        out.push(json!({
            "columnName": column.name,
            "type": field_type(field),
            "domain": { "nullsAllowed": nulls, "ranges": ranges },
        }));
    }
    out
}
