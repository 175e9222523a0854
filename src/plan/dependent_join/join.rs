//! The push-down through a join, part of `dependent_join`. The domain enters one
//! side where that side alone reads the outer columns and the join keeps or filters
//! its every row; otherwise (both sides correlated, or the correlated side one the
//! join may pad with NULLs, or the condition correlated under a join that pads the
//! other side) it enters both, and the join matches rows of the same domain row only.

use datafusion::common::Result;
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder};

use super::{reads_outer, Domain};

impl Domain<'_> {
    pub(super) fn join(&self, plan: &LogicalPlan, j: &Join) -> Result<Option<LogicalPlan>> {
        use JoinType::*;
        let (left, right) = (reads_outer(&j.left), reads_outer(&j.right));
        let pushed = match (left, right) {
            (_, false) if matches!(j.join_type, Inner | Left | LeftSemi | LeftAnti | LeftMark) => {
                self.push(&j.left)?.map(|l| (l, j.right.as_ref().clone()))
            }
            (false, true) if matches!(j.join_type, Inner | Right | RightSemi | RightAnti | RightMark) => {
                self.push(&j.right)?.map(|r| (j.left.as_ref().clone(), r))
            }
            _ => return self.join_both(plan, j),
        };
        let Some((left, right)) = pushed else { return Ok(None) };
        let both = LogicalPlanBuilder::from(left.clone()).cross_join(right.clone())?.build()?;
        let exprs = plan.expressions().into_iter().map(|e| self.local(e, &both)).collect::<Result<_>>()?;
        Ok(Some(plan.with_new_exprs(exprs, vec![left, right])?))
    }

    /// The domain pushed into both sides of `j`, whose rows then match only within one
    /// domain row; the right side's domain columns are renamed on the way, and the
    /// join answers the domain of whichever side it keeps (of both, for a full join).
    fn join_both(&self, plan: &LogicalPlan, j: &Join) -> Result<Option<LogicalPlan>> {
        use JoinType::*;
        let (Some(left), Some(right)) = (self.push(&j.left)?, self.push(&j.right)?) else { return Ok(None) };
        let other = |name: &str| format!("{name}_right");
        let renamed = right.schema().columns().into_iter().map(|c| match self.columns.contains(&c.name) {
            true => {
                let name = other(&c.name);
                Expr::Column(c).alias(name)
            }
            false => Expr::Column(c),
        });
        let right = LogicalPlanBuilder::from(right).project(renamed)?.build()?;
        let both = LogicalPlanBuilder::from(left.clone()).cross_join(right.clone())?.build()?;
        let exprs = plan.expressions().into_iter().map(|e| self.local(e, &both)).collect::<Result<_>>()?;
        let LogicalPlan::Join(mut joined) = plan.with_new_exprs(exprs, vec![left.clone(), right])? else {
            unreachable!("a join with new expressions is a join")
        };
        // A domain's columns are never NULL: a plain equality matches them.
        for name in &self.columns {
            let own = datafusion::logical_expr::expr_rewriter::normalize_col(Self::column(name), &left)?;
            joined.on.push((own, Self::column(&other(name))));
        }
        let output = LogicalPlan::Join(joined);
        let columns = output.schema().columns().into_iter().filter_map(|c| {
            let name = c.name.clone();
            if let Some(own) = name.strip_suffix("_right").filter(|n| self.columns.iter().any(|c| c == n)) {
                // The right side's domain stands for the domain where the join answers
                // only the right side's columns.
                return matches!(j.join_type, RightSemi | RightAnti | RightMark).then(|| Expr::Column(c).alias(own));
            }
            if !self.columns.contains(&name) {
                return Some(Expr::Column(c));
            }
            Some(match j.join_type {
                Right => Self::column(&other(&name)).alias(name),
                Full => coalesce(vec![Expr::Column(c), Self::column(&other(&name))]).alias(name),
                _ => Expr::Column(c),
            })
        });
        Ok(Some(LogicalPlanBuilder::from(output).project(columns)?.build()?))
    }
}
