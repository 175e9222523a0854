//! Object storage for catalogs of files: a catalog's S3 settings (Trino's `s3.*`
//! property names) and the object store registry every session of a process reads
//! and writes files through. `Connectors` builds the registry from its catalogs; the
//! coordinator lists and infers schemas with it, workers scan and write with it.
//!
//! A bucket's client is made on first use, from the settings of the catalog whose
//! allowed locations name that bucket (else from the standard AWS environment
//! variables alone). Retries and timeouts are bounded so
//! that an endpoint that is down or a bucket that is missing is a query error within
//! seconds, never a hang.

use std::sync::Arc;
use std::time::Duration;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::aws::AmazonS3Builder;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use url::Url;

use crate::etc::{EtcError, PropertiesFile};

/// The catalog property keys this module reads (`fs.native-s3.enabled` is accepted
/// for Trino compatibility: S3 is always native here).
pub const S3_KEYS: &[&str] = &[
    "s3.endpoint",
    "s3.region",
    "s3.path-style-access",
    "s3.aws-access-key",
    "s3.aws-secret-key",
    "fs.native-s3.enabled",
];

/// How a catalog reaches S3 (or an S3-compatible server).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub path_style: bool,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret: settings end up in logs.
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl S3Settings {
    /// The settings of a catalog file; None when it sets no `s3.*` key.
    pub fn from_properties(p: &PropertiesFile) -> Result<Option<Self>, EtcError> {
        let get = |k: &str| p.get(k).map(str::to_string);
        let path_style = p.parsed("s3.path-style-access", |v| match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("expected true or false".to_string()),
        })?;
        let s = S3Settings {
            endpoint: get("s3.endpoint"),
            region: get("s3.region"),
            path_style: path_style.unwrap_or(false),
            access_key: get("s3.aws-access-key"),
            secret_key: get("s3.aws-secret-key"),
        };
        if s.access_key.is_some() != s.secret_key.is_some() {
            return Err(EtcError::Invalid {
                path: p.path.display().to_string(),
                message: "s3.aws-access-key and s3.aws-secret-key go together".into(),
            });
        }
        Ok((s != S3Settings::default()).then_some(s))
    }

    /// A client for one bucket: the settings over the AWS environment variables.
    pub fn client(&self, bucket: &str) -> object_store::Result<Arc<dyn ObjectStore>> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(e) = &self.endpoint {
            b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
        }
        if let Some(r) = &self.region {
            b = b.with_region(r);
        } else if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
            b = b.with_region("us-east-1");
        }
        if self.path_style {
            b = b.with_virtual_hosted_style_request(false);
        }
        if let (Some(k), Some(s)) = (&self.access_key, &self.secret_key) {
            b = b.with_access_key_id(k).with_secret_access_key(s);
        }
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 3,
            retry_timeout: Duration::from_secs(15),
        };
        // These options replace the ones `from_env` read: plain HTTP is decided again here.
        let env = |k: &str| std::env::var(k).ok();
        let client = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(60))
            .with_allow_http(allows_http(self.endpoint.as_deref(), env));
        Ok(Arc::new(b.with_retry(retry).with_client_options(client).build()?))
    }
}

/// Whether a client may speak plain HTTP: the catalog's endpoint is `http://`, or,
/// without one, the environment's (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT`) is, or the
/// environment allows it (`AWS_ALLOW_HTTP=true`).
fn allows_http(endpoint: Option<&str>, env: impl Fn(&str) -> Option<String>) -> bool {
    let http = |e: &str| e.starts_with("http://");
    match endpoint {
        Some(e) => http(e),
        None => {
            ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"].iter().filter_map(|k| env(k)).any(|e| http(&e))
                || env("AWS_ALLOW_HTTP").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        }
    }
}

/// One catalog's S3 settings and the `s3://` prefixes it allows.
#[derive(Debug, Clone)]
pub struct S3Scope {
    pub prefixes: Vec<String>,
    pub settings: S3Settings,
}

/// The process's object stores: local files, and S3 buckets made on first use.
#[derive(Debug)]
pub struct ObjectStores {
    known: DefaultObjectStoreRegistry,
    scopes: Vec<S3Scope>,
    /// Serialises the making of clients, so one bucket gets one.
    making: parking_lot::Mutex<()>,
}

impl ObjectStores {
    /// S3 buckets as `scopes` say, local files under `local` only.
    pub fn new(scopes: Vec<S3Scope>, local: super::local_files::AllowedDirectories) -> Self {
        let known = DefaultObjectStoreRegistry::new();
        let file = Url::parse("file://").expect("a file URL");
        known.register_store(&file, Arc::new(super::local_files::Guarded::local_files(local)));
        ObjectStores { known, scopes, making: parking_lot::Mutex::new(()) }
    }

    /// The settings for `bucket`: those of the catalog whose allowed locations name
    /// it; None when no catalog names it, and then nothing in it is read or written,
    /// whatever a plan says (a forged plan must not reach buckets with the
    /// environment's credentials).
    fn settings_for(&self, bucket: &str) -> Option<S3Settings> {
        let url = format!("s3://{bucket}/");
        self.scopes
            .iter()
            .find(|s| s.prefixes.iter().any(|p| p.starts_with(&url) || url.starts_with(p.as_str())))
            .map(|s| s.settings.clone())
    }
}

impl ObjectStores {
    /// The key prefixes of `bucket` that any catalog allows (`dir/` of
    /// `s3://bucket/dir/`; empty for the whole bucket).
    fn prefixes_in(&self, bucket: &str) -> Vec<String> {
        let root = format!("s3://{bucket}/");
        let whole = format!("s3://{bucket}");
        self.scopes
            .iter()
            .flat_map(|s| s.prefixes.iter())
            .filter_map(|p| if p == &whole { Some("") } else { p.strip_prefix(root.as_str()) })
            .map(str::to_string)
            .collect()
    }
}

impl ObjectStoreRegistry for ObjectStores {
    fn register_store(&self, url: &Url, store: Arc<dyn ObjectStore>) -> Option<Arc<dyn ObjectStore>> {
        self.known.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.known.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.known.get_store(url) {
            return Ok(store);
        }
        if url.scheme() != "s3" {
            return self.known.get_store(url);
        }
        let _making = self.making.lock();
        if let Ok(store) = self.known.get_store(url) {
            return Ok(store);
        }
        let bucket = url.host_str().unwrap_or_default();
        let settings = self.settings_for(bucket).ok_or_else(|| {
            DataFusionError::ObjectStore(Box::new(object_store::Error::PermissionDenied {
                path: format!("s3://{bucket}"),
                source: format!("bucket {bucket} is in no catalog's allowed locations (files.allowed-locations)")
                    .into(),
            }))
        })?;
        let client = settings
            .client(bucket)
            .map_err(|e| DataFusionError::ObjectStore(Box::new(e)).context(format!("s3://{bucket}")))?;
        // Only keys under the prefixes the catalogs allow in this bucket, whatever a
        // plan says.
        let rule = super::local_files::UnderPrefixes { bucket: bucket.to_string(), prefixes: self.prefixes_in(bucket) };
        let store: Arc<dyn ObjectStore> = Arc::new(super::local_files::Guarded::new(client, rule));
        let base = Url::parse(&format!("s3://{bucket}")).map_err(|e| DataFusionError::External(Box::new(e)))?;
        self.known.register_store(&base, store.clone());
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_http_follows_the_catalog_or_else_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert!(super::allows_http(Some("http://127.0.0.1:9000"), env(&[])));
        assert!(!super::allows_http(Some("https://s3.example"), env(&[("AWS_ALLOW_HTTP", "true")])));
        assert!(super::allows_http(None, env(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")])));
        assert!(super::allows_http(None, env(&[("AWS_ENDPOINT", "http://moto:5000")])));
        assert!(super::allows_http(None, env(&[("AWS_ALLOW_HTTP", "true")])));
        assert!(!super::allows_http(None, env(&[("AWS_ENDPOINT_URL", "https://s3.example")])));
        assert!(!super::allows_http(None, env(&[])));
    }

    use super::*;

    #[test]
    fn settings_come_from_trino_keys_and_keep_the_secret_out_of_logs() {
        let p = PropertiesFile::parse(
            std::path::Path::new("lake.properties"),
            "connector.name=files\ns3.endpoint=http://127.0.0.1:9000\ns3.path-style-access=true\n\
             s3.aws-access-key=AK\ns3.aws-secret-key=SECRET\n",
        )
        .unwrap();
        let s = S3Settings::from_properties(&p).unwrap().unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(s.path_style);
        assert!(!format!("{s:?}").contains("SECRET"));
        let none = PropertiesFile::parse(std::path::Path::new("x.properties"), "connector.name=files\n").unwrap();
        assert!(S3Settings::from_properties(&none).unwrap().is_none());
        let half = PropertiesFile::parse(std::path::Path::new("x.properties"), "s3.aws-access-key=AK\n").unwrap();
        assert!(S3Settings::from_properties(&half).is_err());
    }

    #[test]
    fn a_bucket_takes_the_settings_of_the_catalog_that_allows_it() {
        let a = S3Settings { endpoint: Some("http://a".into()), ..Default::default() };
        let b = S3Settings { endpoint: Some("http://b".into()), ..Default::default() };
        let stores = ObjectStores::new(
            vec![
                S3Scope { prefixes: vec!["s3://one/".into()], settings: a.clone() },
                S3Scope { prefixes: vec!["s3://two/data/".into()], settings: b.clone() },
            ],
            Default::default(),
        );
        assert_eq!(stores.settings_for("two"), Some(b));
        assert_eq!(stores.settings_for("one"), Some(a));
        assert_eq!(stores.settings_for("elsewhere"), None, "no other catalog's keys, nor the environment's");
        let refused = stores.get_store(&Url::parse("s3://elsewhere/x.parquet").unwrap()).unwrap_err();
        assert!(crate::connector::local_files::is_refused_path(&refused), "{refused}");
        let url = Url::parse("s3://two/data/x.parquet").unwrap();
        let first = stores.get_store(&url).unwrap();
        assert!(Arc::ptr_eq(&first, &stores.get_store(&url).unwrap()), "one client per bucket");
    }
}
