//! `EXCEPT ALL` and `INTERSECT ALL` with SQL's multiset meaning, by an analyzer rule
//! the coordinator's session runs after DataFusion's type coercion.
//!
//! DataFusion 55 plans both as a semi or anti join of all columns and nothing else
//! (apache/datafusion issues 12955 and 12956), so `EXCEPT ALL` drops every left copy
//! of a row found on the right and `INTERSECT ALL` keeps every left copy of a row
//! found there. SQL wants `max(0, m - n)` and `min(m, n)` copies of a row that the
//! left side has `m` times and the right side `n` times. Here both sides are counted
//! (grouped by all their columns), the counts joined on the columns (NULLs equal), and
//! each left row repeated as often as SQL keeps it. Grouping rather than numbering
//! copies (`row_number()`) keeps the plan to aggregates and joins, which every stage
//! cut handles, and sends each distinct row once.
//!
//! At the analyzer stage, before any subquery is decorrelated, only a set operation
//! makes a semi or anti join whose keys compare NULLs as equal and that has no other
//! condition; that is the shape this rule looks for. A left side that is already
//! distinct (plain `EXCEPT` and `INTERSECT`) is left alone: each of its rows is one
//! copy, and the join is right as it is.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality};
use datafusion::error::Result;
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_nested::expr_fn::range;
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{cast, col, lit, when, Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct CountedSetOperations;

/// The names of the keys and counts, one per side so the join's keys cannot be
/// mistaken for each other.
const LEFT_COUNT: &str = "__flotilla_left_count";
const RIGHT_COUNT: &str = "__flotilla_right_count";
const LEFT_KEY: &str = "__flotilla_left_key";
const RIGHT_KEY: &str = "__flotilla_right_key";
const COPIES: &str = "__flotilla_copies";

impl AnalyzerRule for CountedSetOperations {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match &node {
            LogicalPlan::Join(join) if is_set_operation_all(join) => Ok(Transformed::yes(counted(join)?)),
            _ => Ok(Transformed::no(node)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "counted_set_operations"
    }
}

/// Whether `join` is DataFusion's plan of `EXCEPT ALL` or `INTERSECT ALL`. Its keys
/// are the two sides' columns in order, cast where their types differ.
fn is_set_operation_all(join: &Join) -> bool {
    matches!(join.join_type, JoinType::LeftAnti | JoinType::LeftSemi)
        && join.null_equality == NullEquality::NullEqualsNull
        && join.filter.is_none()
        && join.on.len() == join.left.schema().fields().len()
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(_))
}

/// The `i`-th columns of both sides as the join compares them: cast to their common
/// type where they differ. DataFusion's keys name the columns, which a side whose
/// relations share a column name (`SELECT x.b, y.b`) makes ambiguous; by position
/// they are not.
fn keys(join: &Join) -> (Vec<Expr>, Vec<Expr>) {
    let (left, right) = (join.left.schema(), join.right.schema());
    let pairs = left.columns().into_iter().zip(right.columns()).enumerate();
    pairs
        .map(|(i, (l, r))| {
            let (lt, rt) = (left.field(i).data_type(), right.field(i).data_type());
            let common = comparison_coercion(lt, rt).unwrap_or_else(|| lt.clone());
            let typed = |c: Column, t: &DataType| match *t == common {
                true => Expr::Column(c),
                false => cast(Expr::Column(c), common.clone()),
            };
            (typed(l, lt), typed(r, rt))
        })
        .unzip()
}

/// The left side's rows with the number of copies SQL keeps of each, by counting
/// both sides' copies of each row and joining the counts: `max(0, m - n)` for
/// `EXCEPT ALL`, `min(m, n)` for `INTERSECT ALL`; each row then repeated that often.
fn counted(join: &Join) -> Result<LogicalPlan> {
    let output: Vec<Expr> = join.left.schema().columns().into_iter().map(Expr::Column).collect();
    let (left_keys, right_keys) = keys(join);
    let width = left_keys.len();
    let named =
        |prefix: &str| -> Vec<Column> { (0..width).map(|i| Column::from_name(format!("{prefix}{i}"))).collect() };
    let aliased = |keys: Vec<Expr>, prefix: &str| -> Vec<Expr> {
        keys.into_iter().enumerate().map(|(i, k)| k.alias(format!("{prefix}{i}"))).collect()
    };
    let left = LogicalPlanBuilder::from(join.left.as_ref().clone())
        .aggregate(output.clone(), vec![count_all().alias(LEFT_COUNT)])?
        .project(output.iter().cloned().chain([col(LEFT_COUNT)]).chain(aliased(left_keys, LEFT_KEY)))?
        .build()?;
    let right_names: Vec<Expr> = named(RIGHT_KEY).into_iter().map(Expr::Column).collect();
    let right = LogicalPlanBuilder::from(join.right.as_ref().clone())
        .project(aliased(right_keys, RIGHT_KEY))?
        .aggregate(right_names, vec![count_all().alias(RIGHT_COUNT)])?
        .build()?;
    let (kind, copies) = match join.join_type {
        // Rows the right side lacks keep all their copies.
        JoinType::LeftAnti => (JoinType::Left, col(LEFT_COUNT) - coalesce(vec![col(RIGHT_COUNT), lit(0i64)])),
        _ => {
            let least = when(col(LEFT_COUNT).lt(col(RIGHT_COUNT)), col(LEFT_COUNT)).otherwise(col(RIGHT_COUNT))?;
            (JoinType::Inner, least)
        }
    };
    let series = range(lit(0i64), col(COPIES), lit(1i64)).alias(COPIES);
    LogicalPlanBuilder::from(left)
        .join_detailed(right, kind, (named(LEFT_KEY), named(RIGHT_KEY)), None, NullEquality::NullEqualsNull)?
        .project(output.iter().cloned().chain([copies.alias(COPIES)]))?
        .filter(col(COPIES).gt(lit(0i64)))?
        .project(output.iter().cloned().chain([series]))?
        .unnest_column(COPIES)?
        .project(output)?
        .build()
}
