//! Trino's lambda functions (`lambda.md`, `array.md`, `map.md`) on DataFusion's
//! higher-order functions, which evaluate a lambda once per batch over the flattened
//! elements: Trino's names for the ones DataFusion has (`transform`, `filter`,
//! `any_match`).

use std::sync::Arc;

use datafusion::functions_nested::{array_filter, array_transform};
use datafusion::logical_expr::HigherOrderUDF;

pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    vec![
        Arc::new(array_transform::array_transform_higher_order_function().as_ref().clone().with_aliases(["transform"])),
        Arc::new(array_filter::array_filter_higher_order_function().as_ref().clone().with_aliases(["filter"])),
    ]
}
