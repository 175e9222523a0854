//! The `ExecutionPlan` methods flotilla's own nodes would otherwise each write the same
//! way: name, properties, children, no expressions of their own, and a rebuild over
//! new children that checks their number. Every node of ours (the plan's, the
//! exchange's, the connectors', the worker's and the coordinator's) invokes
//! [`plan_node!`] inside its `impl ExecutionPlan` and writes only what is its own:
//! `execute`, and any requirement on its input. It depends on DataFusion alone, so any
//! layer may use it.

use std::sync::Arc;

use datafusion::common::{internal_err, Result};
use datafusion::physical_plan::ExecutionPlan;

/// The plumbing methods of an `ExecutionPlan` node, inside its `impl ExecutionPlan`:
///
/// - `plan_node!(leaf "Name")`: no children; its properties are in `self.properties`.
/// - `plan_node!(unary "Name", input: field, properties: own, rebuild: |this, child| expr)`:
///   one child in `self.field`, properties in `self.properties`; `expr` builds the
///   node anew from `this` (the old node, `Arc<Self>`) and `child`.
/// - `properties: input` instead: the node passes its input through, with the input's
///   properties and order.
macro_rules! plan_node {
    (leaf $name:literal) => {
        $crate::plan_node::plan_node!(@common $name);

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            &self.properties
        }

        fn children(&self) -> Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![]
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            children: Vec<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>>,
        ) -> ::datafusion::common::Result<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            $crate::plan_node::no_children($name, &children)?;
            Ok(self)
        }
    };
    (unary $name:literal, input: $input:ident, properties: own, rebuild: |$this:ident, $child:ident| $rebuild:expr) => {
        $crate::plan_node::plan_node!(@unary $name, $input, |$this, $child| $rebuild);

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            &self.properties
        }
    };
    (unary $name:literal, input: $input:ident, properties: input, rebuild: |$this:ident, $child:ident| $rebuild:expr) => {
        $crate::plan_node::plan_node!(@unary $name, $input, |$this, $child| $rebuild);

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            self.$input.properties()
        }

        fn maintains_input_order(&self) -> Vec<bool> {
            vec![true]
        }
    };
    (@unary $name:literal, $input:ident, |$this:ident, $child:ident| $rebuild:expr) => {
        $crate::plan_node::plan_node!(@common $name);

        fn children(&self) -> Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![&self.$input]
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            children: Vec<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>>,
        ) -> ::datafusion::common::Result<::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            let $child = $crate::plan_node::one_child($name, children)?;
            let $this = self;
            Ok(::std::sync::Arc::new($rebuild))
        }
    };
    (@common $name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>,
            ) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion>,
        ) -> ::datafusion::common::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(::datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }
    };
}

pub(crate) use plan_node;

/// The one child of a unary node being rebuilt.
pub fn one_child(name: &str, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
    match children.len() {
        1 => Ok(children.remove(0)),
        n => internal_err!("{name} has one child, got {n}"),
    }
}

/// Checks that a leaf is rebuilt without children.
pub fn no_children(name: &str, children: &[Arc<dyn ExecutionPlan>]) -> Result<()> {
    match children.len() {
        0 => Ok(()),
        n => internal_err!("{name} has no children, got {n}"),
    }
}
