//! Files a write's writers left in its staging directory (`writes::staging_of`),
//! moved into their table at publish time, taken back out when publishing fails, and
//! removed with the staging directory when the write ends. Used by the connectors
//! whose tables are files: `files` and Iceberg.
//!
//! Why staging: the writers put their files under `LOCATION/.flotilla-staging-QUERY/`,
//! a directory a listing of the table skips, and only the directories that successful
//! writers reported are moved into the table, once every writer has succeeded. S3 has
//! no rename of a directory, so files move one by one; a failure takes back what moved.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use datafusion::datasource::listing::ListingTableUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use futures::{StreamExt, TryStreamExt};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error_code::{ErrorCode, QueryError};

/// An object store's failure at `location`.
pub fn external(e: &dyn fmt::Display, location: &str) -> QueryError {
    QueryError::new(ErrorCode::ObjectStoreError, format!("{location}: {e}"))
}

/// The object store holding `location`, and its URL.
pub fn store_of(runtime: &RuntimeEnv, location: &str) -> Result<(Arc<dyn ObjectStore>, ListingTableUrl), QueryError> {
    let url = ListingTableUrl::parse(location).map_err(|e| external(&e, location))?;
    let store = runtime.object_store(url.object_store()).map_err(|e| external(&e, location))?;
    Ok((store, url))
}

/// Whether the object at `path` lies in a staging directory.
pub fn in_staging(path: &Path) -> bool {
    path.parts().any(|p| p.as_ref().starts_with(super::writes::STAGING_PREFIX))
}

/// The local directory of a location (`/x`, `file:///x`); None for other schemes.
pub fn local_dir(location: &str) -> Option<std::path::PathBuf> {
    let url = url::Url::parse(location).ok().filter(|u| u.scheme() == "file");
    match url {
        Some(u) => u.to_file_path().ok(),
        None if !location.contains("://") => Some(std::path::PathBuf::from(location)),
        None => None,
    }
}

/// Where a file a writer left at `parts` (below its reported directory) goes below
/// the table's prefix.
pub type Destination<'a> = &'a (dyn Fn(&Path, Vec<PathPart<'_>>) -> Result<Path, QueryError> + Sync);

/// The plain destination: the same relative place in the table.
pub fn same_place(table: &Path, parts: Vec<PathPart<'_>>) -> Result<Path, QueryError> {
    Ok(parts.into_iter().fold(table.clone(), |dest, part| dest.join(part)))
}

/// One write's staged files and the table they go into.
pub struct StagedFiles {
    pub store: Arc<dyn ObjectStore>,
    pub table_url: ListingTableUrl,
    /// The table's location, for messages.
    pub location: String,
    pub staging: String,
}

impl StagedFiles {
    pub fn new(runtime: &RuntimeEnv, location: &str, staging: &str) -> Result<Self, QueryError> {
        let (store, table_url) = store_of(runtime, location)?;
        Ok(StagedFiles { store, table_url, location: location.to_string(), staging: staging.to_string() })
    }

    /// Moves every file of the reported directories into the table; the files moved
    /// are in `moved` even when a later one fails (for `take_back`).
    pub async fn move_into_table(
        &self,
        runtime: &RuntimeEnv,
        directories: &[String],
        destination: Destination<'_>,
        moved: &mut Vec<Path>,
    ) -> Result<(), QueryError> {
        for dir in directories {
            if !dir.starts_with(&self.staging) {
                return Err(QueryError::new(ErrorCode::GenericInternalError, format!("a writer reported '{dir}'")));
            }
            let (_, frag_url) = store_of(runtime, dir)?;
            let files: Vec<_> =
                self.store.list(Some(frag_url.prefix())).try_collect().await.map_err(|e| external(&e, dir))?;
            for f in files {
                let Some(rest) = f.location.prefix_match(frag_url.prefix()) else { continue };
                let dest = destination(self.table_url.prefix(), rest.collect())?;
                self.store.rename(&f.location, &dest).await.map_err(|e| external(&e, &self.location))?;
                moved.push(dest);
            }
        }
        Ok(())
    }

    /// Removes files moved in by a write that then failed.
    pub async fn take_back(&self, moved: &[Path]) {
        for f in moved {
            if let Err(e) = self.store.delete(f).await {
                tracing::error!(location = %self.location, "cannot take back {f} of a failed write: {e}");
            }
        }
    }
}

/// Removes a staging directory now, and once more a little later for files of
/// writers still stopping then (a write cancelled while they ran).
pub async fn remove_staging(runtime: Arc<RuntimeEnv>, staging: String) {
    remove_directory(&runtime, &staging).await;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        remove_directory(&runtime, &staging).await;
    });
}

async fn remove_directory(runtime: &RuntimeEnv, dir: &str) {
    if let Some(path) = local_dir(dir) {
        let _ = tokio::fs::remove_dir_all(path).await;
        return;
    }
    let Ok((store, url)) = store_of(runtime, dir) else { return };
    let files: Vec<_> = store.list(Some(url.prefix())).filter_map(|r| async { r.ok() }).collect().await;
    for f in files {
        let _ = store.delete(&f.location).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_directories_are_told_from_remote_ones() {
        assert_eq!(local_dir("file:///tmp/x/"), Some(std::path::PathBuf::from("/tmp/x/")));
        assert_eq!(local_dir("/tmp/x/"), Some(std::path::PathBuf::from("/tmp/x/")));
        assert_eq!(local_dir("s3://b/x/"), None);
        assert!(in_staging(&Path::from("t/.flotilla-staging-q-abc/w0/f.parquet")));
        assert!(!in_staging(&Path::from("t/part-0.parquet")));
    }
}
