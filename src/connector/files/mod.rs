//! The `files` catalog: tables over Parquet, CSV or JSON files on local disk or in
//! S3 (or an S3-compatible server). `CREATE EXTERNAL TABLE lake.s.t STORED AS PARQUET
//! LOCATION 's3://bucket/t/'` declares one over existing files; `CREATE TABLE lake.s.t
//! AS SELECT`, `INSERT INTO` and the row-level changes write them (`write`). Scans are DataFusion's
//! file scans, which travel to workers in DataFusion's own plan encoding; the object
//! stores they read through come from `object_storage`.
//!
//! The tables are kept by the coordinator in the catalog's metastore (`metastore`),
//! one JSON file per catalog, so they survive a restart. A table's location, and a
//! `COPY ... TO` target, must lie under one of the catalog's allowed locations
//! (`files.allowed-locations`): without it, anyone who can run SQL could read or
//! write any file the server can.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;

use super::metastore::Metastore;
use super::object_storage::{S3Scope, S3Settings};
use super::Connector;

pub mod write;

pub const FILES_CATALOG: &str = "files";

/// The `STORED AS` words of a Delta table (`DELTATABLE` too, as delta-rs spells it):
/// only a Delta Lake catalog holds one, and it holds nothing else.
pub const DELTA_FORMATS: &[&str] = &["DELTA", "DELTATABLE"];

/// Whether `file_type` (as `CREATE EXTERNAL TABLE` carries it) names a Delta table.
pub fn is_delta_format(file_type: &str) -> bool {
    DELTA_FORMATS.iter().any(|f| f.eq_ignore_ascii_case(file_type))
}

/// How a catalog of files is set up (its `catalog/NAME.properties`).
#[derive(Debug, Clone, Default)]
pub struct FilesSettings {
    /// `files.allowed-locations`: absolute directories and `s3://bucket/prefix/`es.
    pub allowed: Vec<String>,
    /// `s3.*`: how its buckets are reached.
    pub s3: Option<S3Settings>,
    /// `files.warehouse`: where `CREATE TABLE ... AS` puts a new table
    /// (`WAREHOUSE/SCHEMA/TABLE/`); always an allowed location.
    pub warehouse: Option<String>,
    /// `files.metastore-path`: the JSON file keeping the catalog's schemas and tables
    /// (on the coordinator); without one they last as long as the process.
    pub metastore: Option<PathBuf>,
    /// A Delta Lake catalog (`connector.name=delta_lake`): its tables are Delta
    /// tables (`STORED AS DELTA`), read only.
    pub delta_lake: bool,
}

impl FilesSettings {
    /// Files allowed under `allowed`; with a data directory, the catalog's tables kept
    /// in `DATA_DIR/catalogs/files.json` and written under `DATA_DIR/warehouse`.
    pub fn in_data_dir(allowed: Vec<String>, data_dir: Option<&Path>) -> Self {
        FilesSettings {
            allowed,
            s3: None,
            warehouse: data_dir.map(|d| d.join("warehouse").display().to_string()),
            metastore: data_dir.map(|d| d.join("catalogs").join(format!("{FILES_CATALOG}.json"))),
            delta_lake: false,
        }
    }
}

#[derive(Debug)]
pub struct FilesConnector {
    name: String,
    catalog: Arc<dyn CatalogProvider>,
    /// Resolved directories under which tables may live.
    allowed: Vec<PathBuf>,
    /// `s3://bucket/prefix/` under which tables may live (ending in `/`).
    allowed_remote: Vec<String>,
    s3: Option<S3Settings>,
    warehouse: Option<String>,
    metastore: Arc<Metastore>,
    delta_lake: bool,
}

impl FilesConnector {
    /// A catalog whose tables may live under `allowed` (none: no table can be made).
    pub fn new(name: &str, allowed: &[String]) -> Self {
        Self::with_settings(name, FilesSettings { allowed: allowed.to_vec(), ..Default::default() })
    }

    pub fn with_settings(name: &str, settings: FilesSettings) -> Self {
        let catalog = MemoryCatalogProvider::new();
        let _ = catalog.register_schema("default", Arc::new(MemorySchemaProvider::new()));
        let mut allowed = Vec::new();
        let mut allowed_remote = Vec::new();
        for a in settings.allowed.iter().chain(&settings.warehouse) {
            match remote_prefix(a) {
                Some(p) => allowed_remote.push(p),
                None => allowed.push(resolve(&local_path(a).unwrap_or_else(|| PathBuf::from(a)))),
            }
        }
        let metastore = Arc::new(Metastore::new(settings.metastore));
        let catalog: Arc<dyn CatalogProvider> = match settings.delta_lake {
            #[cfg(feature = "delta-lake")]
            true => Arc::new(super::delta_lake::DeltaCatalog::new(catalog)),
            _ => Arc::new(catalog),
        };
        FilesConnector {
            name: name.to_string(),
            catalog,
            allowed,
            allowed_remote,
            s3: settings.s3,
            warehouse: settings.warehouse.map(|w| w.trim_end_matches('/').to_string()),
            metastore,
            delta_lake: settings.delta_lake,
        }
    }

    /// Whether this is a Delta Lake catalog: tables `STORED AS DELTA`, not written.
    pub fn is_delta_lake(&self) -> bool {
        self.delta_lake
    }

    /// `files.allowed-locations`: comma-separated absolute directories or
    /// `s3://bucket/prefix` locations.
    pub fn parse_allowed(value: &str) -> Result<Vec<String>, String> {
        let all: Vec<String> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        for a in &all {
            check_location(a)?;
        }
        Ok(all)
    }

    /// Where `CREATE TABLE schema.table AS` puts the table's files, ending in `/`;
    /// None without a warehouse. Names that would lead elsewhere as path segments
    /// (`.`, `..`, separators, `%`) are refused.
    pub fn managed_location(&self, schema: &str, table: &str) -> Result<Option<String>, String> {
        for name in [schema, table] {
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '%']) {
                return Err(format!("'{name}' cannot name a directory of the warehouse"));
            }
        }
        Ok(self.warehouse.as_ref().map(|w| format!("{w}/{schema}/{table}/")))
    }

    /// Where a new table's files go: `managed_location`, unless a table renamed away
    /// from that name still keeps its files there; then a directory beside it with
    /// a random suffix (`WAREHOUSE/SCHEMA/TABLE-x7k2qa/`).
    pub fn new_managed_location(&self, schema: &str, table: &str) -> Result<Option<String>, String> {
        let Some(plain) = self.managed_location(schema, table)? else { return Ok(None) };
        let taken = |l: &str| self.metastore.tables().iter().any(|t| t.location == l);
        if !taken(&plain) {
            return Ok(Some(plain));
        }
        let base = plain.trim_end_matches('/');
        loop {
            let candidate = format!("{base}-{}/", crate::util::random_suffix(6));
            if !taken(&candidate) {
                return Ok(Some(candidate));
            }
        }
    }

    /// Whether `location` is one this catalog gives a table it writes
    /// (`WAREHOUSE/SCHEMA/DIRECTORY/`): only such files are removed with their table.
    /// A table keeps its directory when renamed, so the name need not match.
    pub fn is_managed_location(&self, location: &str) -> bool {
        let Some(w) = &self.warehouse else { return false };
        let Some(rest) = location.strip_prefix(w.as_str()).and_then(|r| r.strip_prefix('/')) else { return false };
        let Some(rest) = rest.strip_suffix('/') else { return false };
        let segments: Vec<&str> = rest.split('/').collect();
        let plain = |s: &&str| !s.is_empty() && *s != "." && *s != ".." && !s.contains(['\\', '%']);
        segments.len() == 2 && segments.iter().all(plain)
    }

    /// `files.warehouse`, without a trailing `/`.
    pub fn warehouse(&self) -> Option<&str> {
        self.warehouse.as_deref()
    }

    /// The local directories (resolved) its tables may live under, warehouse included.
    pub fn allowed_directories(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// The store that keeps this catalog's tables across restarts, if it has one.
    pub fn metastore(&self) -> Option<&Arc<Metastore>> {
        Some(&self.metastore)
    }

    /// What of this catalog's own `location` falls inside: a table's files (named
    /// `schema.table`) or the warehouse, where tables are written. A `COPY ... TO`
    /// there would change a table behind its owner's back, so it is refused.
    pub fn holder_of(&self, location: &str) -> Option<String> {
        let inside = |root: &str| match (remote_prefix(location), remote_prefix(root)) {
            (Some(target), Some(root)) => target.starts_with(&root),
            (None, None) => match (local_path(location), local_path(root)) {
                (Some(target), Some(root)) => resolve(&target).starts_with(resolve(&root)),
                _ => false,
            },
            _ => false,
        };
        let tables = self.metastore.tables();
        let table = tables.iter().find(|t| t.location.split(',').any(|l| !l.is_empty() && inside(l)));
        match table {
            Some(t) => Some(format!("table {}.{}.{}", self.name, t.schema, t.name)),
            None => self
                .warehouse
                .as_deref()
                .filter(|w| inside(w))
                .map(|w| format!("the warehouse of catalog {} ({w})", self.name)),
        }
    }
}

/// Files of a new Parquet table checked before DataFusion reads them, at most.
const FOOTERS_CHECKED: usize = 10_000;

/// Checks the footers of the Parquet files at a local `location` (a file, or a
/// directory and those below it): each must end in `PAR1` after a metadata length
/// that fits the file. The Parquet reader panics on a length past the file's start
/// ("range start must not be greater than end"), which said neither which file nor
/// what was wrong with it. Object storage locations are not checked here.
pub fn check_parquet_footers(location: &str) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(root) = local_path(location) else { return Ok(()) };
    let mut pending = vec![root];
    let mut checked = 0;
    while let Some(path) = pending.pop() {
        if checked >= FOOTERS_CHECKED {
            break;
        }
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(&path) else { continue };
            // Hidden entries are not the table's (a write's staging, a checksum), as
            // for DataFusion's listing.
            let hidden = |e: &std::fs::DirEntry| e.file_name().to_string_lossy().starts_with(['.', '_']);
            pending.extend(entries.flatten().filter(|e| !hidden(e)).map(|e| e.path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "parquet") && path != Path::new(location) {
            continue;
        }
        checked += 1;
        let corrupt = |why: String| format!("Parquet file {} is corrupt: {why}", path.display());
        let Ok(mut file) = std::fs::File::open(&path) else { continue };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size < 12 {
            return Err(corrupt(format!("it has {size} bytes, fewer than a header and a footer")));
        }
        let mut tail = [0u8; 8];
        if file.seek(SeekFrom::End(-8)).and_then(|_| file.read_exact(&mut tail)).is_err() {
            return Err(corrupt("its footer cannot be read".into()));
        }
        if &tail[4..] != b"PAR1" && &tail[4..] != b"PARE" {
            return Err(corrupt("it does not end in the Parquet magic PAR1".into()));
        }
        let metadata = i32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if metadata < 0 || metadata as u64 + 12 > size {
            return Err(corrupt(format!("its footer claims {metadata} bytes of metadata, the file has {size}")));
        }
    }
    Ok(())
}

/// A location a catalog may name: an absolute local path or `s3://bucket/...`.
pub fn check_location(a: &str) -> Result<(), String> {
    if let Some(rest) = a.strip_prefix("s3://") {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("'{a}' names no bucket"));
        }
        if has_dot_segments(a) || a.contains('%') {
            return Err(format!("'{a}' holds '.', '..' or '%' segments"));
        }
        return Ok(());
    }
    match local_path(a) {
        Some(p) if p.is_absolute() => Ok(()),
        Some(_) => Err(format!("'{a}' is not an absolute path")),
        None => Err(format!("'{a}': only local paths and s3:// locations are supported")),
    }
}

/// Whether an object store location has `.` or `..` segments, which URL parsing
/// would apply after a prefix check had passed them.
fn has_dot_segments(location: &str) -> bool {
    location.split('/').any(|seg| seg == ".." || seg == ".")
}

/// `s3://bucket/prefix` as a prefix ending in `/`; None for local paths.
fn remote_prefix(location: &str) -> Option<String> {
    let rest = location.strip_prefix("s3://")?;
    let mut p = format!("s3://{rest}");
    if !p.ends_with('/') {
        p.push('/');
    }
    Some(p)
}

/// The real place a local path names: the longest existing ancestor with its
/// symbolic links resolved, then the rest with `.` and `..` applied, so neither a
/// link nor `..` leads out of an allowed directory.
pub(crate) fn resolve(path: &Path) -> PathBuf {
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

    fn connector_name(&self) -> &str {
        if self.delta_lake {
            "delta_lake"
        } else {
            "files"
        }
    }

    fn allows_location(&self, location: &str) -> bool {
        // URLs decode `%2e%2e` into `..` after this check would have passed it.
        if location.contains('%') {
            return false;
        }
        if let Some(prefix) = remote_prefix(location) {
            return !has_dot_segments(location)
                && self.allowed_remote.iter().any(|root| prefix.starts_with(root.as_str()));
        }
        let Some(path) = local_path(location) else { return false };
        let real = resolve(&path);
        self.allowed.iter().any(|root| real.starts_with(root))
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        self.catalog.clone()
    }

    /// Every catalog naming buckets has a scope, settings or not: a bucket is reached
    /// only as the catalog that allows it says (the AWS environment when it says
    /// nothing), never with another catalog's endpoint and keys.
    fn s3_scope(&self) -> Option<S3Scope> {
        (!self.allowed_remote.is_empty())
            .then(|| S3Scope { prefixes: self.allowed_remote.clone(), settings: self.s3.clone().unwrap_or_default() })
    }

    fn files(&self) -> Option<&FilesConnector> {
        Some(self)
    }

    fn writes(&self) -> Option<&dyn super::writes::ConnectorWrites> {
        Some(self)
    }

    /// A file scan (in-memory tables, like `information_schema`'s, stay on the
    /// coordinator).
    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        is_file_scan(plan)
    }
}

/// Whether `plan` is DataFusion's scan of files (Parquet, CSV, JSON), which every
/// catalog of files plans its tables as.
pub fn is_file_scan(plan: &dyn ExecutionPlan) -> bool {
    (plan as &dyn std::any::Any)
        .downcast_ref::<DataSourceExec>()
        .is_some_and(|d| (d.data_source().as_ref() as &dyn std::any::Any).is::<FileScanConfig>())
}

/// Files spread over `n` groups of about equal bytes, biggest first: the file
/// groups of a scan that lists its own files (Delta Lake, Iceberg).
pub fn balance_by_bytes(mut files: Vec<PartitionedFile>, n: usize) -> Vec<FileGroup> {
    let n = n.clamp(1, files.len().max(1));
    files.sort_by_key(|f| std::cmp::Reverse(f.object_meta.size));
    let mut groups: Vec<(u64, Vec<PartitionedFile>)> = vec![(0, Vec::new()); n];
    for f in files {
        let smallest = groups.iter_mut().min_by_key(|(bytes, _)| *bytes).expect("at least one group");
        smallest.0 += f.object_meta.size;
        smallest.1.push(f);
    }
    groups.into_iter().filter(|(_, g)| !g.is_empty()).map(|(_, g)| FileGroup::new(g)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_balanced_by_bytes() {
        let file = |name: &str, size: u64| PartitionedFile::new(name, size);
        let groups =
            balance_by_bytes(vec![file("a", 100), file("b", 60), file("c", 50), file("d", 10), file("e", 1)], 2);
        let bytes: Vec<u64> = groups.iter().map(|g| g.iter().map(|f| f.object_meta.size).sum()).collect();
        assert_eq!(bytes, vec![111, 110]);
        assert_eq!(balance_by_bytes(vec![file("a", 1)], 8).len(), 1, "no empty groups");
    }

    #[test]
    fn locations_must_stay_under_an_allowed_directory() {
        let root_tmp = tempfile::Builder::new().prefix("flotilla-files-").tempdir().unwrap();
        let root = root_tmp.path().to_path_buf();
        let data = root.join("data");
        std::fs::create_dir_all(data.join("t")).unwrap();
        let c = FilesConnector::new("files", &[data.display().to_string()]);
        assert!(c.allows_location(&format!("{}/t/", data.display())));
        assert!(c.allows_location(&format!("file://{}/new/part.parquet", data.display())));
        assert!(!c.allows_location("/etc/passwd"));
        assert!(!c.allows_location(&format!("{}/t/../../secret", data.display())), "no way out with ..");
        assert!(!c.allows_location(&format!("{}-other/t", data.display())), "a sibling with a common prefix");
        assert!(!c.allows_location("s3://bucket/t/"));
        let s3 = FilesConnector::new("lake", &["s3://bucket/warehouse".to_string()]);
        assert!(s3.allows_location("s3://bucket/warehouse/t/"));
        assert!(s3.allows_location("s3://bucket/warehouse"));
        assert!(!s3.allows_location("s3://bucket/warehouse-other/t/"));
        assert!(!s3.allows_location("s3://bucket/warehouse/../secret/"));
        assert!(!s3.allows_location("s3://bucket/warehouse/%2e%2e/secret/"), "no way out encoded");
        assert!(!c.allows_location(&format!("file://{}/t/%2e%2e/%2e%2e/etc/", data.display())));
        assert!(!s3.allows_location("s3://other/warehouse/t/"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", data.join("link")).unwrap();
            assert!(!c.allows_location(&format!("{}/link/passwd", data.display())), "no way out by a link");
        }
        assert!(!FilesConnector::new("files", &[]).allows_location(&format!("{}/t/", data.display())));
        assert!(FilesConnector::parse_allowed("/a, s3://b/x").unwrap().len() == 2);
        assert!(FilesConnector::parse_allowed("s3://").is_err());
        assert!(FilesConnector::parse_allowed("s3://b/../x").is_err());
        assert!(FilesConnector::parse_allowed("gs://b/x").is_err());
        assert!(FilesConnector::parse_allowed("relative").is_err());
    }

    #[test]
    fn corrupt_parquet_footers_are_named() {
        let root_tmp = tempfile::Builder::new().prefix("flotilla-footers-").tempdir().unwrap();
        let root = root_tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("p=1")).unwrap();
        let good = [b"PAR1".as_slice(), &[0u8; 20], &20i32.to_le_bytes(), b"PAR1"].concat();
        std::fs::write(root.join("p=1/good.parquet"), &good).unwrap();
        std::fs::write(root.join("notes.txt"), b"not a table file").unwrap();
        assert_eq!(check_parquet_footers(&root.display().to_string()), Ok(()));
        let bad = [b"PAR1".as_slice(), &[0u8; 100], &i32::MAX.to_le_bytes(), b"PAR1"].concat();
        std::fs::write(root.join("p=1/bad.parquet"), &bad).unwrap();
        let e = check_parquet_footers(&format!("{}/", root.display())).unwrap_err();
        assert!(e.contains("bad.parquet is corrupt") && e.contains("2147483647 bytes of metadata"), "{e}");
        std::fs::write(root.join("p=1/bad.parquet"), b"PAR1 no footer at all").unwrap();
        let e = check_parquet_footers(&root.join("p=1/bad.parquet").display().to_string()).unwrap_err();
        assert!(e.contains("does not end in the Parquet magic"), "{e}");
    }
}
