//! Stores behind a guard that checks each path, at the moment it is opened, listed,
//! written or removed, against the process's own allowed locations (its catalogs'
//! `files.allowed-locations` and warehouses): object_store's `LocalFileSystem` under
//! the allowed directories, and each S3 bucket's client under the allowed key
//! prefixes of that bucket. `ObjectStores` serves them; a worker's scans and writes,
//! the coordinator's listings and `COPY ... TO` all go through them.
//!
//! Why here and not only at planning: a plan checked on the coordinator can be
//! stale (a directory swapped for a symbolic link after `CREATE TABLE`) or forged (a
//! worker without a shared secret takes plans from anyone). The guard resolves
//! symbolic links and `..` before it compares, so a link cannot lead out either.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use super::files::resolve;

/// The directories local files may be read and written under, resolved. Clones share
/// the list: a worker of the built-in catalogs adds its coordinator's (`adopt`).
#[derive(Debug, Clone, Default)]
pub struct AllowedDirectories(Arc<parking_lot::RwLock<Vec<PathBuf>>>);

impl AllowedDirectories {
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        AllowedDirectories(Arc::new(parking_lot::RwLock::new(dirs.into_iter().map(|d| resolve(&d)).collect())))
    }

    /// Whether the real place `path` names lies under one of the directories.
    pub fn allows(&self, path: &std::path::Path) -> bool {
        let real = resolve(path);
        self.0.read().iter().any(|root| real.starts_with(root))
    }

    /// Adds the directories not yet allowed; returns those added.
    pub fn adopt(&self, dirs: &[PathBuf]) -> Vec<PathBuf> {
        let mut list = self.0.write();
        let mut added = Vec::new();
        for d in dirs.iter().map(|d| resolve(d)) {
            if !list.contains(&d) {
                list.push(d.clone());
                added.push(d);
            }
        }
        added
    }
}

/// Why the guard refused a path.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is outside this node's allowed locations (files.allowed-locations)")]
pub struct OutsideAllowedLocations(String);

/// Whether `e` is an object store's refusal of a path (the guard's, or a bucket's):
/// the query asked for files it may not touch, a `PERMISSION_DENIED`.
pub fn is_refused_path(e: &datafusion::error::DataFusionError) -> bool {
    matches!(e.find_root(), datafusion::error::DataFusionError::ObjectStore(o)
        if matches!(o.as_ref(), object_store::Error::PermissionDenied { .. }))
}

/// Which paths a guarded store may touch: the reason it refuses one (the path as
/// shown to the user), or None to let it through.
pub trait PathRule: fmt::Debug + Send + Sync + 'static {
    fn refuses(&self, location: &Path) -> Option<String>;
}

/// Local paths under the allowed directories, symbolic links resolved.
#[derive(Debug)]
struct UnderDirectories(AllowedDirectories);

impl PathRule for UnderDirectories {
    fn refuses(&self, location: &Path) -> Option<String> {
        match LocalFileSystem::new().path_to_filesystem(location) {
            Ok(path) if self.0.allows(&path) => None,
            Ok(path) => Some(path.display().to_string()),
            Err(_) => Some(location.to_string()),
        }
    }
}

/// Keys of one bucket under the allowed prefixes (`dir/` for `s3://bucket/dir/`; an
/// empty one allows the whole bucket).
#[derive(Debug)]
pub struct UnderPrefixes {
    pub bucket: String,
    pub prefixes: Vec<String>,
}

impl PathRule for UnderPrefixes {
    fn refuses(&self, location: &Path) -> Option<String> {
        let key = location.as_ref();
        let inside = self.prefixes.iter().any(|p| {
            let p = p.trim_end_matches('/');
            p.is_empty() || key == p || key.strip_prefix(p).is_some_and(|rest| rest.starts_with('/'))
        });
        (!inside).then(|| format!("s3://{}/{key}", self.bucket))
    }
}

/// A store that checks every path it is asked to open, list, write or remove against
/// its rule, at that moment.
#[derive(Debug)]
pub struct Guarded {
    inner: Arc<dyn ObjectStore>,
    rule: Arc<dyn PathRule>,
}

impl Guarded {
    pub fn new(inner: Arc<dyn ObjectStore>, rule: impl PathRule) -> Self {
        Guarded { inner, rule: Arc::new(rule) }
    }

    /// The local file system under `allowed` only.
    pub fn local_files(allowed: AllowedDirectories) -> Self {
        Self::new(Arc::new(LocalFileSystem::new()), UnderDirectories(allowed))
    }

    fn check(&self, location: &Path) -> Result<()> {
        check(self.rule.as_ref(), location)
    }

    fn check_prefix(&self, prefix: Option<&Path>) -> Result<()> {
        self.check(prefix.unwrap_or(&Path::default()))
    }
}

fn check(rule: &dyn PathRule, location: &Path) -> Result<()> {
    match rule.refuses(location) {
        None => Ok(()),
        Some(shown) => Err(object_store::Error::PermissionDenied {
            path: shown.clone(),
            source: Box::new(OutsideAllowedLocations(shown)),
        }),
    }
}

impl fmt::Display for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guarded({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Guarded {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.check(location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.check(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.check(location)?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check(location)?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let rule = self.rule.clone();
        let checked = locations.map(move |l| {
            let l = l?;
            check(rule.as_ref(), &l).map(|()| l)
        });
        self.inner.delete_stream(checked.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.check_prefix(prefix) {
            Ok(()) => self.inner.list(prefix),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.check_prefix(prefix) {
            Ok(()) => self.inner.list_with_offset(prefix, offset),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.check_prefix(prefix)?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    #[tokio::test]
    async fn paths_outside_the_allowed_directories_are_refused_when_opened() {
        let root_tmp = tempfile::Builder::new().prefix("flotilla-guard-").tempdir().unwrap();
        let root = root_tmp.path().to_path_buf();
        let (inside, outside) = (root.join("inside"), root.join("outside"));
        std::fs::create_dir_all(inside.join("t")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.csv"), "s\n").unwrap();
        let store = Guarded::local_files(AllowedDirectories::new([inside.clone()]));
        let at = |p: &std::path::Path| Path::from_absolute_path(p).unwrap();

        store.put(&at(&inside.join("t/a.csv")), "a\n".into()).await.unwrap();
        let read = store.get(&at(&inside.join("t/a.csv"))).await.unwrap().bytes().await.unwrap();
        assert_eq!(&read[..], b"a\n");
        let listed: Vec<_> = store.list(Some(&at(&inside))).collect().await;
        assert_eq!(listed.len(), 1);

        let denied = |r: Result<()>| matches!(r, Err(object_store::Error::PermissionDenied { .. }));
        assert!(denied(store.get(&at(&outside.join("secret.csv"))).await.map(|_| ())));
        assert!(denied(store.put(&at(&outside.join("new.csv")), "x".into()).await.map(|_| ())));
        assert!(!outside.join("new.csv").exists(), "nothing written outside");
        assert!(denied(store.list_with_delimiter(Some(&at(&outside))).await.map(|_| ())));
        let listed: Vec<_> = store.list(Some(&at(&outside))).collect().await;
        assert!(listed.len() == 1 && listed[0].is_err());
        assert!(denied(store.copy(&at(&outside.join("secret.csv")), &at(&inside.join("t/b.csv"))).await));
        let gone: Vec<_> =
            store.delete_stream(futures::stream::iter([Ok(at(&outside.join("secret.csv")))]).boxed()).collect().await;
        assert!(gone[0].is_err() && outside.join("secret.csv").exists());
        #[cfg(unix)]
        {
            // A table's directory swapped for a link after the plan was checked.
            std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
            assert!(denied(store.get(&at(&inside.join("link/secret.csv"))).await.map(|_| ())));
            assert!(denied(store.put(&at(&inside.join("link/x.csv")), "x".into()).await.map(|_| ())));
            std::os::unix::fs::symlink(outside.join("secret.csv"), inside.join("t/evil.csv")).unwrap();
            assert!(denied(store.get(&at(&inside.join("t/evil.csv"))).await.map(|_| ())), "a file linked out");
        }
    }

    #[test]
    fn keys_outside_a_buckets_allowed_prefixes_are_refused() {
        let rule = UnderPrefixes { bucket: "b".into(), prefixes: vec!["lake/".into(), "other/x".into()] };
        for key in ["lake", "lake/t/part-0.parquet", "other/x/y.csv"] {
            assert_eq!(rule.refuses(&Path::from(key)), None, "{key}");
        }
        for key in ["", "lakehouse/t.parquet", "secret/t.csv", "other/xy/z.csv"] {
            assert_eq!(rule.refuses(&Path::from(key)), Some(format!("s3://b/{key}")), "{key}");
        }
        let whole = UnderPrefixes { bucket: "b".into(), prefixes: vec!["".into()] };
        assert_eq!(whole.refuses(&Path::from("anything/at/all")), None);
    }
}
