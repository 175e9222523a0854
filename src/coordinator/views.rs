//! Access rules through views, as Trino applies them: reading a view needs read
//! access to the view itself (checked with the statement's other tables), and the
//! tables the view reads are checked as its owner for a `SECURITY DEFINER` view and
//! as the querying user for a `SECURITY INVOKER` one. Without this, a view would be
//! a way around the rules for anyone who may create one. Called by the planning
//! phase before anything runs.

use crate::connector::view::as_view;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::LogicalPlan;

use super::planner::QueryError;
use super::planning::{accesses, AccessCheck};
use crate::connector::Connectors;
use crate::error_code::ErrorCode;

/// Views inside views are followed this deep at most.
const MAX_VIEW_DEPTH: usize = 32;

/// Checks what the views `logical` reads read in turn; `defaults` are the catalog
/// and schema its unqualified names are in.
pub fn check_view_reads(
    logical: &LogicalPlan,
    connectors: &Connectors,
    access: &AccessCheck,
    defaults: (&str, &str),
) -> Result<(), QueryError> {
    check_at_depth(logical, connectors, access, defaults, 0)
}

fn check_at_depth(
    logical: &LogicalPlan,
    connectors: &Connectors,
    access: &AccessCheck,
    (catalog, schema): (&str, &str),
    depth: usize,
) -> Result<(), QueryError> {
    if depth > MAX_VIEW_DEPTH {
        let m = format!("views nest more than {MAX_VIEW_DEPTH} deep");
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let mut views = Vec::new();
    let _ = logical.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(t) = node {
            let view = source_as_provider(&t.source)
                .ok()
                .and_then(|p| as_view(p.as_ref()).map(|v| (t.table_name.clone(), v.logical_plan().clone())));
            views.extend(view);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    for (name, plan) in views {
        let (view_catalog, view_schema) = (name.catalog().unwrap_or(catalog), name.schema().unwrap_or(schema));
        let entry = connectors
            .get(view_catalog)
            .and_then(|c| c.files())
            .and_then(|f| f.metastore())
            .and_then(|m| m.view(view_schema, name.table()));
        // A view no metastore keeps (in a memory catalog) reads as its reader.
        let (reader, inner_defaults) = match &entry {
            Some(v) if v.security == "DEFINER" => (
                AccessCheck { rules: access.rules.clone(), who: access.rules.identity(&v.owner) },
                (v.session_catalog.as_str(), v.session_schema.as_str()),
            ),
            Some(v) => (access.clone(), (v.session_catalog.as_str(), v.session_schema.as_str())),
            None => (access.clone(), (catalog, schema)),
        };
        reader.check(&accesses(&plan, connectors, inner_defaults.0, inner_defaults.1)).map_err(|e| {
            let whose =
                entry.as_ref().filter(|v| v.security == "DEFINER").map(|v| format!(" (as its owner {})", v.owner));
            QueryError::new(e.error_name, format!("View {name}{}: {}", whose.unwrap_or_default(), e.message))
        })?;
        check_at_depth(&plan, connectors, &reader, inner_defaults, depth + 1)?;
    }
    Ok(())
}
