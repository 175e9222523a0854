//! Trino's integer arithmetic: `+`, `-` and `*` of integers, and `sum` of them, fail
//! with `NUMERIC_VALUE_OUT_OF_RANGE` on overflow instead of wrapping round, as
//! DataFusion's do (`9223372036854775807 + 1` was -9223372036854775808).
//!
//! - `CheckedArithmetic`, an analyzer rule the coordinator's sessions run after type
//!   coercion, replaces each integer `+ - *` with a call of `checked_add`,
//!   `checked_subtract` or `checked_multiply`, which use Arrow's checked kernels. The
//!   calls are named as the operators were (`a + b`), so no column a plan refers to
//!   changes its name.
//!   Unary minus of an integer becomes `checked_negate`, named `(- a)`.
//! - `plan::checked_sum` replaces `sum` itself for integers and decimals.
//! - [`arithmetic_error_code`] gives Trino's code for Arrow's overflow, division and
//!   cast failures, which DataFusion reports as plain Arrow errors.
//!
//! [`register`] puts the functions into a context; the coordinator's planning
//! sessions and every worker's task context have them, since plans name them.

use datafusion::common::{internal_datafusion_err, internal_err};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Datum};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ExprSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error_code::ErrorCode;

/// An integer result out of its type's range (Trino's `NUMERIC_VALUE_OUT_OF_RANGE`):
/// a function error of that code, as `TRY` and the error mapping read it.
pub struct NumericValueOutOfRange;

impl NumericValueOutOfRange {
    pub fn error(message: impl Into<String>) -> DataFusionError {
        let error =
            crate::functions::FunctionError { code: ErrorCode::NumericValueOutOfRange, message: message.into() };
        DataFusionError::External(Box::new(error))
    }
}

/// Whether `e` says a value did not fit its type: ours, Arrow's checked kernels' and
/// casts' (`CAST(300 AS TINYINT)`), however DataFusion wrapped it.
#[cfg(test)]
pub fn is_out_of_range(e: &DataFusionError) -> bool {
    arithmetic_error_code(e) == Some(ErrorCode::NumericValueOutOfRange)
}

/// Trino's code for an arithmetic or cast failure in `e`, however DataFusion wrapped
/// it: `NUMERIC_VALUE_OUT_OF_RANGE` (an overflow, a cast out of range),
/// `DIVISION_BY_ZERO`, `INVALID_CAST_ARGUMENT` (`CAST('abc' AS INTEGER)`). The
/// coordinator's planning (constant expressions) and the workers' task failures ask.
pub fn arithmetic_error_code(e: &DataFusionError) -> Option<ErrorCode> {
    let out_of_range = Some(ErrorCode::NumericValueOutOfRange);
    match e.find_root() {
        DataFusionError::External(inner) => inner.downcast_ref::<crate::functions::FunctionError>().map(|f| f.code),
        DataFusionError::ArrowError(a, _) => match a.as_ref() {
            ArrowError::ExternalError(inner) => inner.downcast_ref::<crate::functions::FunctionError>().map(|f| f.code),
            ArrowError::ArithmeticOverflow(_) => out_of_range,
            ArrowError::DivideByZero => Some(ErrorCode::DivisionByZero),
            ArrowError::CastError(m) if m.contains("Can't cast value") || m.contains("overflow") => out_of_range,
            ArrowError::CastError(m) if m.starts_with("Cannot cast") => Some(ErrorCode::InvalidCastArgument),
            ArrowError::InvalidArgumentError(m) if m.contains("too large to store in a Decimal") => out_of_range,
            ArrowError::ComputeError(m) if m.contains("overflow") => out_of_range,
            _ => None,
        },
        DataFusionError::Execution(m) if m.contains("Overflow") || m.contains("overflow") => out_of_range,
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Subtract,
    Multiply,
    /// Unary minus (`-x`), whose wrapping negation took `-(-2147483648)` to itself.
    Negate,
}

impl Op {
    fn of(op: Operator) -> Option<Op> {
        match op {
            Operator::Plus => Some(Op::Add),
            Operator::Minus => Some(Op::Subtract),
            Operator::Multiply => Some(Op::Multiply),
            _ => None,
        }
    }

    fn operator(self) -> Operator {
        match self {
            Op::Add => Operator::Plus,
            Op::Subtract | Op::Negate => Operator::Minus,
            Op::Multiply => Operator::Multiply,
        }
    }

    fn arity(self) -> usize {
        if self == Op::Negate {
            1
        } else {
            2
        }
    }
}

/// `checked_add(a, b)` and its siblings: the operator on two integers of one type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOperator {
    op: Op,
    name: &'static str,
    signature: Signature,
}

impl CheckedOperator {
    fn new(op: Op) -> Self {
        let name = match op {
            Op::Add => "checked_add",
            Op::Subtract => "checked_subtract",
            Op::Multiply => "checked_multiply",
            Op::Negate => "checked_negate",
        };
        CheckedOperator { op, name, signature: Signature::any(op.arity(), Volatility::Immutable) }
    }
}

fn datum(v: &ColumnarValue) -> Result<Box<dyn Datum>> {
    Ok(match v {
        ColumnarValue::Array(a) => Box::new(a.clone()),
        ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
    })
}

impl ScalarUDFImpl for CheckedOperator {
    fn name(&self) -> &str {
        self.name
    }

    /// The operator's own name (`a + b`, `(- a)`), so that plans keep their column
    /// names.
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        match args {
            [a] => Ok(format!("(- {})", a.schema_name())),
            [a, b] => Ok(format!("{} {} {}", a.schema_name(), self.op.operator(), b.schema_name())),
            _ => internal_err!("{} takes {} arguments", self.name, self.op.arity()),
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        arg_types.first().cloned().ok_or_else(|| internal_datafusion_err!("{} takes arguments", self.name))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let wrong = || internal_datafusion_err!("{} takes {} arguments", self.name, self.op.arity());
        let (a, b) = match args.args.as_slice() {
            [a] if self.op == Op::Negate => (a, a),
            [a, b] if self.op != Op::Negate => (a, b),
            _ => return Err(wrong()),
        };
        let (l, r) = (datum(a)?, datum(b)?);
        let out: std::result::Result<ArrayRef, ArrowError> = match self.op {
            Op::Add => numeric::add(l.as_ref(), r.as_ref()),
            Op::Subtract => numeric::sub(l.as_ref(), r.as_ref()),
            Op::Multiply => numeric::mul(l.as_ref(), r.as_ref()),
            Op::Negate => numeric::neg(a.to_array(1)?.as_ref()),
        };
        let out = out.map_err(|e| match e {
            ArrowError::ArithmeticOverflow(m) => NumericValueOutOfRange::error(format!("integer overflow: {m}")),
            other => DataFusionError::ArrowError(Box::new(other), None),
        })?;
        match (a, b) {
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)) => {
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
            _ => Ok(ColumnarValue::Array(out)),
        }
    }
}

fn udf(op: Op) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(CheckedOperator::new(op)))
}

/// Adds the checked operators and the checked `sum` to `ctx`'s functions.
pub fn register(ctx: &SessionContext) {
    for op in [Op::Add, Op::Subtract, Op::Multiply, Op::Negate] {
        ctx.register_udf(udf(op).as_ref().clone());
    }
    ctx.register_udaf(super::checked_sum::checked_sum());
}

/// The analyzer rule: integer `+ - *` become the checked functions.
#[derive(Debug, Default)]
pub struct CheckedArithmetic;

fn is_integer(t: &DataType) -> bool {
    t.is_signed_integer() || t.is_unsigned_integer()
}

fn checked(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    if let Expr::Negative(x) = &e {
        return match x.get_type(schema as &dyn ExprSchema) {
            Ok(t) if is_integer(&t) => {
                let call = ScalarFunction::new_udf(udf(Op::Negate), vec![x.as_ref().clone()]);
                Ok(Transformed::yes(Expr::ScalarFunction(call)))
            }
            _ => Ok(Transformed::no(e)),
        };
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else { return Ok(Transformed::no(e)) };
    let Some(op) = Op::of(*op) else { return Ok(Transformed::no(e)) };
    let (lt, rt) = match (left.get_type(schema as &dyn ExprSchema), right.get_type(schema as &dyn ExprSchema)) {
        (Ok(l), Ok(r)) => (l, r),
        _ => return Ok(Transformed::no(e)),
    };
    if lt != rt || !is_integer(&lt) {
        return Ok(Transformed::no(e));
    }
    let args = vec![left.as_ref().clone(), right.as_ref().clone()];
    Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(udf(op), args))))
}

impl AnalyzerRule for CheckedArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let mut schema = merge_schema(&plan.inputs());
            if let LogicalPlan::TableScan(ts) = &plan {
                schema.merge(&DFSchema::try_from_qualified_schema(ts.table_name.clone(), &ts.source.schema())?);
            }
            // Names kept: a window's name holds its ORDER BY (`x * 2`), which the
            // nodes above read.
            super::rewrite_keeping_names(plan, |e| checked(e, &schema))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "checked_arithmetic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(sql: &str) -> Result<Vec<String>> {
        let ctx = SessionContext::new();
        register(&ctx);
        ctx.add_analyzer_rule(Arc::new(CheckedArithmetic));
        let batches = ctx.sql(sql).await?.collect().await?;
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
        Ok(text.lines().map(str::to_string).collect())
    }

    #[tokio::test]
    async fn integer_overflow_is_an_error_and_names_stay() {
        for sql in [
            "SELECT 9223372036854775807 + 1",
            "SELECT 4611686018427387904 * 4",
            "SELECT CAST(-9223372036854775807 AS BIGINT) - 2",
            "SELECT CAST(2147483647 AS INTEGER) + CAST(1 AS INTEGER)",
            "SELECT x * x FROM (VALUES (CAST(3037000500 AS BIGINT))) t(x)",
            "SELECT abs(x) FROM (VALUES (CAST(-9223372036854775807 AS BIGINT) - 1)) t(x)",
            "SELECT -x FROM (VALUES (CAST(-2147483648 AS INTEGER))) t(x)",
            "SELECT CAST(x AS TINYINT) FROM (VALUES (300)) t(x)",
            "SELECT CAST(x AS DECIMAL(3,0)) FROM (VALUES (99999)) t(x)",
            "SELECT CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0)) * 10",
        ] {
            let e = run(sql).await.expect_err(sql);
            assert!(is_out_of_range(&e), "{sql}: {e}");
        }
        for (sql, code) in [
            ("SELECT x / 0 FROM (VALUES (1)) t(x)", ErrorCode::DivisionByZero),
            ("SELECT x % 0 FROM (VALUES (1)) t(x)", ErrorCode::DivisionByZero),
            ("SELECT CAST(x AS INTEGER) FROM (VALUES ('abc')) t(x)", ErrorCode::InvalidCastArgument),
        ] {
            let e = run(sql).await.expect_err(sql);
            assert_eq!(arithmetic_error_code(&e), Some(code), "{sql}: {e}");
        }
        let fine = run("SELECT a + b, a * b - 1, -a FROM (VALUES (CAST(2 AS BIGINT), CAST(3 AS BIGINT))) t(a, b)")
            .await
            .unwrap();
        assert!(fine[1].contains("t.a + t.b") && fine[1].contains("t.a * t.b - Int64(1)"), "{fine:?}");
        assert!(fine[1].contains("(- t.a)") && fine[3].contains("| -2 "), "{fine:?}");
        assert!(fine[3].contains("| 5 ") && fine[3].contains("| 5 "), "{fine:?}");
        // Not integers: decimals and floats keep DataFusion's operators.
        let f = run("SELECT 1.5e308 * 10").await.unwrap();
        assert!(f.iter().any(|l| l.contains("inf")), "{f:?}");
    }
}
