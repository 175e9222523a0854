//! Staging directories of writes (`LOCATION/.flotilla-staging-QUERY-xxxxxx/`, see
//! `write`): their name, and the sweep that removes those a coordinator left when it
//! died mid-write. `start_coordinator` sweeps after the metastores are read and
//! before the first query, and once more a little later: a staging directory whose
//! query id is not of this process (its incarnation ends every query id) belongs to a
//! query that no longer exists. The second sweep takes what the writers of the dead
//! coordinator's queries made before their workers heard of the new one and stopped
//! them. Without the sweeps a killed `CREATE TABLE ... AS` left its files, which
//! survived the restart and made the same statement fail ("already holds files").

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use futures::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;

use crate::connector::Connectors;

pub use crate::connector::staged_files::in_staging;
pub use crate::connector::writes::STAGING_PREFIX;

/// Whether a staging directory's name is of a query of the coordinator `incarnation`.
fn of_incarnation(name: &str, incarnation: &str) -> bool {
    let query = name.strip_prefix(STAGING_PREFIX).and_then(|rest| rest.rsplit_once('-')).map(|(q, _)| q);
    query.is_some_and(|q| q.rsplit('_').next() == Some(incarnation))
}

/// Removes the staging directories directly inside every table location of the
/// catalogs of files and inside every table directory of their warehouses
/// (`WAREHOUSE/SCHEMA/TABLE/`), but those of this coordinator's (`incarnation`)
/// queries. Returns how many it removed; what it cannot reach is logged and left.
pub async fn sweep(connectors: &Connectors, runtime: &RuntimeEnv, incarnation: &str) -> usize {
    let mut places = Vec::new();
    for files in connectors.files_catalogs() {
        if let Some(store) = files.metastore() {
            places.extend(
                store.tables().iter().flat_map(|t| t.location.split(',').map(str::to_string).collect::<Vec<_>>()),
            );
        }
        if let Some(warehouse) = files.warehouse() {
            let warehouse = format!("{}/", warehouse.trim_end_matches('/'));
            for schema in subdirectories(runtime, &warehouse).await {
                places.extend(subdirectories(runtime, &schema).await);
            }
        }
    }
    places.sort();
    places.dedup();
    let mut removed = 0;
    for place in places {
        for dir in subdirectories(runtime, &place).await {
            let name = dir.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
            if name.starts_with(STAGING_PREFIX) && !of_incarnation(name, incarnation) {
                match remove(runtime, &dir).await {
                    Ok(()) => {
                        tracing::info!("removed the staging directory {dir} of a query that no longer exists");
                        removed += 1;
                    }
                    Err(e) => tracing::warn!("cannot remove the stale staging directory {dir}: {e}"),
                }
            }
        }
    }
    removed
}

fn store_of(
    runtime: &RuntimeEnv,
    location: &str,
) -> datafusion::error::Result<(Arc<dyn ObjectStore>, ListingTableUrl)> {
    let url = ListingTableUrl::parse(location)?;
    Ok((runtime.object_store(url.object_store())?, url))
}

/// The directories directly inside `location` (a directory, ending in `/`), as
/// locations ending in `/`; none when it cannot be listed.
async fn subdirectories(runtime: &RuntimeEnv, location: &str) -> Vec<String> {
    let location = format!("{}/", location.trim_end_matches('/'));
    let Ok((store, url)) = store_of(runtime, &location) else { return Vec::new() };
    let Ok(listed) = store.list_with_delimiter(Some(url.prefix())).await else { return Vec::new() };
    listed.common_prefixes.iter().filter_map(|p| p.filename().map(|name| format!("{location}{name}/"))).collect()
}

/// Removes a directory and everything below it.
async fn remove(runtime: &RuntimeEnv, dir: &str) -> Result<(), String> {
    if let Some(path) = crate::connector::staged_files::local_dir(dir) {
        return tokio::fs::remove_dir_all(path).await.map_err(|e| e.to_string());
    }
    let (store, url) = store_of(runtime, dir).map_err(|e| e.to_string())?;
    let files: Vec<_> = store.list(Some(url.prefix())).filter_map(|r| async { r.ok() }).collect().await;
    for f in files {
        store.delete(&f.location).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::files::FilesSettings;

    #[tokio::test]
    async fn stale_staging_directories_go_and_tables_stay() {
        let root_tmp = tempfile::Builder::new().prefix("flotilla-sweep-").tempdir().unwrap();
        let root = root_tmp.path().to_path_buf();
        let warehouse = root.join("warehouse");
        let table = warehouse.join("s").join("t");
        let stale = table.join(format!("{STAGING_PREFIX}20261201_000001_00001_abcde-xyz123"));
        std::fs::create_dir_all(stale.join("w0-abc")).unwrap();
        std::fs::write(stale.join("w0-abc").join("part.parquet"), b"half written").unwrap();
        std::fs::write(table.join("part-0.parquet"), b"the table").unwrap();
        let settings = FilesSettings {
            allowed: vec![root.display().to_string()],
            warehouse: Some(warehouse.display().to_string()),
            ..Default::default()
        };
        let connectors = Connectors::builtin_with(settings, Default::default());
        // A write of this coordinator's (incarnation `fghij`) is its own.
        let own = table.join(format!("{STAGING_PREFIX}20261201_000002_fghij-abc123"));
        std::fs::create_dir_all(own.join("w0-abc")).unwrap();
        assert_eq!(sweep(&connectors, &connectors.runtime(), "fghij").await, 1);
        assert!(!stale.exists(), "the stale staging directory is gone");
        assert!(own.exists(), "a running write's staging stays");
        assert!(table.join("part-0.parquet").exists(), "the table's own file stays");
        assert_eq!(sweep(&connectors, &connectors.runtime(), "fghij").await, 0, "nothing more to remove");
    }
}
