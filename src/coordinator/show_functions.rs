//! Trino's `SHOW FUNCTIONS [LIKE pattern [ESCAPE c]]`, answered from the planning
//! context's function registry (DataFusion's functions and Trino's library in
//! `crate::functions`): one row per name and argument form, with Trino's columns
//! `Function`, `Return Type`, `Argument Types`, `Function Type`, `Deterministic`,
//! `Description`. Called by `metadata::run`.

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::logical_expr::{Signature, TypeSignature, Volatility};
use datafusion::prelude::SessionContext;

use super::planner::QueryError;
use crate::error_code::ErrorCode;
use crate::format::trino_type;

use super::sql_parser::Like;

/// One row of the answer.
struct Row {
    name: String,
    returns: String,
    arguments: String,
    kind: &'static str,
    deterministic: bool,
    description: String,
}

/// The argument forms of a signature, each as Trino-style type names with the return
/// type where the form's types are exact.
fn forms(signature: &Signature, returns: &dyn Fn(&[DataType]) -> Option<DataType>) -> Vec<(String, String)> {
    let exact: Vec<Vec<DataType>> = match &signature.type_signature {
        TypeSignature::Exact(types) => vec![types.clone()],
        TypeSignature::OneOf(forms) => {
            forms.iter().filter_map(|f| if let TypeSignature::Exact(t) = f { Some(t.clone()) } else { None }).collect()
        }
        TypeSignature::Nullary => vec![vec![]],
        _ => vec![],
    };
    if exact.is_empty() {
        // Forms DataFusion describes by kind (any numeric, variadic, ...).
        return signature
            .type_signature
            .to_string_repr()
            .into_iter()
            .map(|f| (String::new(), f.to_lowercase()))
            .collect();
    }
    exact
        .into_iter()
        .map(|types| {
            let args = types.iter().map(trino_type).collect::<Vec<_>>().join(", ");
            (returns(&types).map(|t| trino_type(&t)).unwrap_or_default(), args)
        })
        .collect()
}

fn rows(ctx: &SessionContext) -> Vec<Row> {
    let state = ctx.state();
    let mut out = Vec::new();
    let description =
        |d: Option<&datafusion::logical_expr::Documentation>| d.map(|d| d.description.clone()).unwrap_or_default();
    let deterministic = |v: Volatility| v != Volatility::Volatile;
    for (name, f) in state.scalar_functions() {
        #[allow(deprecated)]
        let returns = |t: &[DataType]| f.return_type(t).ok();
        for (ret, args) in forms(f.signature(), &returns) {
            let (kind, det, desc) = ("scalar", deterministic(f.signature().volatility), description(f.documentation()));
            out.push(Row {
                name: name.clone(),
                returns: ret,
                arguments: args,
                kind,
                deterministic: det,
                description: desc,
            });
        }
    }
    for (name, f) in state.aggregate_functions() {
        let returns = |t: &[DataType]| f.return_type(t).ok();
        for (ret, args) in forms(f.signature(), &returns) {
            let (det, desc) = (deterministic(f.signature().volatility), description(f.documentation()));
            out.push(Row {
                name: name.clone(),
                returns: ret,
                arguments: args,
                kind: "aggregate",
                deterministic: det,
                description: desc,
            });
        }
    }
    for (name, f) in state.window_functions() {
        for (ret, args) in forms(f.signature(), &|_| None) {
            let (det, desc) = (deterministic(f.signature().volatility), description(f.documentation()));
            out.push(Row {
                name: name.clone(),
                returns: ret,
                arguments: args,
                kind: "window",
                deterministic: det,
                description: desc,
            });
        }
    }
    for (name, f) in state.higher_order_functions() {
        let (det, desc) = (deterministic(f.signature().volatility), description(f.documentation()));
        out.push(Row {
            name: name.clone(),
            returns: String::new(),
            arguments: "array, function".into(),
            kind: "scalar",
            deterministic: det,
            description: desc,
        });
    }
    out.sort_by(|a, b| (&a.name, &a.arguments).cmp(&(&b.name, &b.arguments)));
    out
}

pub fn show_functions(ctx: &SessionContext, pattern: Option<&Like>) -> Result<RecordBatch, QueryError> {
    let mut kept = Vec::new();
    for row in rows(ctx) {
        if pattern.map_or(Ok(true), |p| p.matches(&row.name))? {
            kept.push(row);
        }
    }
    let text = |f: fn(&Row) -> &str| Arc::new(StringArray::from_iter_values(kept.iter().map(f))) as _;
    let schema = Schema::new(vec![
        Field::new("Function", DataType::Utf8, false),
        Field::new("Return Type", DataType::Utf8, false),
        Field::new("Argument Types", DataType::Utf8, false),
        Field::new("Function Type", DataType::Utf8, false),
        Field::new("Deterministic", DataType::Boolean, false),
        Field::new("Description", DataType::Utf8, false),
    ]);
    let columns = vec![
        text(|r| &r.name),
        text(|r| &r.returns),
        text(|r| &r.arguments),
        text(|r| r.kind),
        Arc::new(BooleanArray::from(kept.iter().map(|r| r.deterministic).collect::<Vec<_>>())) as _,
        text(|r| &r.description),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_answers_with_trinos_columns() {
        let ctx = crate::coordinator::planner::session_context(
            &Default::default(),
            &Default::default(),
            2,
            &crate::connector::Connectors::benchmark(),
        );
        let batch = show_functions(&ctx, Some(&Like { pattern: "regexp_extract%".into(), escape: None })).unwrap();
        let names = batch.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        let args = batch.column(2).as_any().downcast_ref::<StringArray>().unwrap();
        let returns = batch.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        let listed: Vec<(&str, &str, &str)> =
            (0..batch.num_rows()).map(|i| (names.value(i), args.value(i), returns.value(i))).collect();
        assert!(listed.contains(&("regexp_extract", "varchar, varchar, bigint", "varchar")), "{listed:?}");
        assert!(listed.contains(&("regexp_extract_all", "varchar, varchar", "array(varchar)")), "{listed:?}");
        assert!(listed.iter().all(|(n, _, _)| n.starts_with("regexp_extract")));
        let all = show_functions(&ctx, None).unwrap();
        let kinds = all.column(3).as_any().downcast_ref::<StringArray>().unwrap();
        for kind in ["scalar", "aggregate", "window"] {
            assert!(kinds.iter().any(|k| k == Some(kind)), "no {kind} function listed");
        }
    }
}
