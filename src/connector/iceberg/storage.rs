//! iceberg-rust's file access (`iceberg::io::Storage`) over our own object stores,
//! so that an Iceberg catalog reads and writes its metadata, manifests and data files
//! through the same guarded stores as every other catalog: local files only under
//! its allowed directories, S3 only under its allowed prefixes and with its `s3.*`
//! settings. The catalog builds one `ObjectStoreStorage` over its `ObjectStores` and
//! hands iceberg-rust the factory that returns it.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::execution::object_store::ObjectStoreRegistry;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig, StorageFactory};
use iceberg::{Error, ErrorKind};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::connector::object_storage::ObjectStores;

/// An iceberg `Storage` over a catalog's object stores. iceberg-rust's storage trait
/// must be serializable (it ships storages between processes); ours never travels,
/// and a deserialized one has no stores and refuses every call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectStoreStorage {
    #[serde(skip)]
    stores: Option<Arc<ObjectStores>>,
}

impl ObjectStoreStorage {
    pub fn new(stores: Arc<ObjectStores>) -> Self {
        ObjectStoreStorage { stores: Some(stores) }
    }

    /// The store holding `location` and the object's path in it. Iceberg names files
    /// by absolute URL (`s3://bucket/key`, `file:///dir/file`) or by absolute path.
    fn locate(&self, location: &str) -> iceberg::Result<(Arc<dyn ObjectStore>, Path)> {
        let stores = self
            .stores
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Unexpected, "an Iceberg storage without object stores"))?;
        let url = object_url(location).map_err(|e| Error::new(ErrorKind::DataInvalid, e))?;
        let store = stores.get_store(&url).map_err(|e| Error::new(ErrorKind::Unexpected, e.to_string()))?;
        let path = object_path(location).map_err(|e| Error::new(ErrorKind::DataInvalid, e))?;
        Ok((store, path))
    }
}

/// The object's path in its store: the location's path as written, never
/// percent-decoded. Iceberg's Java writers and pyiceberg treat a location as an
/// opaque string (the partition value `a/b` is the directory `name=a%2Fb`, those
/// very characters), and so do ours.
pub fn object_path(location: &str) -> Result<Path, String> {
    let raw = match location.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => location.strip_prefix("file:").unwrap_or(location),
    };
    Path::parse(raw).map_err(|e| format!("'{location}': {e}"))
}

/// A location as Iceberg writes it: a local path as `file://` and the path as it
/// is (not percent-encoded), anything else unchanged.
pub fn raw_location(location: &str) -> String {
    match location.strip_prefix("file:") {
        _ if location.starts_with('/') => format!("file://{location}"),
        Some(rest) if !rest.starts_with("//") => format!("file://{rest}"),
        _ => location.to_string(),
    }
}

/// `location` as a URL an object store registry knows: local paths as `file://`.
pub fn object_url(location: &str) -> Result<Url, String> {
    let url = if location.starts_with('/') {
        Url::from_file_path(location).map_err(|_| format!("'{location}' is not an absolute path"))
    } else if let Some(rest) = location.strip_prefix("file:").filter(|r| !r.starts_with("//")) {
        // `file:/dir/file`, as some writers spell it.
        Url::from_file_path(rest).map_err(|_| format!("'{location}' is not an absolute path"))
    } else {
        Url::parse(location).map_err(|e| format!("'{location}' is not a location: {e}"))
    }?;
    match url.scheme() {
        "file" | "s3" => Ok(url),
        "s3a" | "s3n" => {
            // Hadoop's names for S3, which Java writers leave in metadata.
            let rest = &url.as_str()[url.scheme().len()..];
            Url::parse(&format!("s3{rest}")).map_err(|e| format!("'{location}': {e}"))
        }
        other => Err(format!("'{location}': flotilla reads Iceberg files from local disk and S3, not {other}://")),
    }
}

fn store_error(location: &str, e: object_store::Error) -> Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => ErrorKind::DataInvalid,
        _ => ErrorKind::Unexpected,
    };
    Error::new(kind, format!("{location}: {e}"))
}

#[async_trait]
#[typetag::serde(name = "flotilla-object-store")]
impl Storage for ObjectStoreStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let (store, p) = self.locate(path)?;
        match store.head(&p).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_error(path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let (store, p) = self.locate(path)?;
        let meta = store.head(&p).await.map_err(|e| store_error(path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let (store, p) = self.locate(path)?;
        let got = store.get(&p).await.map_err(|e| store_error(path, e))?;
        got.bytes().await.map_err(|e| store_error(path, e))
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (store, p) = self.locate(path)?;
        Ok(Box::new(ObjectRead { store, path: p, location: path.to_string() }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let (store, p) = self.locate(path)?;
        store.put(&p, PutPayload::from(bs)).await.map(|_| ()).map_err(|e| store_error(path, e))
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let (store, p) = self.locate(path)?;
        Ok(Box::new(ObjectWrite { store, path: p, location: path.to_string(), buffer: Vec::new(), closed: false }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let (store, p) = self.locate(path)?;
        match store.delete(&p).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let (store, p) = self.locate(path)?;
        let mut listed = store.list(Some(&p));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| store_error(path, e))?;
            match store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(path, e)),
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Byte ranges of one object, read on demand (iceberg-rust reads manifests whole
/// and Parquet footers by range).
struct ObjectRead {
    store: Arc<dyn ObjectStore>,
    path: Path,
    location: String,
}

#[async_trait]
impl FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.store.get_range(&self.path, range).await.map_err(|e| store_error(&self.location, e))
    }
}

/// A whole object written at `close`: metadata and manifests are small, and a put
/// of the whole object is atomic on every store (no half-written manifest is ever
/// visible).
struct ObjectWrite {
    store: Arc<dyn ObjectStore>,
    path: Path,
    location: String,
    buffer: Vec<u8>,
    closed: bool,
}

#[async_trait]
impl FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        if self.closed {
            return Err(Error::new(ErrorKind::Unexpected, format!("{}: written after close", self.location)));
        }
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Err(Error::new(ErrorKind::Unexpected, format!("{}: closed twice", self.location)));
        }
        let bytes = Bytes::from(std::mem::take(&mut self.buffer));
        self.store
            .put(&self.path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| store_error(&self.location, e))
    }
}

/// Hands iceberg-rust the one storage of a catalog, whatever properties it asks
/// with: the catalog's own settings are already in its object stores.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectStoreStorageFactory {
    #[serde(skip)]
    storage: ObjectStoreStorage,
}

impl ObjectStoreStorageFactory {
    pub fn new(storage: ObjectStoreStorage) -> Self {
        ObjectStoreStorageFactory { storage }
    }
}

#[typetag::serde(name = "flotilla-object-store-factory")]
impl StorageFactory for ObjectStoreStorageFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.storage.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iceberg_locations_become_store_urls() {
        assert_eq!(object_url("/data/w/t/m.json").unwrap().as_str(), "file:///data/w/t/m.json");
        assert_eq!(object_url("file:///data/w/x").unwrap().as_str(), "file:///data/w/x");
        assert_eq!(object_url("file:/data/w/x").unwrap().as_str(), "file:///data/w/x");
        assert_eq!(object_url("s3://b/w/x.avro").unwrap().as_str(), "s3://b/w/x.avro");
        assert_eq!(object_url("s3a://b/w/x.avro").unwrap().as_str(), "s3://b/w/x.avro");
        assert!(object_url("gs://b/x").unwrap_err().contains("not gs://"));
        assert!(object_url("relative/x").is_err());
    }

    #[test]
    fn object_paths_are_the_locations_as_written() {
        let parts = |l: &str| object_path(l).unwrap().parts().map(|p| p.as_ref().to_string()).collect::<Vec<_>>();
        assert_eq!(parts("file:///w/t/data/name=a%2Fb/f.parquet"), ["w", "t", "data", "name=a%2Fb", "f.parquet"]);
        assert_eq!(parts("file:/w/my dir/f"), ["w", "my dir", "f"]);
        assert_eq!(parts("/w/x"), ["w", "x"]);
        assert_eq!(parts("s3://bucket/w/name=a%2Fb/f"), ["w", "name=a%2Fb", "f"]);
        assert_eq!(raw_location("/w/my dir"), "file:///w/my dir");
        assert_eq!(raw_location("file:/w"), "file:///w");
        assert_eq!(raw_location("file:///w"), "file:///w");
        assert_eq!(raw_location("s3://b/w"), "s3://b/w");
    }
}
