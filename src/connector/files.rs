//! The `files` catalog: external tables over Parquet, CSV or JSON files, created with
//! `CREATE EXTERNAL TABLE files.default.t STORED AS PARQUET LOCATION '...'`. The
//! tables live in the coordinator's memory (one `default` schema); their scans are
//! DataFusion's file scans, which travel to workers in DataFusion's own plan encoding.
//!
//! A table's location, and a `COPY ... TO` target, must lie under one of the
//! catalog's allowed locations (`files.allowed-locations`): without it, anyone who
//! can run SQL could read or write any file the server can.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;

use super::Connector;

pub const FILES_CATALOG: &str = "files";

#[derive(Debug)]
pub struct FilesConnector {
    name: String,
    catalog: Arc<MemoryCatalogProvider>,
    /// Resolved directories under which tables may live.
    allowed: Vec<PathBuf>,
}

impl FilesConnector {
    /// A catalog whose tables may live under `allowed` (none: no table can be made).
    pub fn new(name: &str, allowed: &[PathBuf]) -> Self {
        let catalog = MemoryCatalogProvider::new();
        let _ = catalog.register_schema("default", Arc::new(MemorySchemaProvider::new()));
        let allowed = allowed.iter().map(|p| resolve(p)).collect();
        FilesConnector { name: name.to_string(), catalog: Arc::new(catalog), allowed }
    }

    /// `files.allowed-locations`: comma-separated absolute directories.
    pub fn parse_allowed(value: &str) -> Result<Vec<PathBuf>, String> {
        let dirs: Vec<PathBuf> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect();
        match dirs.iter().find(|d| !d.is_absolute()) {
            Some(d) => Err(format!("'{}' is not an absolute path", d.display())),
            None => Ok(dirs),
        }
    }
}

/// The real place a local path names: the longest existing ancestor with its
/// symbolic links resolved, then the rest with `.` and `..` applied, so neither a
/// link nor `..` leads out of an allowed directory.
fn resolve(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for c in rest.iter().rev() {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The local path of a table location (`/x`, `file:///x`); None for other schemes.
fn local_path(location: &str) -> Option<PathBuf> {
    if let Some(rest) = location.strip_prefix("file://") {
        return Some(PathBuf::from(rest));
    }
    (!location.contains("://")).then(|| PathBuf::from(location))
}

impl Connector for FilesConnector {
    fn catalog_name(&self) -> &str {
        &self.name
    }

    fn allows_location(&self, location: &str) -> bool {
        let Some(path) = local_path(location) else { return false };
        let real = resolve(&path);
        self.allowed.iter().any(|root| real.starts_with(root))
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        self.catalog.clone()
    }

    /// A file scan (in-memory tables, like `information_schema`'s, stay on the
    /// coordinator).
    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn std::any::Any)
            .downcast_ref::<DataSourceExec>()
            .is_some_and(|d| (d.data_source().as_ref() as &dyn std::any::Any).is::<FileScanConfig>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_must_stay_under_an_allowed_directory() {
        let root = std::env::temp_dir().join(format!("flotilla-files-{}", crate::util::random_suffix(8)));
        let data = root.join("data");
        std::fs::create_dir_all(data.join("t")).unwrap();
        let c = FilesConnector::new("files", std::slice::from_ref(&data));
        assert!(c.allows_location(&format!("{}/t/", data.display())));
        assert!(c.allows_location(&format!("file://{}/new/part.parquet", data.display())));
        assert!(!c.allows_location("/etc/passwd"));
        assert!(!c.allows_location(&format!("{}/t/../../secret", data.display())), "no way out with ..");
        assert!(!c.allows_location(&format!("{}-other/t", data.display())), "a sibling with a common prefix");
        assert!(!c.allows_location("s3://bucket/t/"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", data.join("link")).unwrap();
            assert!(!c.allows_location(&format!("{}/link/passwd", data.display())), "no way out by a link");
        }
        assert!(!FilesConnector::new("files", &[]).allows_location(&format!("{}/t/", data.display())));
        assert!(FilesConnector::parse_allowed("/a, /b").unwrap().len() == 2);
        assert!(FilesConnector::parse_allowed("relative").is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}
