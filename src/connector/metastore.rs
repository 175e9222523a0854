//! The metastore of a catalog of files: its schemas, tables and views, and their
//! comments, kept by the coordinator in one JSON file per catalog so that they
//! outlive the process. The planning of `CREATE SCHEMA`, `CREATE EXTERNAL TABLE`,
//! `CREATE TABLE ... AS`, `CREATE VIEW`, `ALTER ... RENAME TO`, `COMMENT ON` and the
//! `DROP`s writes it; `Connectors::restore` replays its tables at start-up, the
//! coordinator its views (they are planned in Trino's dialect).
//!
//! Every change rewrites the whole file atomically (a temporary file, synced, renamed
//! over the old one), so a crash leaves either the old catalog or the new one. A
//! table is kept as DataFusion's own encoding of the `CREATE EXTERNAL TABLE` that
//! makes it (column types, options and partition columns exactly as given), next to
//! the readable facts a person looking at the file wants.

use datafusion::common::plan_datafusion_err;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{CreateExternalTable, DdlStatement, LogicalPlan};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableEntry {
    pub schema: String,
    pub name: String,
    pub location: String,
    pub format: String,
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// Written by `CREATE TABLE ... AS` under the warehouse: `DROP TABLE` removes its
    /// files too.
    #[serde(default)]
    pub managed: bool,
    /// The `CREATE EXTERNAL TABLE` plan, in DataFusion's protobuf encoding, base64.
    pub definition: String,
    /// `COMMENT ON TABLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `COMMENT ON COLUMN`, by column name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub column_comments: BTreeMap<String, String>,
}

/// A view: the query it stands for, as the statement that makes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewEntry {
    pub schema: String,
    pub name: String,
    /// The view's query, in Trino's dialect, as `information_schema.views` shows it.
    pub query: String,
    /// Who made it: under `SECURITY DEFINER` the tables it reads are read as them.
    pub owner: String,
    /// The session's catalog and schema when it was made: the query's unqualified
    /// names are theirs.
    pub session_catalog: String,
    pub session_schema: String,
    /// `DEFINER` or `INVOKER`.
    pub security: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub column_comments: BTreeMap<String, String>,
}

impl TableEntry {
    pub fn new(schema: &str, create: &CreateExternalTable, managed: bool) -> Result<Self> {
        let plan = LogicalPlan::Ddl(DdlStatement::CreateExternalTable(Box::new(create.clone())));
        let bytes = datafusion_proto::bytes::logical_plan_to_bytes(&plan)?;
        Ok(TableEntry {
            schema: schema.to_string(),
            name: create.name.table().to_string(),
            location: create.locations.join(","),
            format: create.file_type.clone(),
            partition_columns: create.table_partition_cols.clone(),
            managed,
            definition: base64::engine::general_purpose::STANDARD.encode(bytes),
            comment: None,
            column_comments: BTreeMap::new(),
        })
    }

    /// The plan that makes the table again.
    pub fn plan(&self, ctx: &TaskContext) -> Result<LogicalPlan> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.definition)
            .map_err(|e| plan_datafusion_err!("table {}.{}: bad definition: {e}", self.schema, self.name))?;
        datafusion_proto::bytes::logical_plan_from_bytes(&bytes, ctx)
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Contents {
    version: u32,
    schemas: BTreeSet<String>,
    tables: Vec<TableEntry>,
    /// In the order they were made: a view may read the views before it.
    #[serde(default)]
    views: Vec<ViewEntry>,
}

/// What a comment is on.
#[derive(Debug, Clone, PartialEq)]
pub enum CommentTarget {
    Relation,
    Column(String),
}

#[derive(Debug)]
pub struct Metastore {
    /// The file; None keeps the catalog in memory only (it still knows each table's
    /// definition, which writes need).
    path: Option<PathBuf>,
    contents: parking_lot::Mutex<Contents>,
}

impl Metastore {
    /// A metastore kept in `path` (read by `load`), or in memory only.
    pub fn new(path: Option<PathBuf>) -> Self {
        Metastore { path, contents: parking_lot::Mutex::new(Contents { version: 1, ..Default::default() }) }
    }

    /// Where it is kept, for messages.
    pub fn describe(&self) -> String {
        self.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "memory".into())
    }

    /// Reads the file; a missing one is an empty catalog.
    pub fn load(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let contents: Contents =
            serde_json::from_str(&text).map_err(|e| format!("{} is not a metastore: {e}", path.display()))?;
        *self.contents.lock() = contents;
        Ok(())
    }

    pub fn schemas(&self) -> Vec<String> {
        self.contents.lock().schemas.iter().cloned().collect()
    }

    pub fn tables(&self) -> Vec<TableEntry> {
        self.contents.lock().tables.clone()
    }

    pub fn table(&self, schema: &str, name: &str) -> Option<TableEntry> {
        self.contents.lock().tables.iter().find(|t| t.schema == schema && t.name == name).cloned()
    }

    pub fn views(&self) -> Vec<ViewEntry> {
        self.contents.lock().views.clone()
    }

    pub fn view(&self, schema: &str, name: &str) -> Option<ViewEntry> {
        self.contents.lock().views.iter().find(|v| v.schema == schema && v.name == name).cloned()
    }

    /// The comment on a table or view.
    pub fn comment(&self, schema: &str, name: &str) -> Option<String> {
        let c = self.contents.lock();
        let table = c.tables.iter().find(|t| t.schema == schema && t.name == name).map(|t| t.comment.clone());
        table.or_else(|| c.views.iter().find(|v| v.schema == schema && v.name == name).map(|v| v.comment.clone()))?
    }

    /// The comments on a table's or view's columns.
    pub fn column_comments(&self, schema: &str, name: &str) -> BTreeMap<String, String> {
        let c = self.contents.lock();
        let table = c.tables.iter().find(|t| t.schema == schema && t.name == name).map(|t| &t.column_comments);
        let view = || c.views.iter().find(|v| v.schema == schema && v.name == name).map(|v| &v.column_comments);
        table.or_else(view).cloned().unwrap_or_default()
    }

    /// Sets (or with None, removes) a comment; false when no such table or view.
    pub fn set_comment(
        &self,
        schema: &str,
        name: &str,
        target: &CommentTarget,
        comment: Option<String>,
    ) -> std::io::Result<bool> {
        let mut found = false;
        self.change(|c| {
            let table = c.tables.iter_mut().find(|t| t.schema == schema && t.name == name);
            let (relation, columns) = match table {
                Some(t) => (&mut t.comment, &mut t.column_comments),
                None => match c.views.iter_mut().find(|v| v.schema == schema && v.name == name) {
                    Some(v) => (&mut v.comment, &mut v.column_comments),
                    None => return,
                },
            };
            found = true;
            match (target, comment) {
                (CommentTarget::Relation, comment) => *relation = comment,
                (CommentTarget::Column(col), Some(text)) => {
                    columns.insert(col.clone(), text);
                }
                (CommentTarget::Column(col), None) => {
                    columns.remove(col);
                }
            }
        })?;
        Ok(found)
    }

    /// Adds the view, replacing one of the same name (`CREATE OR REPLACE VIEW`); a
    /// replaced view keeps its place in the order.
    pub fn put_view(&self, entry: ViewEntry) -> std::io::Result<()> {
        self.change(|c| match c.views.iter_mut().find(|v| v.schema == entry.schema && v.name == entry.name) {
            Some(v) => *v = entry,
            None => c.views.push(entry),
        })
    }

    pub fn remove_view(&self, schema: &str, name: &str) -> std::io::Result<Option<ViewEntry>> {
        let mut removed = None;
        self.change(|c| {
            if let Some(i) = c.views.iter().position(|v| v.schema == schema && v.name == name) {
                removed = Some(c.views.remove(i));
            }
        })?;
        Ok(removed)
    }

    /// Renames a table or view (possibly into another schema); its files stay where
    /// they are. False when there is no such table or view.
    pub fn rename(&self, from: (&str, &str), to: (&str, &str), definition: Option<String>) -> std::io::Result<bool> {
        let mut found = false;
        self.change(|c| {
            if let Some(t) = c.tables.iter_mut().find(|t| t.schema == from.0 && t.name == from.1) {
                (t.schema, t.name) = (to.0.to_string(), to.1.to_string());
                if let Some(d) = definition {
                    t.definition = d;
                }
                found = true;
            } else if let Some(v) = c.views.iter_mut().find(|v| v.schema == from.0 && v.name == from.1) {
                (v.schema, v.name) = (to.0.to_string(), to.1.to_string());
                found = true;
            }
        })
        .map(|_| found)
    }

    pub fn put_schema(&self, schema: &str) -> std::io::Result<()> {
        self.change(|c| {
            c.schemas.insert(schema.to_string());
        })
    }

    pub fn remove_schema(&self, schema: &str) -> std::io::Result<()> {
        self.change(|c| {
            c.schemas.remove(schema);
            c.tables.retain(|t| t.schema != schema);
            c.views.retain(|v| v.schema != schema);
        })
    }

    /// Adds the table, replacing one of the same name.
    pub fn put_table(&self, entry: TableEntry) -> std::io::Result<()> {
        self.change(|c| {
            c.tables.retain(|t| !(t.schema == entry.schema && t.name == entry.name));
            c.tables.push(entry);
        })
    }

    pub fn remove_table(&self, schema: &str, name: &str) -> std::io::Result<Option<TableEntry>> {
        let mut removed = None;
        self.change(|c| {
            if let Some(i) = c.tables.iter().position(|t| t.schema == schema && t.name == name) {
                removed = Some(c.tables.remove(i));
            }
        })?;
        Ok(removed)
    }

    /// Applies `f` and writes the result; on a failed write memory is left as it was.
    fn change(&self, f: impl FnOnce(&mut Contents)) -> std::io::Result<()> {
        let mut guard = self.contents.lock();
        let mut next = guard.clone();
        f(&mut next);
        if let Some(path) = &self.path {
            write_atomically(path, &serde_json::to_vec_pretty(&next).map_err(std::io::Error::other)?)?;
        }
        *guard = next;
        Ok(())
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp-{}", crate::util::random_suffix(6)));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn tables_and_schemas_survive_a_reload() {
        let dir_tmp = tempfile::Builder::new().prefix("flotilla-metastore-").tempdir().unwrap();
        let dir = dir_tmp.path().to_path_buf();
        let path = dir.join("catalogs").join("lake.json");
        let ctx = SessionContext::new();
        let plan = ctx
            .state()
            .create_logical_plan("CREATE EXTERNAL TABLE t (a INT, b DECIMAL(15,2), y VARCHAR) STORED AS PARQUET PARTITIONED BY (y) LOCATION '/data/t/'")
            .await
            .unwrap();
        let LogicalPlan::Ddl(DdlStatement::CreateExternalTable(create)) = plan else { panic!("not a create") };
        let m = Metastore::new(Some(path.clone()));
        m.load().unwrap();
        m.put_schema("sales").unwrap();
        m.put_table(TableEntry::new("sales", &create, true).unwrap()).unwrap();
        let again = Metastore::new(Some(path.clone()));
        again.load().unwrap();
        assert_eq!(again.schemas(), ["sales"]);
        let t = again.table("sales", "t").unwrap();
        assert_eq!(
            (t.location.as_str(), t.partition_columns.as_slice(), t.managed),
            ("/data/t/", &["y".to_string()][..], true)
        );
        let LogicalPlan::Ddl(DdlStatement::CreateExternalTable(back)) = t.plan(&ctx.task_ctx()).unwrap() else {
            panic!("not a create")
        };
        assert_eq!(back.schema, create.schema, "column types come back exactly");
        assert_eq!(again.remove_table("sales", "t").unwrap().map(|t| t.name), Some("t".into()));
        let reloaded = Metastore::new(Some(path.clone()));
        reloaded.load().unwrap();
        assert!(reloaded.tables().is_empty(), "the removal was written");
        assert_eq!(reloaded.schemas(), ["sales"]);
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left beside the metastore");
        std::fs::write(&path, "not json").unwrap();
        assert!(Metastore::new(Some(path.clone())).load().unwrap_err().contains("lake.json"));
    }
}
