//! Access rules through views, as Trino applies them: reading a view needs read
//! access to the view itself (checked with the statement's other tables), and the
//! tables the view reads are checked as its owner for a `SECURITY DEFINER` view and
//! as the querying user for a `SECURITY INVOKER` one. Without this, a view would be
//! a way around the rules for anyone who may create one. Called by the planning
//! phase before anything runs, which also has `check_new_view` refuse the views
//! Trino refuses: one that reads itself, and `SECURITY DEFINER` where no owner is kept.

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
        let entry = super::ddl::metastore(connectors, view_catalog).and_then(|m| m.view(view_schema, name.table()));
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

/// Refuses a `CREATE VIEW` as Trino does: a view that reads itself, directly or
/// through other views (`VIEW_IS_RECURSIVE`: a `CREATE OR REPLACE` that reads the view
/// it replaces, or closes a cycle of views, would plan against the old definition now
/// and never again once the views are made anew from their text), and a written
/// `SECURITY DEFINER` in a catalog that keeps no view's owner (`NOT_SUPPORTED`: the
/// view would read as its reader).
pub fn check_new_view(
    logical: &LogicalPlan,
    connectors: &Connectors,
    security_written: Option<&str>,
    (catalog, schema): (&str, &str),
) -> Result<(), QueryError> {
    let LogicalPlan::Ddl(datafusion::logical_expr::DdlStatement::CreateView(view)) = logical else { return Ok(()) };
    let name = full_name(&view.name, (catalog, schema));
    let keeps_owner = super::ddl::metastore(connectors, &name.0).is_some();
    if security_written == Some("DEFINER") && !keeps_owner {
        let m = format!(
            "SECURITY DEFINER: catalog {} keeps no view's owner, so its views read as their reader; write SECURITY \
             INVOKER or leave the clause out",
            name.0
        );
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    match reads(&view.input, &name, connectors, (catalog, schema), 0) {
        true => Err(QueryError::new(
            ErrorCode::ViewIsRecursive,
            format!("View is recursive: {}.{}.{}", name.0, name.1, name.2),
        )),
        false => Ok(()),
    }
}

fn full_name(t: &datafusion::common::TableReference, (catalog, schema): (&str, &str)) -> (String, String, String) {
    (t.catalog().unwrap_or(catalog).to_string(), t.schema().unwrap_or(schema).to_string(), t.table().to_string())
}

/// Whether `plan` reads `target`, itself or through the views it reads.
fn reads(
    plan: &LogicalPlan,
    target: &(String, String, String),
    connectors: &Connectors,
    defaults: (&str, &str),
    depth: usize,
) -> bool {
    if depth > MAX_VIEW_DEPTH {
        return true;
    }
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(t) = node {
            let name = full_name(&t.table_name, defaults);
            found = name == *target;
            if !found {
                let view = source_as_provider(&t.source)
                    .ok()
                    .and_then(|p| as_view(p.as_ref()).map(|v| v.logical_plan().clone()));
                if let Some(inner) = view {
                    // A view's names are read in its maker's catalog and schema.
                    let entry = super::ddl::metastore(connectors, &name.0).and_then(|m| m.view(&name.1, &name.2));
                    let (c, s) =
                        entry.map_or((name.0.clone(), name.1.clone()), |v| (v.session_catalog, v.session_schema));
                    found = reads(&inner, target, connectors, (&c, &s), depth + 1);
                }
            }
        }
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}
