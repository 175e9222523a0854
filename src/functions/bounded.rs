//! Limits on what one call of a function may make. `functions::register` wraps the
//! functions whose result can be far larger than their arguments (`repeat`, `lpad`,
//! `rpad`, `replace`, `sequence` and its DataFusion names, `array_repeat`,
//! `array_resize`) in [`Bounded`], which estimates the result from the arguments
//! before the function runs and refuses a call past the limits. The planner owns
//! nothing here but the thread-local budget of [`while_planning`].
//!
//! Why before: the memory pools only see what operators reserve, and a function's
//! result is made before any operator holds it. `length(repeat('x', 2000000000))`
//! took the coordinator 7.8 GB while DataFusion folded it as a constant, outside
//! every pool and limit; the same call inside a worker's projection is as unbounded.
//!
//! The limits: one value at most [`VALUE_LIMIT`] bytes, one call (a batch, or a
//! constant folded while planning) at most [`CALL_LIMIT`], both
//! `EXCEEDED_FUNCTION_MEMORY_LIMIT`; a `sequence` at most Trino's 10,000 entries
//! (`INVALID_FUNCTION_ARGUMENT`, Trino's message). While a statement is planned its
//! constant calls together may make at most [`PLANNING_LIMIT`]; past that a call
//! answers an error, which DataFusion's constant folding takes as "leave it to run
//! time", so the expression is computed where the plan runs, under the limits above.

use std::cell::Cell;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, IntervalMonthDayNano, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::udf_eq::UdfEq;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use super::FunctionError;
use crate::error_code::ErrorCode;

/// The most bytes one value made by a bounded function may hold.
pub const VALUE_LIMIT: u128 = 16 << 20;
/// The most bytes one call of a bounded function may make, over all its rows.
pub const CALL_LIMIT: u128 = 256 << 20;
/// The most bytes the constant calls of one statement may make while it is planned.
pub const PLANNING_LIMIT: usize = 16 << 20;
/// Trino's limit on the entries of one `sequence`.
pub const SEQUENCE_ENTRIES: u128 = 10_000;

/// What a function's result can grow with, and so how it is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Growth {
    /// `lpad(s, n [, fill])`, `rpad`: `n` characters.
    Pad,
    /// `replace(s, from, to)`: `to` for every `from`.
    Replace,
    /// `sequence(start, stop [, step])` under Trino's name: at most 10,000 entries.
    Sequence,
    /// `generate_series`, `range`: DataFusion's names of the same, bounded in bytes.
    Series,
    /// `array_repeat(x, n)`: `n` copies of `x`.
    ArrayRepeat,
    /// `array_resize(a, n [, x])`: `n` entries.
    ArrayResize,
    /// `regexp_replace(s, pattern, to, flags)`, DataFusion's form: `to` at every
    /// character at most, under the `g` flag.
    PatternReplace,
}

/// The functions wrapped, by DataFusion's (or Trino's) name.
pub const BOUNDED: [(&str, Growth); 7] = [
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("replace", Growth::Replace),
    ("generate_series", Growth::Series),
    ("range", Growth::Series),
    ("array_repeat", Growth::ArrayRepeat),
    ("array_resize", Growth::ArrayResize),
];

thread_local! {
    /// Bytes the statement being planned on this thread may still fold; `None` off the
    /// planning threads.
    static PLANNING_BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Runs `plan` with a budget of [`PLANNING_LIMIT`] bytes for the constants it folds.
/// Planning runs on a thread of its own (`coordinator::planning`), so a thread-local
/// budget is the statement's.
pub fn while_planning<R>(plan: impl FnOnce() -> R) -> R {
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            PLANNING_BUDGET.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(PLANNING_BUDGET.with(|b| b.replace(Some(PLANNING_LIMIT))));
    plan()
}

/// Takes `bytes` from the planning budget, if this thread has one. An error tells
/// DataFusion's constant folding to leave the call for run time.
fn charge_planning(bytes: u128) -> Result<()> {
    PLANNING_BUDGET.with(|budget| match budget.get() {
        None => Ok(()),
        Some(left) if bytes <= left as u128 => {
            budget.set(Some(left - bytes as usize));
            Ok(())
        }
        Some(_) => Err(DataFusionError::Execution("left to run time: over the planning budget for constants".into())),
    })
}

/// What a call would make, estimated from its arguments: an upper bound, or the exact
/// size where it is cheap to know.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Bytes of the largest value.
    pub largest: u128,
    /// Bytes of all values.
    pub total: u128,
    /// Entries of the longest array made (arrays only).
    pub entries: u128,
    /// `entries` is an estimate within a factor of 2 (a sequence of dates or times,
    /// whose months and days differ in length), not an exact count.
    pub approximate: bool,
}

impl Size {
    fn add(&mut self, bytes: u128, entries: u128) {
        self.largest = self.largest.max(bytes);
        self.total = self.total.saturating_add(bytes);
        self.entries = self.entries.max(entries);
    }
}

fn exceeded(name: &str, what: &str, bytes: u128, limit: u128) -> DataFusionError {
    let message = format!("{name} would make {what} of {bytes} bytes, more than the {limit} a function may make");
    DataFusionError::External(Box::new(FunctionError { code: ErrorCode::ExceededFunctionMemoryLimit, message }))
}

fn too_many_entries() -> DataFusionError {
    super::invalid_argument(format!("result of sequence function must not have more than {SEQUENCE_ENTRIES} entries"))
}

/// Checks `size` against the limits for a call of `name` growing as `growth`.
pub fn check(name: &str, growth: Growth, size: Size) -> Result<()> {
    // An approximate count refuses only what is surely over; the result's own count
    // is checked after (`check_entries`).
    let most = if size.approximate { 2 * SEQUENCE_ENTRIES } else { SEQUENCE_ENTRIES };
    if growth == Growth::Sequence && size.entries > most {
        return Err(too_many_entries());
    }
    if size.largest > VALUE_LIMIT {
        return Err(exceeded(name, "a value", size.largest, VALUE_LIMIT));
    }
    if size.total > CALL_LIMIT {
        return Err(exceeded(name, "values", size.total, CALL_LIMIT));
    }
    charge_planning(size.total)
}

/// One argument of a call, read row by row; a constant answers for every row.
struct Column<'a>(&'a ColumnarValue);

impl<'a> Column<'a> {
    fn ints(&self) -> Result<Ints> {
        Ok(match self.0 {
            ColumnarValue::Scalar(s) => Ints::Const(match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(v) => v,
                _ => None,
            }),
            ColumnarValue::Array(a) => Ints::Values(cast(a, &DataType::Int64)?.as_primitive().clone()),
        })
    }

    fn str(&self, row: usize) -> Option<&'a str> {
        match self.0 {
            ColumnarValue::Scalar(s) => s.try_as_str().flatten(),
            ColumnarValue::Array(a) => string_at(a, row),
        }
    }
}

fn string_at(a: &ArrayRef, row: usize) -> Option<&str> {
    if a.is_null(row) {
        return None;
    }
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(row)),
        DataType::Utf8View => Some(a.as_string_view().value(row)),
        _ => None,
    }
}

enum Ints {
    Const(Option<i64>),
    Values(Int64Array),
}

impl Ints {
    fn at(&self, row: usize) -> Option<i64> {
        match self {
            Ints::Const(v) => *v,
            Ints::Values(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// The rows a call's arguments describe: one where every argument is a constant.
fn rows(args: &ScalarFunctionArgs) -> usize {
    match args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
        true => 1,
        false => args.number_rows,
    }
}

/// The bytes one value of an array's entries takes, roughly: a string's length, a
/// fixed width's width, 16 for anything else.
fn entry_bytes(x: &ColumnarValue, row: usize) -> u128 {
    match Column(x).str(row) {
        Some(s) => s.len().max(1) as u128,
        None => match x.data_type().primitive_width() {
            Some(w) => w as u128,
            None => 16,
        },
    }
}

/// The estimate of a call's result.
pub fn estimate(growth: Growth, args: &ScalarFunctionArgs) -> Result<Size> {
    let a = &args.args;
    let mut size = Size::default();
    match growth {
        Growth::Pad => {
            let n = Column(&a[1]).ints()?;
            for row in 0..rows(args) {
                let s = Column(&a[0]).str(row).map_or(0, str::len) as u128;
                // A character of the fill takes up to its widest character's bytes.
                let width = match a.get(2).map(|f| Column(f).str(row)) {
                    Some(Some(fill)) if !fill.is_ascii() => 4,
                    _ => 1,
                };
                size.add(s + width * n.at(row).unwrap_or(0).max(0) as u128, 0);
            }
        }
        Growth::Replace => {
            for row in 0..rows(args) {
                // Without a replacement, `replace` removes: it grows nothing.
                let Some(to) = a.get(2) else { continue };
                let (s, from, to) = (Column(&a[0]).str(row), Column(&a[1]).str(row), Column(to).str(row));
                let (Some(s), Some(from), Some(to)) = (s, from, to) else { continue };
                // Only a longer replacement grows the text; count what it replaces (an
                // empty search string is found around every character).
                let found = match from.is_empty() {
                    true => s.chars().count() as u128 + 1,
                    false => s.matches(from).count() as u128,
                };
                let bytes = match to.len() > from.len() {
                    true => s.len() as u128 + found * (to.len() - from.len()) as u128,
                    false => s.len() as u128,
                };
                size.add(bytes, 0);
            }
        }
        Growth::PatternReplace => {
            for row in 0..rows(args) {
                let (Some(s), Some(to)) = (Column(&a[0]).str(row), Column(&a[2]).str(row)) else { continue };
                let every = a.get(3).and_then(|f| Column(f).str(row)).is_some_and(|f| f.contains('g'));
                let hits = if every { s.chars().count() as u128 + 1 } else { 1 };
                size.add(s.len() as u128 + hits * to.len() as u128, 0);
            }
        }
        Growth::Sequence | Growth::Series => series(args, &mut size)?,
        Growth::ArrayRepeat => {
            let n = Column(&a[1]).ints()?;
            for row in 0..rows(args) {
                let entries = n.at(row).unwrap_or(0).max(0) as u128;
                size.add(entries * entry_bytes(&a[0], row), entries);
            }
        }
        Growth::ArrayResize => {
            let n = Column(&a[1]).ints()?;
            for row in 0..rows(args) {
                let entries = n.at(row).unwrap_or(0).max(0) as u128;
                let fill = a.get(2).map_or(8, |x| entry_bytes(x, row));
                size.add(entries * fill.max(8), entries);
            }
        }
    }
    Ok(size)
}

/// Nanoseconds in one unit of a `sequence` bound's type (1 for integers).
fn unit_nanos(t: &DataType) -> i128 {
    match t {
        DataType::Date32 => 86_400_000_000_000,
        DataType::Date64 => 1_000_000,
        DataType::Timestamp(TimeUnit::Second, _) => 1_000_000_000,
        DataType::Timestamp(TimeUnit::Millisecond, _) => 1_000_000,
        DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000,
        _ => 1,
    }
}

/// The shortest a step can be, in nanoseconds (or units, for integers): a month at
/// least 28 days, a day at least 23 hours. `None` for a step of mixed signs.
fn step_at(step: Option<&ColumnarValue>, row: usize, ints: &Option<Ints>, temporal: bool) -> Option<i128> {
    if let Some(ints) = ints {
        return ints.at(row).map(|s| s as i128);
    }
    let interval = match step {
        None if temporal => return Some(86_400_000_000_000),
        None => return Some(1),
        Some(ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(v))) => *v,
        Some(ColumnarValue::Array(a)) if matches!(a.data_type(), DataType::Interval(_)) => {
            let a = cast(a, &DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano)).ok()?;
            let a = a.as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>();
            a.is_valid(row).then(|| a.value(row))
        }
        _ => None,
    }?;
    let IntervalMonthDayNano { months, days, nanoseconds } = interval;
    let parts = [months as i128 * 28 * 86_400_000_000_000, days as i128 * 23 * 3_600_000_000_000, nanoseconds as i128];
    match (parts.iter().all(|p| *p >= 0), parts.iter().all(|p| *p <= 0)) {
        (true, _) | (_, true) => Some(parts.iter().sum()),
        _ => None,
    }
}

/// The entries of each `sequence(start, stop [, step])` and their bytes.
fn series(args: &ScalarFunctionArgs, size: &mut Size) -> Result<()> {
    let a = &args.args;
    // One argument: `range(stop)` from 0.
    let (start, stop, step) = match a.len() {
        1 => (None, &a[0], None),
        _ => (Some(&a[0]), &a[1], a.get(2)),
    };
    let factor = unit_nanos(&stop.data_type());
    let temporal = factor != 1 || matches!(stop.data_type(), DataType::Timestamp(_, _));
    size.approximate = temporal;
    let bound = |c: &ColumnarValue| -> Result<Ints> {
        let as_int = match c {
            ColumnarValue::Scalar(s) => {
                ColumnarValue::Scalar(s.cast_to(&DataType::Int64).unwrap_or(ScalarValue::Int64(None)))
            }
            ColumnarValue::Array(a) => ColumnarValue::Array(cast(a, &DataType::Int64)?),
        };
        Column(&as_int).ints()
    };
    let (stop_at, start_at) = (bound(stop)?, start.map(bound).transpose()?);
    let step_ints = match step {
        Some(s) if s.data_type().is_integer() => Some(Column(s).ints()?),
        _ => None,
    };
    for row in 0..rows(args) {
        let (from, to) = (start_at.as_ref().map_or(Some(0), |s| s.at(row)), stop_at.at(row));
        let (Some(from), Some(to)) = (from, to) else { continue };
        let Some(step) = step_at(step, row, &step_ints, temporal) else { continue };
        let span = (to as i128 - from as i128) * factor;
        // A step of 0, or one that walks away from the stop, is the function's to judge.
        if step == 0 || span.signum() * step.signum() < 0 {
            continue;
        }
        let entries = (span / step).unsigned_abs() + 1;
        size.add(entries * 8, entries);
    }
    Ok(())
}

/// Trino's exact limit on a `sequence`'s entries, checked on the result: the estimate
/// of a month's or a day's length can be off by a few entries.
fn check_entries(result: &ColumnarValue) -> Result<()> {
    let longest = match result {
        ColumnarValue::Scalar(ScalarValue::List(l)) => longest_list(l),
        ColumnarValue::Array(a) => a.as_list_opt::<i32>().and_then(longest_list),
        _ => None,
    };
    match longest {
        Some(n) if n as u128 > SEQUENCE_ENTRIES => Err(too_many_entries()),
        _ => Ok(()),
    }
}

fn longest_list(l: &datafusion::arrow::array::ListArray) -> Option<i32> {
    l.offsets().windows(2).map(|w| w[1] - w[0]).max()
}

/// A function whose calls are checked against the limits before they run.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Bounded {
    inner: UdfEq<Arc<dyn ScalarUDFImpl>>,
    growth: Growth,
    /// Trino's name when it differs from the inner function's (`sequence`).
    name: Option<&'static str>,
}

impl Bounded {
    pub fn wrap(inner: &ScalarUDF, growth: Growth) -> ScalarUDF {
        ScalarUDF::new_from_impl(Bounded { inner: Arc::clone(inner.inner()).into(), growth, name: None })
    }

    /// `sequence`: Trino's function, DataFusion's `generate_series` under Trino's limit.
    pub fn sequence(generate_series: &ScalarUDF) -> ScalarUDF {
        let inner = Arc::clone(generate_series.inner()).into();
        ScalarUDF::new_from_impl(Bounded { inner, growth: Growth::Sequence, name: Some("sequence") })
    }
}

#[warn(clippy::missing_trait_methods)]
impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.name.unwrap_or_else(|| self.inner.name())
    }
    fn display_name(&self, args: &[Expr]) -> Result<String> {
        #[expect(deprecated)]
        self.inner.display_name(args)
    }
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.schema_name(args)
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn is_nullable(&self, args: &[Expr], schema: &dyn datafusion::common::ExprSchema) -> bool {
        #[expect(deprecated)]
        self.inner.is_nullable(args, schema)
    }
    fn is_strict(&self) -> bool {
        self.inner.is_strict()
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        check(self.name(), self.growth, estimate(self.growth, &args)?)?;
        let result = self.inner.invoke_with_args(args)?;
        if self.growth == Growth::Sequence {
            check_entries(&result)?;
        }
        Ok(result)
    }
    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let inner = self.inner.with_updated_config(config)?;
        let (growth, name) = (self.growth, self.name);
        Some(ScalarUDF::new_from_impl(Bounded { inner: Arc::clone(inner.inner()).into(), growth, name }))
    }
    fn aliases(&self) -> &[String] {
        match self.name {
            Some(_) => &[],
            None => self.inner.aliases(),
        }
    }
    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }
    fn preimage(
        &self,
        args: &[Expr],
        lit_expr: &Expr,
        info: &SimplifyContext,
    ) -> Result<datafusion::logical_expr::preimage::PreimageResult> {
        self.inner.preimage(args, lit_expr, info)
    }
    fn conditional_arguments<'a>(&self, args: &'a [Expr]) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.conditional_arguments(args)
    }
    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }
    fn evaluate_bounds(&self, input: &[&Interval]) -> Result<Interval> {
        self.inner.evaluate_bounds(input)
    }
    fn propagate_constraints(&self, interval: &Interval, inputs: &[&Interval]) -> Result<Option<Vec<Interval>>> {
        self.inner.propagate_constraints(interval, inputs)
    }
    fn struct_field_mapping(
        &self,
        literal_args: &[Option<ScalarValue>],
    ) -> Option<datafusion::logical_expr::StructFieldMapping> {
        self.inner.struct_field_mapping(literal_args)
    }
    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }
    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.preserves_lex_ordering(inputs)
    }
    fn strictly_order_preserving(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.strictly_order_preserving(inputs)
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
    fn placement(
        &self,
        args: &[datafusion::logical_expr::ExpressionPlacement],
    ) -> datafusion::logical_expr::ExpressionPlacement {
        self.inner.placement(args)
    }
}

/// For the library's own functions that build their values piece by piece
/// (`regexp_replace`, `format`): checks the value being built, `value` bytes so far,
/// and the call's, `call` bytes so far, as they grow, since how much a pattern
/// matches is known only by matching it.
pub fn check_growing(name: &str, value: usize, call: usize) -> Result<()> {
    if value as u128 > VALUE_LIMIT {
        return Err(exceeded(name, "a value", value as u128, VALUE_LIMIT));
    }
    match call as u128 > CALL_LIMIT {
        true => Err(exceeded(name, "values", call as u128, CALL_LIMIT)),
        false => Ok(()),
    }
}

/// For the same functions once done: takes what the call made from the planning
/// budget, if it runs while planning.
pub fn made(bytes: usize) -> Result<()> {
    charge_planning(bytes as u128)
}

#[cfg(test)]
#[path = "bounded_tests.rs"]
mod tests;
