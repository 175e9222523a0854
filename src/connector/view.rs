//! A view as the catalogs hold it: DataFusion's `ViewTable`, kept whole through
//! planning. DataFusion inlines a view's query into the statement as it plans it, so
//! the statement's plan no longer says which tables were read through which view,
//! and access rules could only check the reader against every table a view reads
//! (no `SECURITY DEFINER`). This provider does not offer its plan for inlining: the
//! statement's plan keeps a scan of the view (`coordinator::views` checks through
//! it), and the scan plans the view's query with the statement's filters and
//! projection pushed into it (as `ViewTable::scan` does). Made by the coordinator's
//! DDL for every view created or restored.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{Session, TableProvider};
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;

#[derive(Debug)]
pub struct TrinoView {
    view: Arc<ViewTable>,
}

impl TrinoView {
    pub fn new(view: Arc<ViewTable>) -> Self {
        TrinoView { view }
    }

    /// The view's query, its definition and its columns.
    pub fn view(&self) -> &ViewTable {
        &self.view
    }
}

#[async_trait]
impl TableProvider for TrinoView {
    fn schema(&self) -> SchemaRef {
        self.view.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.view.get_table_definition()
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        self.view.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.view.scan(state, projection, filters, limit).await
    }
}

/// A view whose text no longer plans (a table it reads was dropped or renamed): it
/// stays, as in Trino, and every read fails with `INVALID_VIEW` saying why, until the
/// coordinator's DDL makes it plan again (`coordinator::ddl::rebind_views`).
#[derive(Debug)]
pub struct InvalidView {
    name: String,
    why: String,
    /// The columns the view had when it last planned.
    columns: SchemaRef,
}

impl InvalidView {
    pub fn new(name: String, why: String, columns: SchemaRef) -> Self {
        InvalidView { name, why, columns }
    }

    fn error(&self) -> datafusion::error::DataFusionError {
        let message = format!("Failed analyzing stored view '{}': {}", self.name, self.why);
        let coded = crate::functions::FunctionError { code: crate::error_code::ErrorCode::InvalidView, message };
        datafusion::error::DataFusionError::External(Box::new(coded))
    }
}

#[async_trait]
impl TableProvider for InvalidView {
    fn schema(&self) -> SchemaRef {
        self.columns.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.error())
    }
}

/// The view a provider is, wrapped or as DataFusion made it.
pub fn as_view(provider: &dyn TableProvider) -> Option<&ViewTable> {
    match provider.downcast_ref::<TrinoView>() {
        Some(v) => Some(v.view()),
        None => provider.downcast_ref::<ViewTable>(),
    }
}
