//! The analyzer rule `NanSkippingExtremes` (registered by the coordinator's planner):
//! DataFusion's `min` / `max` over a `real` or `double`, in aggregations and windows,
//! become `functions::extremes`' NaN-skipping ones, Trino's.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ExprSchema, Result};
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{AggregateUDF, Expr, ExprSchemable, LogicalPlan, WindowFunctionDefinition};
use datafusion::optimizer::AnalyzerRule;

use crate::functions::extremes::udaf;

/// The analyzer rule: DataFusion's `min` / `max` of a float become Trino's.
#[derive(Debug, Default)]
pub struct NanSkippingExtremes;

fn is_float(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e.get_type(schema as &dyn ExprSchema), Ok(DataType::Float32 | DataType::Float64))
}

/// Which of the two replaces `f`, if `f` is DataFusion's `min` or `max` of a float.
fn replacement(f: &AggregateUDF, args: &[Expr], schema: &DFSchema) -> Option<Arc<AggregateUDF>> {
    let max = match f.name() {
        "max" => true,
        "min" => false,
        _ => return None,
    };
    match args {
        [arg] if is_float(arg, schema) => Some(Arc::new(udaf(max))),
        _ => None,
    }
}

fn skipping(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::AggregateFunction(AggregateFunction { func, params }) => match replacement(&func, &params.args, schema) {
            Some(func) => Ok(Transformed::yes(Expr::AggregateFunction(AggregateFunction { func, params }))),
            None => Ok(Transformed::no(Expr::AggregateFunction(AggregateFunction { func, params }))),
        },
        Expr::WindowFunction(w) => {
            let WindowFunctionDefinition::AggregateUDF(f) = &w.fun else {
                return Ok(Transformed::no(Expr::WindowFunction(w)));
            };
            match replacement(f, &w.params.args, schema) {
                Some(func) => {
                    let WindowFunction { params, .. } = *w;
                    let fun = WindowFunctionDefinition::AggregateUDF(func);
                    Ok(Transformed::yes(Expr::WindowFunction(Box::new(WindowFunction { fun, params }))))
                }
                None => Ok(Transformed::no(Expr::WindowFunction(w))),
            }
        }
        e => Ok(Transformed::no(e)),
    }
}

impl AnalyzerRule for NanSkippingExtremes {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            if !matches!(plan, LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)) {
                return Ok(Transformed::no(plan));
            }
            let schema = merge_schema(&plan.inputs());
            plan.map_expressions(|e| e.transform_up(|e| skipping(e, &schema)))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "nan_skipping_extremes"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn rows(sql: &str) -> Vec<String> {
        let ctx = SessionContext::new();
        for f in crate::functions::extremes::functions() {
            ctx.register_udaf(f);
        }
        ctx.add_analyzer_rule(Arc::new(NanSkippingExtremes));
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        text.lines().map(str::to_string).collect()
    }

    fn cells(line: &str) -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    }

    /// Expected rows by Trino's rule: a number wins over NaN, NaN only where a group
    /// holds nothing else, NULL where it holds nothing.
    #[tokio::test]
    async fn nan_is_skipped_unless_alone() {
        let data = "(VALUES (1, 1.0e0), (1, 'NaN'::double), (1, 3.0e0), (2, 'NaN'::double), (2, 'NaN'::double), \
                    (3, NULL), (4, -2.5e0), (4, 'NaN'::double)) t(g, x)";
        let out = rows(&format!("SELECT g, min(x), max(x) FROM {data} GROUP BY g ORDER BY g")).await;
        assert_eq!(cells(&out[1]), ["g", "min(t.x)", "max(t.x)"], "names stay DataFusion's: {out:?}");
        assert_eq!(cells(&out[3]), ["1", "1.0", "3.0"], "{out:?}");
        assert_eq!(cells(&out[4]), ["2", "NaN", "NaN"], "{out:?}");
        assert_eq!(cells(&out[5]), ["3", "", ""], "{out:?}");
        assert_eq!(cells(&out[6]), ["4", "-2.5", "-2.5"], "{out:?}");
        // A `real` the same.
        let real = rows(&format!("SELECT g, max(CAST(x AS REAL)) FROM {data} GROUP BY g ORDER BY g")).await;
        let maxes: Vec<String> = real[3..7].iter().map(|l| cells(l)[1].clone()).collect();
        assert_eq!(maxes, ["3.0", "NaN", "", "-2.5"], "{real:?}");
        let whole = rows(&format!("SELECT min(x), max(x) FROM {data}")).await;
        assert_eq!(cells(&whole[3]), ["-2.5", "3.0"], "{whole:?}");
        // A frame of rows 1-2 of each partition, sliding: NaN leaves the frame again.
        let window = rows(
            "SELECT i, max(x) OVER (ORDER BY i ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM \
             (VALUES (1, 'NaN'::double), (2, 5.0e0), (3, 'NaN'::double), (4, 'NaN'::double), (5, 1.0e0)) t(i, x) ORDER BY i",
        )
        .await;
        let maxes: Vec<String> = window[3..8].iter().map(|l| cells(l)[1].clone()).collect();
        assert_eq!(maxes, ["NaN", "5.0", "5.0", "NaN", "1.0"], "{window:?}");
    }
}
