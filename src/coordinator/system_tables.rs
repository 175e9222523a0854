//! The coordinator's state as the rows of Trino's `system` catalog
//! (`connector::system`): its catalogs, the comments its metastores keep, its nodes,
//! and the queries and tasks the asking user may see. The query execution registers
//! one per query, for that query's user; it holds the coordinator weakly.
//!
//! A catalog the access rules deny the user is not there: not in `catalogs`, and
//! none of its tables, comments or properties in the other metadata tables, as
//! `SHOW CATALOGS` and each catalog's `information_schema` already hide it.

use std::sync::{Arc, Weak};

use super::planning::AccessCheck;
use super::{CoordinatorState, Viewer};
use crate::connector::Connector;

use crate::connector::system::{CatalogRow, CommentRow, NodeRow, PropertyRow, QueryRow, SystemState, TaskRow};
use crate::scheduling::state_machine::StateKind;
use crate::security::Allow;

pub struct CoordinatorSystem {
    coord: Weak<CoordinatorState>,
    viewer: Viewer,
    /// The rules as they apply to the user, when there are rules.
    access: Option<AccessCheck>,
}

impl std::fmt::Debug for CoordinatorSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorSystem").field("viewer", &self.viewer).finish()
    }
}

impl CoordinatorSystem {
    pub fn new(coord: &Arc<CoordinatorState>, user: &str) -> Self {
        // With logins the session's user is the login (or one it may act as).
        let viewer = match coord.config.security.passwords.is_some() {
            true => Viewer::Login(user.to_string()),
            false => Viewer::Claimed(user.to_string()),
        };
        let access = super::execution::access_check(coord, user);
        CoordinatorSystem { coord: Arc::downgrade(coord), viewer, access }
    }

    /// Whether the user may see `catalog` at all.
    fn visible(&self, catalog: &str) -> bool {
        self.access.as_ref().is_none_or(|a| a.rules.catalog_access(&a.who, catalog) != Allow::None)
    }

    /// The catalogs the metadata tables describe: `only` if named, each one visible.
    fn described<'a>(&self, connectors: &'a [Arc<dyn Connector>], only: Option<&str>) -> Vec<&'a Arc<dyn Connector>> {
        let named = |c: &&Arc<dyn Connector>| only.is_none_or(|n| n == c.catalog_name());
        connectors.iter().filter(named).filter(|c| self.visible(c.catalog_name())).collect()
    }
}

fn name_of<T: serde::Serialize>(state: &T) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

impl SystemState for CoordinatorSystem {
    fn catalogs(&self) -> Vec<CatalogRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows: Vec<CatalogRow> = coord
            .connectors
            .list()
            .iter()
            .filter(|c| self.visible(c.catalog_name()))
            .map(|c| CatalogRow { name: c.catalog_name().to_string(), connector: c.connector_name().to_string() })
            .collect();
        if self.visible("system") {
            rows.push(CatalogRow { name: "system".into(), connector: "system".into() });
        }
        rows
    }

    fn table_comments(&self, catalog: Option<&str>) -> Vec<CommentRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows = Vec::new();
        for c in self.described(coord.connectors.list(), catalog) {
            let metastore = c.files().and_then(|f| f.metastore());
            let provider = c.catalog();
            for schema in provider.schema_names() {
                let Some(s) = provider.schema(&schema) else { continue };
                let mut names = s.table_names();
                names.sort();
                for table in names {
                    let comment = metastore.and_then(|m| m.comment(&schema, &table));
                    rows.push(CommentRow {
                        catalog: c.catalog_name().to_string(),
                        schema: schema.clone(),
                        table,
                        comment,
                    });
                }
            }
        }
        rows
    }

    fn table_properties(&self, catalog: Option<&str>) -> Vec<PropertyRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows = Vec::new();
        for c in self.described(coord.connectors.list(), catalog) {
            if c.files().is_none_or(|f| f.is_delta_lake()) {
                continue;
            }
            let row = |name: &str, default: &str, type_name: &str, description: &str| PropertyRow {
                catalog: c.catalog_name().to_string(),
                name: name.into(),
                default_value: default.into(),
                type_name: type_name.into(),
                description: description.into(),
            };
            rows.push(row("format", "PARQUET", "varchar", "File format of the table's files: PARQUET, CSV or JSON"));
            rows.push(row("partitioned_by", "[]", "array(varchar)", "Partition columns, the table's last columns"));
        }
        rows
    }

    /// No catalog here takes schema properties.
    fn schema_properties(&self, _catalog: Option<&str>) -> Vec<PropertyRow> {
        Vec::new()
    }

    fn nodes(&self) -> Vec<NodeRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows = vec![NodeRow {
            node_id: "coordinator".into(),
            http_uri: coord.base_url(&Default::default()),
            coordinator: true,
            state: "active".into(),
        }];
        for n in coord.nodes.all() {
            let state = match (n.alive, n.shutting_down) {
                (true, false) => "active",
                (true, true) => "shutting_down",
                (false, _) => "inactive",
            };
            rows.push(NodeRow { node_id: n.node_id, http_uri: n.url, coordinator: false, state: state.into() });
        }
        rows
    }

    fn queries(&self) -> Vec<QueryRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows: Vec<QueryRow> = coord
            .queries()
            .into_iter()
            .filter(|q| coord.may_see(&self.viewer, q))
            .map(|q| {
                let s = q.summary();
                let ended = s.state.is_final().then_some(s.created_epoch_ms + s.elapsed_ms);
                QueryRow {
                    query_id: s.query_id,
                    state: name_of(&s.state),
                    user: s.user,
                    query: s.sql,
                    created_ms: s.created_epoch_ms as i64,
                    ended_ms: ended.map(|e| e as i64),
                    error_type: s.error.as_ref().map(|e| name_of(&e.error_type)),
                    error_code: s.error.as_ref().map(|e| e.error_name.name().to_string()),
                }
            })
            .collect();
        rows.sort_by(|a, b| a.query_id.cmp(&b.query_id));
        rows
    }

    fn tasks(&self) -> Vec<TaskRow> {
        let Some(coord) = self.coord.upgrade() else { return Vec::new() };
        let mut rows = Vec::new();
        for q in coord.queries().into_iter().filter(|q| coord.may_see(&self.viewer, q)) {
            for stage in q.stages() {
                for t in stage.tasks() {
                    let status = t.status();
                    rows.push(TaskRow {
                        node_id: status.node_id.clone(),
                        task_id: status.task_id.to_string(),
                        stage_id: format!("{}.{}", q.id, status.task_id.stage),
                        query_id: q.id.clone(),
                        state: name_of(&status.state),
                        output_rows: status.stats.output_rows as i64,
                        output_bytes: status.stats.output_bytes as i64,
                    });
                }
            }
        }
        rows
    }
}
