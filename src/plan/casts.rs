//! Trino's casts where Arrow's differ, rewritten by an analyzer rule that runs on the
//! coordinator after DataFusion's type coercion, when every cast's input type is
//! known; what it writes is encoded for workers like any expression.
//!
//! - To and from `JSON`, as calls of the JSON library's casts: Arrow's string casts
//!   would keep the text as it is, where Trino's `CAST('abc' AS JSON)` is the JSON
//!   string `"abc"`, `CAST(ARRAY[1, 2] AS JSON)` is `[1,2]` and
//!   `CAST(JSON '[1, 2]' AS ARRAY(INTEGER))` reads the value.
//! - A row to a row type of other field names, at any depth: Trino casts rows by
//!   position (Arrow by name), so `CAST(ROW(1, 'a') AS ROW(x BIGINT, y VARCHAR))` names
//!   the fields, and so does a cast of an array of rows.
//! - A floating point number or a decimal to an integer type rounds half away from zero, as
//!   Trino does; Arrow would truncate.
//! - A cast of a constant that cannot succeed is deferred to the rows that reach it
//!   (`functions::conditional::DEFERRED`).

use std::sync::{Arc, OnceLock};

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, ScalarUDF, TryCast};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::optimizer::AnalyzerRule;

use crate::functions::json::is_json;
use crate::functions::row_names;

#[derive(Debug, Default)]
pub struct TrinoCasts;

fn cast_udf(name: &str) -> Arc<ScalarUDF> {
    static CASTS: OnceLock<Vec<Arc<ScalarUDF>>> = OnceLock::new();
    let all = CASTS.get_or_init(|| {
        crate::functions::json::functions()
            .into_iter()
            .filter(|f| f.name().starts_with("cast_"))
            .map(Arc::new)
            .collect()
    });
    all.iter().find(|f| f.name() == name).cloned().expect("the JSON casts are in the library")
}

/// The call replacing a cast of `input` to `target`, if either side is JSON.
fn json_cast(input: &Expr, target: &Field, schema: &DFSchema) -> Result<Option<Expr>> {
    let (_, source) = input.to_field(schema)?;
    Ok(match (is_json(&source), is_json(target)) {
        (true, true) => Some(input.clone()),
        (false, true) => {
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(cast_udf("cast_to_json"), vec![input.clone()])))
        }
        (true, false) => {
            // The target type travels as a typed NULL, so nested types keep their fields.
            let target_type = Expr::Literal(ScalarValue::try_new_null(target.data_type())?, None);
            let args = vec![input.clone(), target_type];
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(cast_udf("cast_from_json"), args)))
        }
        (false, false) => None,
    })
}

/// A cast to a type holding rows whose field names differ from the input's, at any
/// depth (a row, an array of rows, a map to rows): Trino matches fields by position,
/// Arrow by name, so the input is renamed by position first
/// (`functions::row_names`) and Arrow casts that. NULL rows stay NULL.
fn positional_cast(input: &Expr, target: &Field, schema: &DFSchema, try_cast: bool) -> Result<Option<Expr>> {
    let Some(renamed) = row_names::renamed_type(&input.get_type(schema)?, target.data_type()) else {
        return Ok(None);
    };
    let shape = Expr::Literal(ScalarValue::try_new_null(&renamed)?, None);
    let value = Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(rename_udf(), vec![input.clone(), shape])));
    Ok(Some(match try_cast {
        true => Expr::TryCast(TryCast::new(value, target.data_type().clone())),
        false => Expr::Cast(Cast::new(value, target.data_type().clone())),
    }))
}

fn rename_udf() -> Arc<ScalarUDF> {
    static RENAME: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    RENAME.get_or_init(|| Arc::new(row_names::functions().remove(0))).clone()
}

/// A cast of a floating point number or a decimal with a fraction to an integer type,
/// of the number rounded half away from zero: Trino rounds (`CAST(874.6e0 AS bigint)`
/// and `CAST(DECIMAL '874.6' AS bigint)` are 875), Arrow truncates.
fn rounded_cast(input: &Expr, target: &Field, schema: &DFSchema, try_cast: bool) -> Result<Option<Expr>> {
    let fraction = match input.get_type(schema)? {
        t if t.is_floating() => true,
        DataType::Decimal32(_, s) | DataType::Decimal64(_, s) | DataType::Decimal128(_, s) => s > 0,
        DataType::Decimal256(_, s) => s > 0,
        _ => false,
    };
    if !fraction || !target.data_type().is_integer() {
        return Ok(None);
    }
    let rounded = Box::new(datafusion::functions::math::expr_fn::round(vec![input.clone()]));
    Ok(Some(match try_cast {
        true => Expr::TryCast(TryCast::new(rounded, target.data_type().clone())),
        false => Expr::Cast(Cast::new(rounded, target.data_type().clone())),
    }))
}

/// A cast of a constant that fails, over `deferred(constant)`; see
/// `functions::conditional::DEFERRED`. The simplifier's own folding tells which fail.
fn deferred_cast(cast: &Expr, input: &Expr, simplifier: &ExprSimplifier) -> Result<Option<Expr>> {
    if !input.column_refs().is_empty() || input.is_volatile() {
        return Ok(None);
    }
    if simplifier.simplify(cast.clone()).is_ok() {
        return Ok(None);
    }
    let deferred = Expr::ScalarFunction(ScalarFunction::new_udf(deferred_udf(), vec![input.clone()]));
    let Expr::Cast(Cast { field, .. }) = cast else { return Ok(None) };
    Ok(Some(Expr::Cast(Cast::new_from_field(Box::new(deferred), field.clone()))))
}

fn deferred_udf() -> Arc<ScalarUDF> {
    static DEFERRED: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    DEFERRED
        .get_or_init(|| {
            let all = crate::functions::conditional::scalar_functions();
            let name = crate::functions::conditional::DEFERRED;
            Arc::new(all.into_iter().find(|f| f.name() == name).expect("deferred is in the library"))
        })
        .clone()
}

/// The first of Trino's casts that applies to a cast of `input` to `target`.
fn trino_cast(input: &Expr, target: &Field, schema: &DFSchema, try_cast: bool) -> Result<Option<Expr>> {
    if let Some(r) = json_cast(input, target, schema)? {
        return Ok(Some(r));
    }
    if let Some(r) = positional_cast(input, target, schema, try_cast)? {
        return Ok(Some(r));
    }
    rounded_cast(input, target, schema, try_cast)
}

fn rewrite(e: Expr, schema: &DFSchema, simplifier: &ExprSimplifier) -> Result<Transformed<Expr>> {
    let replacement = match &e {
        Expr::Cast(Cast { expr, field }) => trino_cast(expr, field, schema, false)?,
        Expr::TryCast(TryCast { expr, field }) => trino_cast(expr, field, schema, true)?,
        _ => None,
    };
    let changed = replacement.is_some();
    let out = replacement.unwrap_or(e);
    let deferred = match &out {
        Expr::Cast(Cast { expr, .. }) => deferred_cast(&out, expr, simplifier)?,
        _ => None,
    };
    Ok(match (deferred, changed) {
        (Some(d), _) => Transformed::yes(d),
        (None, true) => Transformed::yes(out),
        (None, false) => Transformed::no(out),
    })
}

impl AnalyzerRule for TrinoCasts {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        // One simplifier for the statement: it tells which constant casts fail.
        let context = SimplifyContext::builder().with_config_options(Arc::new(config.clone())).build();
        let simplifier = ExprSimplifier::new(context);
        plan.transform_up_with_subqueries(|plan| {
            let mut schema = merge_schema(&plan.inputs());
            if let LogicalPlan::TableScan(ts) = &plan {
                schema.merge(&DFSchema::try_from_qualified_schema(ts.table_name.clone(), &ts.source.schema())?);
            }
            super::rewrite_keeping_names(plan, |e| rewrite(e, &schema, &simplifier))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "trino_casts"
    }
}
